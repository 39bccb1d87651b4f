//! DTLS 1.3 (RFC 9147) over UDP: BoringSSL's client and server as the dtls protocol measures them (pqbench.udp.dtls;
//! the sample is the dtlsgo client's: phases from the client's own datagrams, what crossed, the wire milestone).
//!
//!   pqboring client --transport udp ARGS [--mtu BYTES]
//!   pqboring server --transport udp ARGS [--site-mtu PORT,BYTES ...]
//!                                              a UDP port per site, stateful: BoringSSL's DTLS 1.3 server sends
//!                                              no cookie (its HelloRetryRequest asks only for another key share)
//!
//! Both sides read and write their datagrams through a BIO of ours that stamps each one (CLOCK_MONOTONIC_RAW) and
//! keeps it: the plaintext epoch-0 records say how many ClientHellos left and whether the server
//! answered with a HelloRetryRequest and a cookie. BoringSSL's retransmission timer runs from DTLSv1_get_timeout;
//! each expiry handled is counted.

use std::collections::{HashMap, VecDeque};
use std::ffi::{c_char, c_int, c_long, c_void};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::ptr;

use boring_sys as ffi;
use pqtls_common::client::{self, ClientOpts};
use pqtls_common::{json, now_ns, server, Failure};

use crate::{err_text, step, Step, PROG};

const DEFAULT_MTU: u32 = 1200; // as pion/dtls's, so the two clients' datagrams compare

struct Datagram {
    t: u64,
    size: usize,
    bytes: Vec<u8>, // whole: a post-quantum ServerHello's fragment spans most of its datagram
}

/// One side's datagrams: what our BIO wrote and read.
struct Link {
    fd: RawFd,
    peer: Option<libc::sockaddr_in>, // the server's: where this connection's datagrams go
    inbox: VecDeque<Vec<u8>>,        // the server's: datagrams its loop received for this connection
    sent: Vec<Datagram>,
    received: Vec<Datagram>,
}

fn stamp(b: &[u8]) -> Datagram {
    Datagram { t: now_ns(), size: b.len(), bytes: b.to_vec() }
}

unsafe fn link<'a>(bio: *mut ffi::BIO) -> &'a mut Link {
    &mut *(ffi::BIO_get_data(bio) as *mut Link)
}

unsafe extern "C" fn bio_write(bio: *mut ffi::BIO, buf: *const c_char, len: c_int) -> c_int {
    let l = link(bio);
    ffi::BIO_clear_retry_flags(bio);
    let b = std::slice::from_raw_parts(buf as *const u8, len as usize);
    let n = match &l.peer {
        Some(to) => libc::sendto(l.fd, b.as_ptr() as *const c_void, b.len(), 0, to as *const _ as *const libc::sockaddr,
                                 std::mem::size_of::<libc::sockaddr_in>() as u32),
        None => libc::send(l.fd, b.as_ptr() as *const c_void, b.len(), 0),
    };
    if n > 0 {
        l.sent.push(stamp(b));
    }
    n as c_int
}

unsafe extern "C" fn bio_read(bio: *mut ffi::BIO, buf: *mut c_char, len: c_int) -> c_int {
    let l = link(bio);
    ffi::BIO_clear_retry_flags(bio);
    let out = std::slice::from_raw_parts_mut(buf as *mut u8, len as usize);
    if l.peer.is_some() {
        let Some(d) = l.inbox.pop_front() else {
            ffi::BIO_set_retry_read(bio);
            return -1;
        };
        let n = d.len().min(out.len());
        out[..n].copy_from_slice(&d[..n]);
        l.received.push(stamp(&d));
        return n as c_int;
    }
    let n = libc::recv(l.fd, out.as_mut_ptr() as *mut c_void, out.len(), 0);
    if n < 0 {
        let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if e == libc::EAGAIN || e == libc::EINTR {
            ffi::BIO_set_retry_read(bio);
        }
        return -1;
    }
    l.received.push(stamp(&out[..n as usize]));
    n as c_int
}

