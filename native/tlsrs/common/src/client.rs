//! The timing client's options (pqtimer's command line), the shared sample counter, and the sample
//! loop: each library supplies only its handshake; everything around it is timed the same way.

use std::net::Ipv4Addr;
use std::os::fd::RawFd;

use crate::http::{self, HttpResult, TlsIo};
use crate::net::{self, TcpCounts};
use crate::{bad_usage, json, now_ns, parse_num, Failure};

pub const MODES: &[&str] = &["handshake", "page", "requests"];

#[derive(Debug, Clone)]
pub struct ClientOpts {
    pub host: Ipv4Addr,
    pub port: u16,
    pub mode: String,
    pub path: String,
    pub requests: u32,
    pub groups: Vec<String>,
    pub sigalgs: Option<String>,
    pub cafile: Option<String>,
    pub servername: Option<String>,
    pub count: u64,
    pub warmup: u64,
    pub timeout_ms: u64,
    /// A pause after each sample (a target's gentle pace).
    pub pause_ms: u64,
    pub worker: u64,
    pub claim: Option<String>,
    /// Library-specific options (e.g. s2n's --policy), name -> value.
    pub extra: Vec<(String, String)>,
}

/// Parses pqtimer's options; `extra` names the library's own options that take a value.
pub fn parse(prog: &str, args: &[String], extra: &[&str]) -> ClientOpts {
    let mut o = ClientOpts {
        host: Ipv4Addr::UNSPECIFIED,
        port: 0,
        mode: "handshake".into(),
        path: "/".into(),
        requests: 1,
        groups: vec![],
        sigalgs: None,
        cafile: None,
        servername: None,
        count: 1,
        warmup: 0,
        timeout_ms: 10_000,
        pause_ms: 0,
        worker: 0,
        claim: None,
        extra: vec![],
    };
    let mut host = None;
    let mut k = 0;
    while k < args.len() {
        let a = args[k].as_str();
        let Some(v) = args.get(k + 1).map(|s| s.as_str()) else { bad_usage(prog, a, "missing value") };
        k += 2;
        match a {
            "--host" => host = Some(v.to_string()),
            "--port" => o.port = parse_num(prog, a, v, 1u16, 65535),
            "--mode" => {
                if !MODES.contains(&v) {
                    bad_usage(prog, a, &format!("allowed: {}", MODES.join(", ")));
                }
                o.mode = v.into()
            }
            "--path" => o.path = v.into(),
            "--requests" => o.requests = parse_num(prog, a, v, 1u32, 100_000),
            "--groups" => o.groups = v.split(':').filter(|s| !s.is_empty()).map(String::from).collect(),
            "--sigalgs" => o.sigalgs = Some(v.into()),
            "--cafile" => o.cafile = Some(v.into()),
            "--servername" => o.servername = Some(v.into()),
            "--count" => o.count = parse_num(prog, a, v, 1u64, 100_000_000),
            "--warmup" => o.warmup = parse_num(prog, a, v, 0u64, 1_000_000),
            "--timeout-ms" => o.timeout_ms = parse_num(prog, a, v, 1u64, 3_600_000),
            "--pause-ms" => o.pause_ms = parse_num(prog, a, v, 0u64, 3_600_000),
            "--worker" => o.worker = parse_num(prog, a, v, 0u64, i32::MAX as u64),
            "--claim" => o.claim = Some(v.into()),
            "--pad" => {
                if parse_num(prog, a, v, 0u32, 60000) != 0 {
                    bad_usage(prog, a, "this client cannot add a ClientHello padding extension (only pqtimer can)")
                }
            }
            _ if extra.contains(&a) => o.extra.push((a.trim_start_matches("--").to_string(), v.to_string())),
            _ => bad_usage(prog, a, "unknown option"),
        }
    }
    let Some(h) = host else { bad_usage(prog, "--host", "required") };
    o.host = h.parse().unwrap_or_else(|_| bad_usage(prog, "--host", "must be an IPv4 address"));
    if o.port == 0 {
        bad_usage(prog, "--port", "required");
    }
    if o.groups.is_empty() {
        bad_usage(prog, "--groups", "required (the group this client offers)");
    }
    if let Some(path) = &o.claim {
        check_claims(prog, path);
    }
    o.requests = match o.mode.as_str() {
        "requests" => o.requests,
        "page" => 1,
        _ => 0,
    };
    o
}

