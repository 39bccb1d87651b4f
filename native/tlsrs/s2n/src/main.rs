//! pqs2n: pqbench's s2n-tls endpoint, TLS 1.3.
//!
//!   pqs2n client ARGS [--policy NAME]   pqtimer's command line; one JSON sample per line
//!   pqs2n server ARGS [--policy NAME]   see pqtls_common::server
//!   pqs2n --capabilities                per security policy: what its ClientHello offers; per group:
//!                                       the policy the client uses for it (JSON)
//!
//! s2n takes its groups and signature schemes from a named security policy, and its client always
//! sends a key share for the policy's first hybrid group and one for its first curve. So the client
//! looks, among s2n's TLS 1.3 policies, for one whose ClientHello carries a key share for the cell's
//! group and no other: it builds each candidate's ClientHello (over a socketpair, nothing sent on
//! the network) and reads the key_share, supported_groups and signature_algorithms extensions. A
//! group with no such policy cannot be measured with this client (the capabilities say so).
//!
//! Client phases come from s2n's timing checkpoints (CLOCK_MONOTONIC_RAW, the clock of
//! start_mono_ns): client_hello_sent = CLIENT_HELLO (the message built, handed to the record layer);
//! server_hello_received / server_finished_received = the RECORD_READ checkpoint of the record that
//! held SERVER_HELLO / SERVER_FINISHED (the record read, before s2n processed the message).

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::task::Poll;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Mutex;

use pqtls_common::client::{self, ClientOpts, Handshake, Library, Phases};
use pqtls_common::http::{self, TlsIo};
use pqtls_common::net::{io_failure, wait_fd};
use pqtls_common::{bad_usage, cannot, group_code, group_name, json, server, sigalg_name, Failure};
use s2n_tls::callbacks::{ClientHelloCallback, ConnectionFuture};
use std::pin::Pin;
use s2n_tls::config::Config;
use s2n_tls::connection::Connection;
use s2n_tls::enums::{Blinding, Mode};
use s2n_tls::error::ErrorType;
use s2n_tls::events::{EventSubscriber, HandshakeEvent, TimingCheckpoint};
use s2n_tls::security::Policy;

const PROG: &str = "pqs2n";

/// s2n's named policies that can negotiate TLS 1.3 and differ in what their ClientHello offers
/// (groups first in preference, curves, signature schemes). The capabilities are read from the
/// ClientHellos these produce, not from this list.
const CANDIDATE_POLICIES: &[&str] = &[
    "default_pq",
    "test_pq_only",
    "cnsa_2",
    "20260513",
    "CloudFront-TLS-1-3-2025-no-pq",
    "AWS-CRT-SDK-TLSv1.3",
    "AWS-CRT-SDK-TLSv1.3-2023",
    "CloudFront-Upstream-TLS-1-3-2025",
    "ELBSecurityPolicy-TLS13-1-3-FIPS-2023-04",
    "20250414",
    "20250211",
    "ELBSecurityPolicy-TLS13-1-3-RFC9151-FIPS-2023-07",
    "default_tls13",
    "test_all",
];

/// Server policies, tried in this order: the first whose groups include every accepted group.
const SERVER_POLICIES: &[&str] = &["default_pq", "test_all"];

fn main() {
    pqtls_common::dispatch(PROG, capabilities, run_client, run_server)
}

// ---- errors and I/O ---------------------------------------------------------------------------
//
// s2n reads and writes the socket through our callbacks (plain read/send on the fd), which note
// which way a would-block happened, so the caller polls for the right event.

struct IoCtx {
    fd: RawFd,
    blocked_on_write: Cell<bool>,
}

unsafe extern "C" fn recv_cb(ctx: *mut c_void, buf: *mut u8, len: u32) -> c_int {
    let ctx = &*(ctx as *const IoCtx);
    let r = libc::read(ctx.fd, buf as *mut c_void, len as usize);
    if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
        ctx.blocked_on_write.set(false);
    }
    r as c_int
}

unsafe extern "C" fn send_cb(ctx: *mut c_void, buf: *const u8, len: u32) -> c_int {
    let ctx = &*(ctx as *const IoCtx);
    let r = libc::send(ctx.fd, buf as *const c_void, len as usize, libc::MSG_NOSIGNAL);
    if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
        ctx.blocked_on_write.set(true);
    }
    r as c_int
}