unsafe extern "C" fn bio_ctrl(_bio: *mut ffi::BIO, cmd: c_int, _larg: c_long, _parg: *mut c_void) -> c_long {
    (cmd == ffi::BIO_CTRL_FLUSH) as c_long
}

fn method() -> *const ffi::BIO_METHOD {
    static mut METHOD: *mut ffi::BIO_METHOD = ptr::null_mut();
    static ONCE: std::sync::Once = std::sync::Once::new();
    unsafe {
        ONCE.call_once(|| {
            let m = ffi::BIO_meth_new(ffi::BIO_get_new_index() | ffi::BIO_TYPE_SOURCE_SINK, c"pqboring-datagrams".as_ptr());
            ffi::BIO_meth_set_write(m, Some(bio_write));
            ffi::BIO_meth_set_read(m, Some(bio_read));
            ffi::BIO_meth_set_ctrl(m, Some(bio_ctrl));
            METHOD = m;
        });
        METHOD
    }
}

/// An SSL whose datagrams go through `l` (which must outlive it).
unsafe fn attach(ssl: *mut ffi::SSL, l: &mut Link) {
    let bio = ffi::BIO_new(method());
    ffi::BIO_set_data(bio, l as *mut Link as *mut c_void);
    ffi::BIO_set_init(bio, 1);
    ffi::SSL_set_bio(ssl, bio, bio);
}

/// Milliseconds to BoringSSL's next retransmission timer, if one runs.
fn timer_ms(ssl: *mut ffi::SSL) -> Option<u64> {
    let mut tv = ffi::timeval { tv_sec: 0, tv_usec: 0 };
    (unsafe { ffi::DTLSv1_get_timeout(ssl, &mut tv) } == 1).then(|| tv.tv_sec as u64 * 1000 + (tv.tv_usec as u64).div_ceil(1000))
}

// ---- what the datagrams say ---------------------------------------------------------------------

const HANDSHAKE: u8 = 22;
const CLIENT_HELLO: u8 = 1;
const SERVER_HELLO: u8 = 2;
const EXT_COOKIE: u16 = 44;

/// The plaintext epoch-0 handshake fragments of a datagram: (message type, message_seq, fragment body).
fn fragments(mut b: &[u8]) -> Vec<(u8, u16, &[u8])> {
    let mut out = vec![];
    while b.len() >= 13 && b[0] & 0xe0 != 0x20 {  // a DTLSPlaintext header; 001xxxxx is an encrypted record
        let n = u16::from_be_bytes([b[11], b[12]]) as usize;
        if b.len() < 13 + n {
            break;
        }
        let mut body = &b[13..13 + n];
        if b[0] == HANDSHAKE && b[3] == 0 && b[4] == 0 {
            while body.len() >= 12 {
                let flen = (body[9] as usize) << 16 | (body[10] as usize) << 8 | body[11] as usize;
                if body.len() < 12 + flen {
                    break;
                }
                out.push((body[0], u16::from_be_bytes([body[4], body[5]]), &body[12..12 + flen]));
                body = &body[12 + flen..];
            }
        }
        b = &b[13 + n..];
    }
    out
}

/// RFC 8446 §4.1.3: a HelloRetryRequest is a ServerHello whose random is SHA-256("HelloRetryRequest").
const HRR_RANDOM: [u8; 32] = [0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8,
                              0x91, 0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8,
                              0x33, 0x9c];

/// (a HelloRetryRequest, it carries a cookie) of a ServerHello's first fragment.
fn server_hello(body: &[u8]) -> Option<(bool, bool)> {
    if body.len() < 35 {
        return None;
    }
    let retry = body[2..34] == HRR_RANDOM;
    let mut p = 34 + 1 + body[34] as usize + 3; // session id echo, cipher suite, compression
    let end = (p + 2 + u16::from_be_bytes([*body.get(p)?, *body.get(p + 1)?]) as usize).min(body.len());
    p += 2;
    let mut cookie = false;
    while p + 4 <= end {
        let (ty, n) = (u16::from_be_bytes([body[p], body[p + 1]]), u16::from_be_bytes([body[p + 2], body[p + 3]]) as usize);
        cookie |= ty == EXT_COOKIE;
        p += 4 + n;
    }
    Some((retry, cookie))
}

