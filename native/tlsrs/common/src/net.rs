//! Sockets as pqtimer uses them: a non-blocking TCP connect with TCP_NODELAY and a deadline, poll()
//! waits, TCP_INFO in pqtimer's shape, the local port.

use std::net::Ipv4Addr;
use std::os::fd::RawFd;

use crate::{now_ns, Failure};

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn strerror(e: i32) -> String {
    std::io::Error::from_raw_os_error(e).to_string()
}

/// Waits until fd is ready for `events` (libc::POLLIN/POLLOUT) or the deadline passes (false).
pub fn wait_fd(fd: RawFd, events: i16, deadline: u64) -> bool {
    loop {
        let now = now_ns();
        if now >= deadline {
            return false;
        }
        let ms = (deadline - now).div_ceil(1_000_000).min(i32::MAX as u64) as i32;
        let mut p = libc::pollfd { fd, events, revents: 0 };
        let r = unsafe { libc::poll(&mut p, 1, ms) };
        if r > 0 {
            return true;
        }
        if r < 0 && errno() != libc::EINTR {
            return false;
        }
    }
}

/// A connected socket; closed on drop.
pub struct Socket(pub RawFd);

impl Drop for Socket {
    fn drop(&mut self) {
        unsafe { libc::close(self.0) };
    }
}

/// Non-blocking connect to host:port with TCP_NODELAY set before it (as browsers do), by the deadline.
pub fn tcp_connect(host: Ipv4Addr, port: u16, deadline: u64) -> Result<Socket, Failure> {
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(Failure::new("socket", format!("socket: {}", strerror(errno()))));
    }
    let sock = Socket(fd);
    let one: libc::c_int = 1;
    unsafe {
        libc::setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, &one as *const _ as *const libc::c_void,
                         std::mem::size_of::<libc::c_int>() as u32)
    };
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(host).to_be() },
        sin_zero: [0; 8],
    };
    let r = unsafe { libc::connect(fd, &sa as *const _ as *const libc::sockaddr, std::mem::size_of_val(&sa) as u32) };
    if r != 0 {
        let e = errno();
        if e != libc::EINPROGRESS {
            return Err(connect_failure(e));
        }
    }
    if !wait_fd(fd, libc::POLLOUT, deadline) {
        return Err(Failure::new("connect_timeout", "TCP connect did not complete within the timeout"));
    }
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as u32;
    unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut err as *mut _ as *mut libc::c_void, &mut len) };
    if err != 0 {
        return Err(connect_failure(err));
    }
    Ok(sock)
}

fn connect_failure(e: i32) -> Failure {
    let class = if e == libc::ECONNREFUSED { "connect_refused" } else { "connect_error" };
    Failure::new(class, format!("connect: {}", strerror(e)))
}

pub fn set_nonblocking(fd: RawFd, on: bool) {
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        let flags = if on { flags | libc::O_NONBLOCK } else { flags & !libc::O_NONBLOCK };
        libc::fcntl(fd, libc::F_SETFL, flags);
    }
}

/// TCP_INFO counters in pqtimer's shape.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpCounts {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    pub total_retrans: u32,
    pub rtt_us: u32,
    pub snd_cwnd: u32,
}

/// Offsets in Linux's struct tcp_info (include/uapi/linux/tcp.h), stable ABI.
const TI_RTT: usize = 68;
const TI_SND_CWND: usize = 80;
const TI_TOTAL_RETRANS: usize = 100;
const TI_BYTES_RECEIVED: usize = 128;
const TI_SEGS_OUT: usize = 136;
const TI_SEGS_IN: usize = 140;
const TI_BYTES_SENT: usize = 200;

pub fn tcp_counts(fd: RawFd) -> Option<TcpCounts> {
    let mut buf = [0u8; 256];
    let mut len = buf.len() as u32;
    let r = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, buf.as_mut_ptr() as *mut libc::c_void, &mut len) };
    if r != 0 || (len as usize) < TI_BYTES_SENT + 8 {
        return None;
    }
    let u32_at = |o: usize| u32::from_ne_bytes(buf[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_ne_bytes(buf[o..o + 8].try_into().unwrap());
    Some(TcpCounts {
        bytes_sent: u64_at(TI_BYTES_SENT),
        bytes_received: u64_at(TI_BYTES_RECEIVED),
        segs_out: u32_at(TI_SEGS_OUT),
        segs_in: u32_at(TI_SEGS_IN),
        total_retrans: u32_at(TI_TOTAL_RETRANS),
        rtt_us: u32_at(TI_RTT),
        snd_cwnd: u32_at(TI_SND_CWND),
    })
}

impl TcpCounts {
    /// Two connections' counts as one sample's (a trust anchor recovery's failed first connection and the second):
    /// what crossed adds up; the path's state (RTT, window) is the second's.
    pub fn plus(self, first: TcpCounts) -> TcpCounts {
        TcpCounts {
            bytes_sent: self.bytes_sent + first.bytes_sent,
            bytes_received: self.bytes_received + first.bytes_received,
            segs_out: self.segs_out + first.segs_out,
            segs_in: self.segs_in + first.segs_in,
            total_retrans: self.total_retrans + first.total_retrans,
            ..self
        }
    }
}

pub fn tcp_json(c: &Option<TcpCounts>) -> String {
    match c {
        None => "null".into(),
        Some(c) => format!(
            "{{\"bytes_sent\": {}, \"bytes_received\": {}, \"segs_out\": {}, \"segs_in\": {}, \"retransmits\": {}, \"rtt_us\": {}, \"cwnd\": {}}}",
            c.bytes_sent, c.bytes_received, c.segs_out, c.segs_in, c.total_retrans, c.rtt_us, c.snd_cwnd
        ),
    }
}

pub fn local_port(fd: RawFd) -> Option<u16> {
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of_val(&sa) as u32;
    let r = unsafe { libc::getsockname(fd, &mut sa as *mut _ as *mut libc::sockaddr, &mut len) };
    (r == 0 && sa.sin_family == libc::AF_INET as u16 && sa.sin_port != 0).then(|| u16::from_be(sa.sin_port))
}

/// read(2)/write(2) on a raw fd: Ok(n), or Err(errno).
pub fn read_fd(fd: RawFd, buf: &mut [u8]) -> Result<usize, i32> {
    let r = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
    if r < 0 { Err(errno()) } else { Ok(r as usize) }
}

pub fn write_fd(fd: RawFd, buf: &[u8]) -> Result<usize, i32> {
    let r = unsafe { libc::send(fd, buf.as_ptr() as *const libc::c_void, buf.len(), libc::MSG_NOSIGNAL) };
    if r < 0 { Err(errno()) } else { Ok(r as usize) }
}

pub fn io_failure(during: &str, e: i32) -> Failure {
    if e == libc::ECONNRESET || e == libc::EPIPE {
        Failure::new("closed", format!("{during}: the server closed the connection: {}", strerror(e)))
    } else {
        Failure::new("io", format!("{during}: {}", strerror(e)))
    }
}