fn s2n_failure(during: &str, e: &s2n_tls::error::Error) -> Failure {
    let msg = match e.debug() {
        Some(d) => format!("{} ({d})", e.message()),
        None => e.message().to_string(),
    };
    match e.kind() {
        ErrorType::ConnectionClosed => Failure::new("closed", format!("{during}: the server closed the connection")),
        ErrorType::IOError => io_failure(during, std::io::Error::last_os_error().raw_os_error().unwrap_or(0)),
        _ if e.name().starts_with("S2N_ERR_CERT") => Failure::new("cert_verify", format!("certificate verification failed: {} ({})", msg, e.name())),
        _ => Failure::new("tls_error", format!("{during}: {msg} ({})", e.name())),
    }
}

/// Waits for what s2n would block on, by the deadline.
fn wait_blocked(io: &IoCtx, deadline: u64, during: &str) -> Result<(), Failure> {
    let ev = if io.blocked_on_write.get() { libc::POLLOUT } else { libc::POLLIN };
    if wait_fd(io.fd, ev, deadline) {
        Ok(())
    } else {
        Err(Failure::new("timeout", format!("{during} did not complete within the timeout")))
    }
}

/// A connection on fd with our I/O callbacks; the context box must outlive it.
fn new_conn(mode: Mode, config: &Config, fd: RawFd) -> (Connection, Box<IoCtx>) {
    let mut conn = Connection::new(mode);
    let io = Box::new(IoCtx { fd, blocked_on_write: Cell::new(false) });
    let ctx = &*io as *const IoCtx as *mut c_void;
    let set = conn
        .set_config(config.clone())
        .and_then(|c| c.set_blinding(Blinding::SelfService)) // failures are samples, not attacks: no 10-30 s sleep
        // The binding polls callbacks (the server's ClientHello check) as futures; they complete at once.
        .and_then(|c| c.set_waker(Some(std::task::Waker::noop())))
        .and_then(|c| c.set_receive_callback(Some(recv_cb)))
        .and_then(|c| c.set_send_callback(Some(send_cb)))
        .and_then(|c| unsafe { c.set_receive_context(ctx) })
        .and_then(|c| unsafe { c.set_send_context(ctx) });
    if let Err(e) = set {
        cannot(PROG, &format!("s2n connection: {e}"));
    }
    (conn, io)
}

/// Drives an s2n operation to completion on a non-blocking socket, by the deadline.
fn drive<T>(io: &IoCtx, deadline: u64, during: &str, mut op: impl FnMut() -> Poll<Result<T, s2n_tls::error::Error>>)
            -> Result<T, Failure> {
    loop {
        match op() {
            Poll::Ready(Ok(v)) => return Ok(v),
            Poll::Ready(Err(e)) => return Err(s2n_failure(during, &e)),
            Poll::Pending => wait_blocked(io, deadline, during)?,
        }
    }
}

/// PQS2N_DEBUG=1: the server logs why handshakes fail.
fn debug() -> bool {
    std::env::var_os("PQS2N_DEBUG").is_some()
}

fn policy(name: &str, field: &str) -> Policy {
    Policy::from_version(name).unwrap_or_else(|e| bad_usage(PROG, field, &format!("s2n has no security policy {name}: {e}")))
}

fn group_of(conn: &Connection) -> Option<String> {
    conn.selected_key_exchange_group().map(|g| group_code(g).and_then(group_name).map(String::from).unwrap_or_else(|| g.to_string()))
}

/// s2n names ECDSA schemes by hash only (TLS 1.2 style); in TLS 1.3 the curve follows the hash.
fn sigalg_of(conn: &Connection) -> Option<String> {
    conn.signature_scheme().map(|s| {
        match s {
            "ecdsa_sha256" => "ecdsa_secp256r1_sha256",
            "ecdsa_sha384" => "ecdsa_secp384r1_sha384",
            "ecdsa_sha512" => "ecdsa_secp521r1_sha512",
            other => other,
        }
        .to_string()
    })
}

// ---- what a policy's ClientHello offers ------------------------------------------------------

#[derive(Debug, Clone)]
struct Offer {
    policy: String,
    key_shares: Vec<String>,
    supported_groups: Vec<String>,
    sigalgs: Vec<String>,
    sigalgs_cert: Vec<String>,
    tls13: bool,
}