// ---- the client --------------------------------------------------------------------------------

fn dtls_ctx(o: &ClientOpts) -> *mut ffi::SSL_CTX {
    crate::client_ctx(o, unsafe { ffi::DTLS_method() }, ffi::DTLS1_3_VERSION as u16)
}

fn sample_json(o: &ClientOpts, index: u64, f: &Option<Failure>, t: &[(&str, Option<u64>)], start: u64, port: Option<u16>,
               fields: &[(&str, String)]) -> String {
    let mut out = format!("{{\"worker\": {}, \"i\": {index}, \"mode\": ", o.worker);
    json::string(&mut out, &o.mode);
    out.push_str(&format!(", \"ok\": {}, \"error_class\": ", f.is_none()));
    json::opt_string(&mut out, f.as_ref().map(|f| f.class));
    out.push_str(", \"error\": ");
    json::opt_string(&mut out, f.as_ref().map(|f| f.msg.as_str()));
    out.push_str(", \"t_ns\": {");
    for (k, (name, v)) in t.iter().enumerate() {
        out.push_str(if k > 0 { ", " } else { "" });
        json::string(&mut out, name);
        out.push_str(": ");
        json::opt_u64(&mut out, v.map(|v| v.saturating_sub(start)));
    }
    out.push_str(&format!("}}, \"start_mono_ns\": {start}, \"local_port\": "));
    json::opt_u64(&mut out, port.map(u64::from));
    for (k, v) in fields {
        out.push_str(", ");
        json::string(&mut out, k);
        out.push_str(": ");
        out.push_str(v);
    }
    out.push_str("}\n");
    out
}

fn opt_json(v: Option<String>) -> String {
    v.map_or("null".into(), |s| json::quoted(&s))
}

struct Client {
    ctx: *mut ffi::SSL_CTX,
    shares: Vec<u16>,
    addr: SocketAddrV4,
    servername: Option<std::ffi::CString>,
    mtu: u32,
}