impl ClientOpts {
    pub fn extra(&self, name: &str) -> Option<&str> {
        self.extra.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// The handshake phases a library reports (CLOCK_MONOTONIC_RAW ns; None = not observable).
#[derive(Debug, Default, Clone)]
pub struct Phases {
    pub client_hello_sent: Option<u64>,
    pub server_hello_received: Option<u64>,
    pub server_finished_received: Option<u64>,
}

/// What a library's handshake gives back: the connection for HTTP, and what was negotiated.
pub struct Handshake<C> {
    pub conn: C,
    pub group: Option<String>,
    pub sigalg: Option<String>,
    /// Extra sample fields (key, encoded JSON value).
    pub extra: Vec<(String, String)>,
}

pub trait Library {
    type Conn: TlsIo;
    /// The TLS handshake on a connected non-blocking socket, by the deadline. Fills `ph` as it goes
    /// (also on failure: what happened before the failure is kept).
    fn handshake(&mut self, fd: RawFd, deadline: u64, ph: &mut Phases) -> Result<Handshake<Self::Conn>, Failure>;
    /// A polite close (close_notify), not waited for.
    fn close(&mut self, _conn: &mut Self::Conn) {}
    /// After a failed handshake: Some(fields) to connect again and repeat the handshake within the same sample
    /// (a trust anchor negotiation's recovery is a new connection: draft-ietf-tls-trust-anchor-ids §5.6), the
    /// fields describing the failed attempt; None ends the sample with the failure.
    fn again(&mut self, _failure: &Failure) -> Option<Vec<(String, String)>> {
        None
    }
    /// The sample has ended (what a library keeps per sample is forgotten).
    fn sample_done(&mut self) {}
}

struct Sample {
    ok_fail: Option<Failure>,
    start: u64,
    tcp_connected: Option<u64>,
    phases: Phases,
    handshake_done: Option<u64>,
    last_byte: Option<u64>,
    http: HttpResult,
    local_port: Option<u16>,
    group: Option<String>,
    sigalg: Option<String>,
    tcp_handshake: Option<TcpCounts>,
    tcp_end: Option<TcpCounts>,
    cpu_wait_ns: Option<u64>,
    extra: Vec<(String, String)>,
}

/// This thread's total wait for a CPU so far (ns), from the kernel's schedstat ("run wait slices"),
/// read outside every timestamp: what the detector calls the client's own wait.
pub fn cpu_wait_total_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

fn run_sample<L: Library>(lib: &mut L, o: &ClientOpts) -> Sample {
    let wait0 = cpu_wait_total_ns();
    let mut s = measure_sample(lib, o);
    s.cpu_wait_ns = match (wait0, cpu_wait_total_ns()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    s
}

fn measure_sample<L: Library>(lib: &mut L, o: &ClientOpts) -> Sample {
    let start = now_ns();
    let deadline = start + o.timeout_ms * 1_000_000;
    let mut s = Sample {
        ok_fail: None,
        start,
        tcp_connected: None,
        phases: Phases::default(),
        handshake_done: None,
        last_byte: None,
        http: HttpResult::default(),
        local_port: None,
        group: None,
        sigalg: None,
        tcp_handshake: None,
        tcp_end: None,
        cpu_wait_ns: None,
        extra: vec![],
    };
    let connect = |s: &mut Sample| match net::tcp_connect(o.host, o.port, deadline) {
        Ok(sock) => {
            s.tcp_connected = Some(now_ns());
            Some(sock)
        }
        Err(f) => {
            s.ok_fail = Some(f);
            None
        }
    };
    let Some(mut sock) = connect(&mut s) else { return s };
    let mut handshake = lib.handshake(sock.0, deadline, &mut s.phases);
    // A recovery (Library::again) connects again at once; what the failed connection was is written into the
    // sample once it is over, outside the time it measures. Both connections' TCP counts add up (both crossed).
    let mut first: Option<FirstAttempt> = None;
    if let Err(f) = &handshake {
        if let Some(fields) = lib.again(f) {
            first = Some(FirstAttempt { failure: f.clone(), fields, ended: now_ns(), connected: s.tcp_connected,
                                        port: net::local_port(sock.0), tcp: net::tcp_counts(sock.0) });
            drop(sock);
            s.phases = Phases::default();
            match connect(&mut s) {
                Some(again) => sock = again,
                None => {
                    lib.sample_done();
                    if let Some(a) = first {
                        a.say(&mut s, start);
                    }
                    return s;
                }
            }
            handshake = lib.handshake(sock.0, deadline, &mut s.phases);
        }
    }
    let first_tcp = first.as_ref().and_then(|a| a.tcp);
    lib.sample_done();
    let fd = sock.0;
    match handshake {
        Ok(mut hs) => {
            s.handshake_done = Some(now_ns());
            s.tcp_handshake = net::tcp_counts(fd).map(|c| first_tcp.map_or(c, |f| c.plus(f)));
            s.group = hs.group.take();
            s.sigalg = hs.sigalg.take();
            s.extra.append(&mut hs.extra);
            let host = o.servername.clone().unwrap_or_else(|| o.host.to_string());
            for i in 0..o.requests {
                if let Err(f) = http::get(&mut hs.conn, &o.path, &host, i == 0, &mut s.http) {
                    s.ok_fail = Some(f);
                    break;
                }
            }
            if s.http.requests > 0 && s.ok_fail.is_none() {
                s.last_byte = Some(now_ns());
            }
            s.tcp_end = net::tcp_counts(fd).map(|c| first_tcp.map_or(c, |f| c.plus(f)));
            lib.close(&mut hs.conn);
        }
        Err(f) => {
            s.ok_fail = Some(f);
            s.tcp_end = net::tcp_counts(fd);
        }
    }
    s.local_port = net::local_port(fd);
    drop(sock);
    if let Some(a) = first {
        a.say(&mut s, start);
    }
    s
}

/// A sample's failed first connection, before a recovery's second.
struct FirstAttempt {
    failure: Failure,
    fields: Vec<(String, String)>,
    ended: u64,
    connected: Option<u64>,
    port: Option<u16>,
    tcp: Option<TcpCounts>,
}

impl FirstAttempt {
    /// Into the sample's fields: "first_attempt", and the library's own under "<name>_first".
    fn say(self, s: &mut Sample, start: u64) {
        let mut error = String::new();
        json::string(&mut error, &self.failure.msg);
        let at = |t: Option<u64>| t.map_or("null".into(), |t| (t - start).to_string());
        s.extra.push(("first_attempt".to_string(), json::object(&[
            ("error_class", json::quoted(self.failure.class)), ("error", error),
            ("local_port", self.port.map_or("null".into(), |p| p.to_string())),
            ("tcp_connected_ns", at(self.connected)), ("ended_ns", at(Some(self.ended)))])));
        s.extra.extend(self.fields.into_iter().map(|(k, v)| (format!("{k}_first"), v)));
    }
}

fn print_sample(o: &ClientOpts, index: u64, s: &Sample) {
    let rel = |t: Option<u64>| t.map(|t| t.saturating_sub(s.start));
    let mut out = String::with_capacity(1024);
    out.push_str(&format!("{{\"worker\": {}, \"i\": {}, \"mode\": ", o.worker, index));
    json::string(&mut out, &o.mode);
    out.push_str(&format!(", \"ok\": {}, \"error_class\": ", s.ok_fail.is_none()));
    json::opt_string(&mut out, s.ok_fail.as_ref().map(|f| f.class));
    out.push_str(", \"error\": ");
    json::opt_string(&mut out, s.ok_fail.as_ref().map(|f| f.msg.as_str()));
    let phases: [(&str, Option<u64>); 8] = [
        ("start", Some(s.start)),
        ("tcp_connected", s.tcp_connected),
        ("client_hello_sent", s.phases.client_hello_sent),
        ("server_hello_received", s.phases.server_hello_received),
        ("server_finished_received", s.phases.server_finished_received),
        ("handshake_done", s.handshake_done),
        ("first_byte", s.http.first_byte),
        ("last_byte", s.last_byte),
    ];
    out.push_str(", \"t_ns\": {");
    for (k, (name, t)) in phases.iter().enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        json::string(&mut out, name);
        out.push_str(": ");
        json::opt_u64(&mut out, rel(*t));
    }
    out.push_str(&format!("}}, \"start_mono_ns\": {}, \"local_port\": ", s.start));
    json::opt_u64(&mut out, s.local_port.map(u64::from));
    out.push_str(", \"group\": ");
    json::opt_string(&mut out, s.group.as_deref());
    out.push_str(", \"sigalg\": ");
    json::opt_string(&mut out, s.sigalg.as_deref());
    out.push_str(", \"resumed\": false, \"tcp_handshake\": ");
    out.push_str(&net::tcp_json(&s.tcp_handshake));
    out.push_str(", \"tcp_end\": ");
    out.push_str(&net::tcp_json(&s.tcp_end));
    out.push_str(", \"http_status\": ");
    json::opt_u64(&mut out, s.http.status.map(u64::from));
    out.push_str(&format!(", \"body_bytes\": {}, \"requests\": {}, \"cpu_wait_ns\": ", s.http.body_bytes, s.http.requests));
    json::opt_u64(&mut out, s.cpu_wait_ns);
    for (k, v) in &s.extra {
        out.push_str(", ");
        json::string(&mut out, k);
        out.push_str(": ");
        out.push_str(v);
    }
    out.push_str("}\n");
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(out.as_bytes());
    let _ = stdout.flush();
}

fn check_claims(prog: &str, path: &str) {
    match std::fs::metadata(path) {
        Err(e) => bad_usage(prog, "--claim", &format!("{path}: {e}")),
        Ok(m) if !m.is_file() || m.len() < 8 => bad_usage(prog, "--claim", "the file must hold a 64-bit counter (8 bytes)"),
        Ok(_) => {}
    }
}

/// The shared sample counter: 8 bytes, native order, mmap'd and incremented atomically.
struct Claims(*mut u64);

impl Claims {
    fn open(prog: &str, path: &str) -> Claims {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap_or_else(|e| bad_usage(prog, "--claim", &e.to_string()));
        if f.metadata().map(|m| m.len()).unwrap_or(0) < 8 {
            bad_usage(prog, "--claim", "the file must hold a 64-bit counter (8 bytes)");
        }
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), 8, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, f.as_raw_fd(), 0)
        };
        if p == libc::MAP_FAILED {
            bad_usage(prog, "--claim", &std::io::Error::last_os_error().to_string());
        }
        Claims(p as *mut u64)
    }

    fn next(&self) -> u64 {
        let a = unsafe { &*(self.0 as *const std::sync::atomic::AtomicU64) };
        a.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

/// The worker: warm-up samples (not printed), then samples claimed from the counter (or 0..count).
/// Exit code as pqtimer's: 0 all succeeded, 1 some failed.
pub fn run<L: Library>(prog: &str, lib: &mut L, o: &ClientOpts) -> i32 {
    each_sample(prog, o, |index| {
        let s = run_sample(lib, o);
        if let Some(i) = index {
            print_sample(o, i, &s);
        }
        s.ok_fail.is_none()
    })
}

/// The sample loop of any client (run's, and a datagram client's that prints its own samples): `sample(None)`
/// for each warm-up sample, `sample(Some(index))` for each one to print, true when it succeeded. Exit code as
/// pqtimer's.
pub fn each_sample(prog: &str, o: &ClientOpts, mut sample: impl FnMut(Option<u64>) -> bool) -> i32 {
    let claims = o.claim.as_deref().map(|p| Claims::open(prog, p));
    for _ in 0..o.warmup {
        sample(None);
    }
    let mut failures = 0;
    let mut own = 0u64;
    loop {
        let i = match &claims {
            Some(c) => c.next(),
            None => {
                own += 1;
                own - 1
            }
        };
        if i >= o.count {
            break;
        }
        failures += !sample(Some(i)) as u32;
        std::thread::sleep(std::time::Duration::from_millis(o.pause_ms));
    }
    (failures > 0) as i32
}