fn names(codes: &[u16], f: fn(u16) -> Option<&'static str>) -> Vec<String> {
    codes.iter().map(|c| f(*c).map(String::from).unwrap_or_else(|| format!("0x{c:04x}"))).collect()
}

fn u16s(b: &[u8]) -> Vec<u16> {
    b.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect()
}

/// Reads the key_share, supported_groups and signature_algorithms(_cert) of a ClientHello record.
fn parse_client_hello(policy: &str, rec: &[u8]) -> Option<Offer> {
    // The handshake message may span records: strip each record header.
    let mut hs = vec![];
    let mut r = rec;
    while r.len() >= 5 && r[0] == 22 {
        let n = u16::from_be_bytes([r[3], r[4]]) as usize;
        hs.extend_from_slice(r.get(5..5 + n)?);
        r = &r[5 + n..];
    }
    if hs.first() != Some(&1) {
        return None;
    }
    parse_hello_body(policy, hs.get(4..)?)
}

/// The same, from a ClientHello body (after the handshake header).
fn parse_hello_body(policy: &str, hs: &[u8]) -> Option<Offer> {
    let mut p = 2 + 32; // legacy_version, random
    let sid = *hs.get(p)? as usize;
    p += 1 + sid;
    let cs = u16::from_be_bytes([*hs.get(p)?, *hs.get(p + 1)?]) as usize;
    p += 2 + cs;
    let comp = *hs.get(p)? as usize;
    p += 1 + comp;
    let ext_len = u16::from_be_bytes([*hs.get(p)?, *hs.get(p + 1)?]) as usize;
    p += 2;
    let end = (p + ext_len).min(hs.len());
    let mut o = Offer { policy: policy.into(), key_shares: vec![], supported_groups: vec![], sigalgs: vec![], sigalgs_cert: vec![],
                       tls13: false };
    while p + 4 <= end {
        let t = u16::from_be_bytes([hs[p], hs[p + 1]]);
        let n = u16::from_be_bytes([hs[p + 2], hs[p + 3]]) as usize;
        let d = hs.get(p + 4..p + 4 + n)?;
        p += 4 + n;
        match t {
            0x000a => o.supported_groups = names(&u16s(d.get(2..)?), group_name),
            0x000d => o.sigalgs = names(&u16s(d.get(2..)?), sigalg_name),
            0x0032 => o.sigalgs_cert = names(&u16s(d.get(2..)?), sigalg_name),
            0x002b => o.tls13 = u16s(d.get(1..)?).contains(&0x0304),
            0x0033 => {
                let mut q = 2;
                let mut codes = vec![];
                while q + 4 <= d.len() {
                    codes.push(u16::from_be_bytes([d[q], d[q + 1]]));
                    q += 4 + u16::from_be_bytes([d[q + 2], d[q + 3]]) as usize;
                }
                o.key_shares = names(&codes, group_name);
            }
            _ => {}
        }
    }
    Some(o)
}

/// The ClientHello s2n builds with `policy`, read from the other end of a socketpair.
fn offer_of(policy_name: &str) -> Option<Offer> {
    let pol = Policy::from_version(policy_name).ok()?;
    let mut b = Config::builder();
    b.set_security_policy(&pol).ok()?;
    let config = b.build().ok()?;
    let mut fds = [0; 2];
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0, fds.as_mut_ptr()) } != 0 {
        return None;
    }
    let (mut conn, io) = new_conn(Mode::Client, &config, fds[0]);
    let _ = conn.set_server_name("localhost");
    let _ = conn.poll_negotiate().map(|r| r.map(|_| ())); // writes the ClientHello, then waits to read
    let mut buf = vec![0u8; 64 * 1024];
    let n = unsafe { libc::read(fds[1], buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
    drop(conn);
    drop(io);
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    if n <= 0 {
        return None;
    }
    parse_client_hello(policy_name, &buf[..n as usize])
}

fn all_offers() -> Vec<Offer> {
    CANDIDATE_POLICIES.iter().filter_map(|p| offer_of(p)).collect()
}

/// The policy the client uses for `group`: its ClientHello has that key share and no other; among
/// those, the one that accepts `sigalg` if given, else the most signature schemes, then the fewest
/// supported groups.
fn client_policy_for<'a>(offers: &'a [Offer], group: &str, sigalg: Option<&str>) -> Option<&'a Offer> {
    let code = group_code(group)?;
    let canon = group_name(code)?;
    offers
        .iter()
        .filter(|o| o.key_shares.len() == 1 && o.key_shares[0] == canon)
        .filter(|o| sigalg.is_none_or(|s| o.sigalgs.iter().any(|x| x == s)))
        .max_by_key(|o| (o.sigalgs.len() as i64, -(o.supported_groups.len() as i64)))
}