impl Client {
    /// One handshake on a fresh UDP socket; the sample's JSON line (index None: a warm-up, not printed).
    fn sample(&self, o: &ClientOpts, index: Option<u64>) -> (bool, String) {
        let wait0 = client::cpu_wait_total_ns();
        let start = now_ns();
        let deadline = start + o.timeout_ms * 1_000_000;
        let sock = match UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).and_then(|s| {
            s.connect(self.addr)?;
            s.set_nonblocking(true)?;
            Ok(s)
        }) {
            Ok(s) => s,
            Err(e) => {
                let f = Some(Failure::new("connect_error", format!("UDP socket: {e}")));
                return (false, sample_json(o, index.unwrap_or(0), &f, &[("start", Some(start))], start, None, &[]));
            }
        };
        let port = sock.local_addr().ok().map(|a| a.port());
        let mut l = Link { fd: sock.as_raw_fd(), peer: None, inbox: VecDeque::new(), sent: vec![], received: vec![] };
        let ssl = unsafe { ffi::SSL_new(self.ctx) };
        let mut timeouts = 0u32;
        let result = unsafe {
            ffi::SSL_set_connect_state(ssl);
            ffi::SSL_set_mtu(ssl, self.mtu);
            if let Err(f) = crate::set_key_shares(ssl, &self.shares) {
                ffi::SSL_free(ssl);
                return (false, sample_json(o, index.unwrap_or(0), &Some(f), &[("start", Some(start))], start, None, &[]));
            }
            if let Some(name) = &self.servername {
                ffi::SSL_set_tlsext_host_name(ssl, name.as_ptr());
                if o.cafile.is_some() {
                    ffi::SSL_set1_host(ssl, name.as_ptr());
                }
            }
            attach(ssl, &mut l);
            loop {
                let r = ffi::SSL_do_handshake(ssl);
                if r == 1 {
                    break Ok(());
                }
                match step(ssl, r, "DTLS handshake") {
                    Step::Failed(f) => break Err(f),
                    Step::Wait(_) => {
                        let now = now_ns();
                        if now >= deadline {
                            break Err(Failure::new("timeout", "DTLS handshake did not complete within the timeout"));
                        }
                        let left = (deadline - now).div_ceil(1_000_000);
                        let wait = timer_ms(ssl).map_or(left, |t| t.min(left));
                        let mut pfd = libc::pollfd { fd: l.fd, events: libc::POLLIN, revents: 0 };
                        if libc::poll(&mut pfd, 1, wait as c_int) == 0 && timer_ms(ssl) == Some(0) {
                            timeouts += 1;
                            if ffi::DTLSv1_handle_timeout(ssl) < 0 {
                                break Err(Failure::new("tls_error", format!("DTLS retransmission: {}", err_text())));
                            }
                        }
                    }
                }
            }
        };
        let done = result.as_ref().ok().map(|_| l.sent.last().map_or(now_ns(), |d| d.t));
        let (group, sigalg, hrr) = unsafe {
            let g = ffi::SSL_get_group_id(ssl);
            let s = ffi::SSL_get_peer_signature_algorithm(ssl);
            (Some(g).filter(|g| *g != 0).map(|g| pqtls_common::group_name(g).map(String::from).unwrap_or(format!("0x{g:04x}"))),
             Some(s).filter(|s| *s != 0).map(|s| pqtls_common::sigalg_name(s).map(String::from).unwrap_or(format!("0x{s:04x}"))),
             ffi::SSL_used_hello_retry_request(ssl) == 1)
        };
        if result.is_ok() {
            unsafe { ffi::SSL_shutdown(ssl) }; // its close_notify is not waited for
        }
        unsafe { ffi::SSL_free(ssl) };
        // what crossed up to the handshake's end (the close_notify after it is not part of it)
        let end = done.unwrap_or(u64::MAX);
        let sent: Vec<&Datagram> = l.sent.iter().filter(|d| d.t <= end).collect();
        // ClientHellos by message_seq (a retransmission repeats its seq), and the datagrams that carried them
        let hello_seqs: std::collections::BTreeSet<u16> = sent.iter().flat_map(|d| fragments(&d.bytes))
            .filter(|f| f.0 == CLIENT_HELLO).map(|f| f.1).collect();
        let hello_datagrams = sent.iter().filter(|d| fragments(&d.bytes).iter().any(|f| f.0 == CLIENT_HELLO)).count();
        let mut cookie = false;
        let mut server_hello_at = None;
        for d in &l.received {
            for (ty, _, body) in fragments(&d.bytes) {
                if let (SERVER_HELLO, Some((retry, c))) = (ty, server_hello(body)) {
                    cookie |= c;
                    if !retry && server_hello_at.is_none() {
                        server_hello_at = Some(d.t);
                    }
                }
            }
        }
        let bytes = |ds: &[&Datagram]| ds.iter().map(|d| d.size).sum::<usize>();
        let received: Vec<&Datagram> = l.received.iter().filter(|d| d.t <= end).collect();
        let counts = json::object(&[
            ("datagrams_sent", sent.len().to_string()), ("datagrams_received", received.len().to_string()),
            ("bytes_sent", bytes(&sent).to_string()), ("bytes_received", bytes(&received).to_string()),
            ("client_hellos", hello_seqs.len().to_string()), ("client_hello_datagrams", hello_datagrams.to_string()),
            ("cookie", cookie.to_string()), ("mtu", self.mtu.to_string()), ("timer_expiries", timeouts.to_string()),
        ]);
        let milestone = done.map(|_| format!("{{\"dir\": \"c2s\", \"offset\": {}, \"edge\": \"first\"}}",
                                             bytes(&sent[..sent.len().saturating_sub(1)])));
        let cpu_wait = match (wait0, client::cpu_wait_total_ns()) {
            (Some(a), Some(b)) => b.saturating_sub(a).to_string(),
            _ => "null".into(),
        };
        let failure = result.err();
        let t = [("start", Some(start)), ("client_hello_sent", l.sent.first().map(|d| d.t)),
                 ("server_hello_received", server_hello_at), ("handshake_done", done)];
        let fields = [("transport", json::quoted("udp")), ("group", opt_json(group)), ("sigalg", opt_json(sigalg)),
                      ("hrr", hrr.to_string()), ("dtls", counts), ("wire_milestone", milestone.unwrap_or("null".into())),
                      ("cpu_wait_ns", cpu_wait)];
        let ok = failure.is_none();
        drop(sock);
        (ok, sample_json(o, index.unwrap_or(0), &failure, &t, start, port, &fields))
    }
}