fn offer_json(o: &Offer) -> String {
    json::object(&[
        ("policy", json::quoted(&o.policy)),
        ("key_shares", json::list(&o.key_shares)),
        ("supported_groups", json::list(&o.supported_groups)),
        ("sigalgs", json::list(&o.sigalgs)),
        ("sigalgs_cert", json::list(&o.sigalgs_cert)),
    ])
}

fn capabilities() {
    let offers = all_offers();
    let mut groups: Vec<String> = vec![];
    for o in &offers {
        for g in &o.supported_groups {
            if !groups.contains(g) {
                groups.push(g.clone());
            }
        }
    }
    let mut sigalgs: Vec<String> = vec![];
    for o in &offers {
        for g in &o.sigalgs {
            if !sigalgs.contains(g) {
                sigalgs.push(g.clone());
            }
        }
    }
    let mut client_groups = vec![];
    for g in &groups {
        let v = match client_policy_for(&offers, g, None) {
            Some(o) => offer_json(o),
            None => "null".into(),
        };
        client_groups.push((g.as_str(), v));
    }
    let server: Vec<String> = SERVER_POLICIES
        .iter()
        .filter_map(|p| offers.iter().find(|o| o.policy == *p))
        .map(offer_json)
        .collect();
    println!(
        "{}",
        json::object(&[
            ("stack", json::quoted("s2n")),
            ("library", json::quoted("s2n-tls")),
            ("versions", json::list(&["TLSv1.3".into()])),
            ("modes", json::list(&client::MODES.iter().map(|s| s.to_string()).collect::<Vec<_>>())),
            ("groups", json::list(&groups)),
            ("group_codepoints", pqtls_common::codepoints_json(&groups, pqtls_common::GROUPS)),
            ("sigalg_codepoints", pqtls_common::codepoints_json(&sigalgs, pqtls_common::SIGALGS)),
            ("policies", format!("[{}]", offers.iter().map(offer_json).collect::<Vec<_>>().join(", "))),
            ("client", json::object(&[("by_group", json::object(&client_groups))])),
            ("server", json::object(&[("policies", format!("[{}]", server.join(", ")))])),
        ])
    );
}

// ---- client ---------------------------------------------------------------------------------

static CHECKPOINTS: Mutex<Vec<(String, u64)>> = Mutex::new(Vec::new());

struct Checkpoints;

impl EventSubscriber for Checkpoints {
    fn on_handshake_event(&self, _conn: &Connection, _event: &HandshakeEvent) {}

    fn on_timing_checkpoint(&self, _conn: &Connection, cp: &TimingCheckpoint) {
        if let Ok(mut v) = CHECKPOINTS.lock() {
            v.push((cp.name().to_string(), cp.timestamp_ns()));
        }
    }
}

struct S2n {
    config: Config,
    servername: Option<String>,
    policy: String,
}

struct Conn {
    conn: Connection,
    io: Box<IoCtx>,
    deadline: u64,
}

impl TlsIo for Conn {
    fn send_all(&mut self, mut buf: &[u8]) -> Result<(), Failure> {
        let (conn, io) = (&mut self.conn, &self.io);
        while !buf.is_empty() {
            let n = drive(io, self.deadline, "sending the HTTP request", || conn.poll_send(buf))?;
            buf = &buf[n..];
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, Failure> {
        let (conn, io) = (&mut self.conn, &self.io);
        drive(io, self.deadline, "reading the HTTP response", || conn.poll_recv(buf))
    }
}

impl Library for S2n {
    type Conn = Conn;

    fn handshake(&mut self, fd: RawFd, deadline: u64, ph: &mut Phases) -> Result<Handshake<Conn>, Failure> {
        const DURING: &str = "TLS handshake";
        CHECKPOINTS.lock().unwrap().clear();
        let (mut conn, io) = new_conn(Mode::Client, &self.config, fd);
        if let Some(name) = &self.servername {
            conn.set_server_name(name).map_err(|e| Failure::new("tls_error", format!("server name: {e}")))?;
        }
        let result = drive(&io, deadline, DURING, || conn.poll_negotiate().map(|r| r.map(|_| ())));
        let cps = std::mem::take(&mut *CHECKPOINTS.lock().unwrap());
        let mut last_read = None;
        for (name, t) in &cps {
            match name.as_str() {
                "RECORD_READ" => last_read = Some(*t),
                "CLIENT_HELLO" if ph.client_hello_sent.is_none() => ph.client_hello_sent = Some(*t),
                "SERVER_HELLO" if ph.server_hello_received.is_none() => ph.server_hello_received = last_read,
                "SERVER_FINISHED" => ph.server_finished_received = last_read,
                _ => {}
            }
        }
        result?;
        let group = group_of(&conn);
        let sigalg = sigalg_of(&conn);
        let start = cps.first().map(|c| c.1).unwrap_or(0);
        let list: Vec<String> = cps.iter().map(|(n, t)| format!("[{}, {}]", json::quoted(n), t - start)).collect();
        let extra = vec![
            ("s2n_policy".to_string(), json::quoted(&self.policy)),
            ("s2n_checkpoints".to_string(), format!("[{}]", list.join(", "))),
        ];
        Ok(Handshake { conn: Conn { conn, io, deadline }, group, sigalg, extra })
    }

    fn close(&mut self, c: &mut Conn) {
        let _ = c.conn.poll_shutdown_send(); // close_notify, not waited for
    }
}

fn run_client(args: &[String]) -> i32 {
    let o: ClientOpts = client::parse(PROG, args, &["--policy"]);
    if o.groups.len() != 1 && o.extra("policy").is_none() {
        bad_usage(PROG, "--groups", "s2n offers groups by security policy: give one group (or --policy NAME)");
    }
    for g in &o.groups {
        if group_code(g).is_none() {
            bad_usage(PROG, "--groups", &format!("unknown group {g}"));
        }
    }
    let policy_name = match o.extra("policy") {
        Some(p) => p.to_string(),
        None => {
            let offers = all_offers();
            match client_policy_for(&offers, &o.groups[0], o.sigalgs.as_deref()) {
                Some(off) => off.policy.clone(),
                None => cannot(PROG, &format!(
                    "no s2n security policy sends a key share for {} alone{} (see pqs2n --capabilities)",
                    o.groups[0],
                    o.sigalgs.as_deref().map(|s| format!(" and accepts {s}")).unwrap_or_default()
                )),
            }
        }
    };
    let pol = policy(&policy_name, "--policy");
    let mut b = Config::builder();
    b.set_security_policy(&pol).unwrap_or_else(|e| cannot(PROG, &format!("s2n policy {policy_name}: {e}")));
    b.with_system_certs(false).unwrap_or_else(|e| cannot(PROG, &format!("s2n: {e}")));
    let Some(cafile) = o.cafile.as_deref() else { bad_usage(PROG, "--cafile", "required (s2n verifies the server)") };
    let pem = std::fs::read(cafile).unwrap_or_else(|e| bad_usage(PROG, "--cafile", &format!("{cafile}: {e}")));
    b.trust_pem(&pem).unwrap_or_else(|e| bad_usage(PROG, "--cafile", &format!("{cafile}: {e}")));
    b.set_event_subscriber(Checkpoints).unwrap_or_else(|e| cannot(PROG, &format!("s2n events: {e}")));
    let config = b.build().unwrap_or_else(|e| cannot(PROG, &format!("s2n config: {e}")));
    let mut lib = S2n { config, servername: o.servername.clone(), policy: policy_name };
    client::run(PROG, &mut lib, &o)
}

// ---- server ---------------------------------------------------------------------------------

/// Refuses, during the handshake, a client that does not offer TLS 1.3 or none of whose groups this
/// run accepts (the policy may allow more groups and older versions than the run does).
struct AcceptOnly(Vec<String>);

impl ClientHelloCallback for AcceptOnly {
    fn on_client_hello(&self, conn: &mut Connection) -> Result<Option<Pin<Box<dyn ConnectionFuture>>>, s2n_tls::error::Error> {
        let raw = conn.client_hello().and_then(|h| h.raw_message());
        if debug() {
            eprintln!("client hello: {:?}", raw.as_ref().ok().map(|m| parse_hello_body("", m)));
        }
        let offer = raw.ok().and_then(|m| parse_hello_body("", &m));
        match offer {
            Some(o) if o.tls13 && o.supported_groups.iter().any(|g| self.0.contains(g)) => Ok(None),
            _ => Err(s2n_tls::error::Error::application(
                format!("the client offers no TLS 1.3 or none of the accepted groups {}", self.0.join(":")).into(),
            )),
        }
    }
}

/// A server connection on a blocking socket: every s2n call completes or fails.
struct ServerStream<'a> {
    conn: &'a mut Connection,
}

fn ready<T>(p: Poll<Result<T, s2n_tls::error::Error>>) -> std::io::Result<T> {
    match p {
        Poll::Ready(Ok(v)) => Ok(v),
        Poll::Ready(Err(e)) => Err(std::io::Error::other(e.to_string())),
        Poll::Pending => Err(std::io::Error::from(std::io::ErrorKind::TimedOut)),
    }
}

impl Read for ServerStream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        ready(self.conn.poll_recv(buf))
    }
}