pub fn run_client(o: &ClientOpts) -> i32 {
    if o.mode != "handshake" {
        pqtls_common::bad_usage(PROG, "--mode", "over UDP (DTLS) allowed: handshake");
    }
    let mtu = o.extra("mtu").map_or(DEFAULT_MTU, |v| pqtls_common::parse_num(PROG, "--mtu", v, 256u32, 65507));
    let servername = o.servername.as_ref().map(|s| std::ffi::CString::new(s.as_str()).unwrap_or_default());
    let c = Client { ctx: dtls_ctx(o), shares: crate::client_groups(&o.groups).1, addr: SocketAddrV4::new(o.host, o.port), servername, mtu };
    client::each_sample(PROG, o, |index| {
        let (ok, line) = c.sample(o, index);
        if index.is_some() {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(line.as_bytes());
            let _ = out.flush();
        }
        ok
    })
}

// ---- the server --------------------------------------------------------------------------------

/// One client's connection on a site's socket: its SSL and the datagrams our BIO hands it.
struct Peer {
    ssl: *mut ffi::SSL,
    link: Box<Link>,
    seen: u64,
}

impl Drop for Peer {
    fn drop(&mut self) {
        unsafe { ffi::SSL_free(self.ssl) };
    }
}

const IDLE_NS: u64 = 10_000_000_000; // a connection nothing arrived for this long is forgotten

/// Runs the handshake (then reads, answering what the client sends) until it waits; false once it is over.
fn drive(p: &mut Peer) -> bool {
    unsafe {
        loop {
            let r = if ffi::SSL_in_init(p.ssl) == 1 {
                ffi::SSL_do_handshake(p.ssl)
            } else {
                let mut buf = [0u8; 2048];
                ffi::SSL_read(p.ssl, buf.as_mut_ptr() as *mut c_void, buf.len() as c_int)
            };
            if r > 0 {
                continue;
            }
            return matches!(step(p.ssl, r, "DTLS handshake"), Step::Wait(_));
        }
    }
}

fn serve_site(ctx: *mut ffi::SSL_CTX, sock: UdpSocket, mtu: u32) -> ! {
    let fd = sock.as_raw_fd();
    let mut peers: HashMap<(u32, u16), Peer> = HashMap::new();
    let mut buf = vec![0u8; 65536];
    loop {
        let wait = peers.values().filter_map(|p| timer_ms(p.ssl)).min().unwrap_or(1000).min(1000);
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        unsafe { libc::poll(&mut pfd, 1, wait as c_int) };
        while let Ok((n, from)) = sock.recv_from(&mut buf) {
            let std::net::SocketAddr::V4(from) = from else { continue };
            let key = (u32::from(*from.ip()), from.port());
            let p = peers.entry(key).or_insert_with(|| unsafe {
                let ssl = ffi::SSL_new(ctx);
                ffi::SSL_set_accept_state(ssl);
                ffi::SSL_set_mtu(ssl, mtu);
                let to = libc::sockaddr_in { sin_family: libc::AF_INET as u16, sin_port: from.port().to_be(),
                                             sin_addr: libc::in_addr { s_addr: u32::from(*from.ip()).to_be() },
                                             sin_zero: [0; 8] };
                let mut link = Box::new(Link { fd, peer: Some(to), inbox: VecDeque::new(), sent: vec![], received: vec![] });
                attach(ssl, &mut link);
                Peer { ssl, link, seen: 0 }
            });
            p.link.inbox.push_back(buf[..n].to_vec());
            p.seen = now_ns();
            p.link.sent.clear();
            p.link.received.clear();
            if !drive(p) {
                if crate::debug() {
                    eprintln!("{PROG}: DTLS connection from {from} ended: {}", err_text());
                }
                peers.remove(&key);
            }
        }
        let now = now_ns();
        peers.retain(|_, p| {
            if timer_ms(p.ssl) == Some(0) && unsafe { ffi::DTLSv1_handle_timeout(p.ssl) } < 0 {
                return false;
            }
            now - p.seen < IDLE_NS
        });
    }
}