impl Write for ServerStream<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        ready(self.conn.poll_send(buf))
    }
    fn flush(&mut self) -> std::io::Result<()> {
        ready(self.conn.poll_flush().map(|r| r.map(|_| ())))
    }
}

fn run_server(args: &[String]) -> ! {
    let o = server::parse(PROG, args, &["--policy"]);
    let accepted: Vec<String> = o
        .groups
        .iter()
        .map(|g| group_code(g).and_then(group_name).map(String::from).unwrap_or_else(|| bad_usage(PROG, "--groups", &format!("unknown group {g}"))))
        .collect();
    let policy_name = match o.extra("policy") {
        Some(p) => p.to_string(),
        None => {
            let offers = all_offers();
            SERVER_POLICIES
                .iter()
                .find(|p| offers.iter().any(|off| off.policy == **p && accepted.iter().all(|g| off.supported_groups.contains(g))))
                .map(|p| p.to_string())
                .unwrap_or_else(|| cannot(PROG, &format!("no s2n security policy accepts all of {}", accepted.join(":"))))
        }
    };
    let pol = policy(&policy_name, "--policy");
    let mut configs = vec![];
    for site in &o.sites {
        let chain = std::fs::read(&site.chain).unwrap_or_else(|e| bad_usage(PROG, "--site", &format!("{}: {e}", site.chain)));
        let key = std::fs::read(&site.key).unwrap_or_else(|e| bad_usage(PROG, "--site", &format!("{}: {e}", site.key)));
        let mut b = Config::builder();
        b.set_security_policy(&pol).unwrap_or_else(|e| cannot(PROG, &format!("s2n policy {policy_name}: {e}")));
        b.set_client_hello_callback(AcceptOnly(accepted.clone())).unwrap_or_else(|e| cannot(PROG, &format!("s2n: {e}")));
        b.load_pem(&chain, &key).unwrap_or_else(|e| cannot(PROG, &format!("s2n cannot use {} with {}: {e}", site.chain, site.key)));
        configs.push(b.build().unwrap_or_else(|e| cannot(PROG, &format!("s2n config: {e}"))));
    }
    eprintln!("{PROG}: security policy {policy_name}; accepting {}", accepted.join(":"));
    server::serve(PROG, &o, move |idx, stream: TcpStream, pages| {
        let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(120)));
        let fd = stream.as_raw_fd();
        let (mut conn, io) = new_conn(Mode::Server, &configs[idx], fd);
        if let Err(e) = ready(conn.poll_negotiate().map(|r| r.map(|_| ()))) {
            if debug() {
                eprintln!("{PROG}: handshake failed: {e}");
            }
            return;
        }
        // The policy may allow more groups than this run accepts: refuse the others.
        match group_of(&conn) {
            Some(g) if accepted.contains(&g) => {}
            other => {
                eprintln!("{PROG}: refused a connection that negotiated {other:?} (accepting {})", accepted.join(":"));
                return;
            }
        }
        let _ = http::serve(&mut ServerStream { conn: &mut conn }, pages);
        let _ = conn.poll_shutdown_send();
        drop(conn);
        drop(io);
        drop(stream);
    })
}