/// Each site's MTU: --site-mtu PORT,BYTES, else DEFAULT_MTU.
fn site_mtu(o: &server::ServerOpts, port: u16) -> u32 {
    o.extra.iter().filter(|(k, _)| k == "site-mtu").find_map(|(_, v)| {
        let (p, n) = v.split_once(',').unwrap_or_else(|| pqtls_common::bad_usage(PROG, "--site-mtu", "expected PORT,BYTES"));
        (pqtls_common::parse_num(PROG, "--site-mtu", p, 1u16, 65535) == port)
            .then(|| pqtls_common::parse_num(PROG, "--site-mtu", n, 256u32, 65507))
    }).unwrap_or(DEFAULT_MTU)
}

pub fn run_server(o: &server::ServerOpts) -> ! {
    let mut threads = vec![];
    for site in &o.sites {
        let mtu = site_mtu(o, site.port);
        let ctx = crate::server_ctx(o, site, unsafe { ffi::DTLS_method() }, ffi::DTLS1_3_VERSION as u16).0;
        let sock = UdpSocket::bind(SocketAddrV4::new(o.addr, site.port))
            .unwrap_or_else(|e| pqtls_common::cannot(PROG, &format!("cannot bind UDP {}:{}: {e}", o.addr, site.port)));
        sock.set_nonblocking(true).unwrap_or_else(|e| pqtls_common::cannot(PROG, &e.to_string()));
        let ctx = crate::Ctx(ctx);
        threads.push(std::thread::spawn(move || {
            let ctx = ctx;
            serve_site(ctx.0, sock, mtu)
        }));
    }
    eprintln!("{PROG}: DTLS on {} UDP port(s) {:?}", o.addr, o.sites.iter().map(|s| s.port).collect::<Vec<_>>());
    for t in threads {
        let _ = t.join();
    }
    std::process::exit(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hello_retry_request_random_is_sha256_of_its_name() {
        // RFC 8446 §4.1.3 prints it: CF 21 AD 74 E5 9A 61 11 BE 1D 8C 02 1E 65 B8 91 C2 A2 11 16 7A BB 8C 5E 07 9E 09
        // E2 C8 A8 33 9C
        assert_eq!(HRR_RANDOM[0], 0xcf);
        assert_eq!(HRR_RANDOM[31], 0x9c);
    }

    #[test]
    fn a_plaintext_client_hello_fragment_is_found_and_an_encrypted_record_ends_the_scan() {
        let body = [CLIENT_HELLO, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 3, 0xaa, 0xbb, 0xcc];
        let mut d = vec![HANDSHAKE, 0xfe, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, body.len() as u8];
        d.extend_from_slice(&body);
        d.extend_from_slice(&[0x2c, 0, 0, 0, 0]); // an encrypted record after it
        let f = fragments(&d);
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].0, f[0].1, f[0].2), (CLIENT_HELLO, 0, &[0xaa, 0xbb, 0xcc][..]));
    }
}
