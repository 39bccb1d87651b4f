//! What pqbench's Rust TLS endpoints (pqrustls, pqs2n) share, written once: the command lines (the
//! client's mirrors pqtimer's), the shared sample counter (--claim), the JSON sample pqtimer prints,
//! TCP_INFO, a non-blocking TCP connect with a deadline, HTTP/1.1 for page and request modes, and the
//! server's listeners (one port per certificate chain, a thread per connection).

pub mod client;
pub mod http;
pub mod json;
pub mod net;
pub mod server;

use std::time::Duration;

/// CLOCK_MONOTONIC_RAW in ns: the clock pqtimer and the wire join use.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Why a sample failed: an error class as pqtimer names them and a message.
#[derive(Debug, Clone)]
pub struct Failure {
    pub class: &'static str,
    pub msg: String,
}

impl Failure {
    pub fn new(class: &'static str, msg: impl Into<String>) -> Self {
        Failure { class, msg: msg.into() }
    }
}

/// A stack binary's command line: `--capabilities`, `client OPTIONS` (exits with the client's status)
/// or `server OPTIONS` (runs until stopped).
pub fn dispatch(prog: &str, capabilities: fn(), client: fn(&[String]) -> i32, server: fn(&[String]) -> !) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(|s| s.as_str()) {
        Some("--capabilities") => capabilities(),
        Some("client") => std::process::exit(client(&args[1..])),
        Some("server") => server(&args[1..]),
        _ => bad_usage(prog, "command", "expected client, server or --capabilities"),
    }
}

/// Exit 2 naming the field, as pqtimer does for a bad option.
pub fn bad_usage(prog: &str, field: &str, msg: &str) -> ! {
    eprintln!("{prog}: {field}: {msg}");
    std::process::exit(2)
}

/// Exit 3: the setup this run asks for is impossible here (with why).
pub fn cannot(prog: &str, msg: &str) -> ! {
    eprintln!("{prog}: {msg}");
    std::process::exit(3)
}

pub fn parse_num<T: std::str::FromStr + PartialOrd + std::fmt::Display>(prog: &str, field: &str, v: &str, lo: T, hi: T) -> T {
    match v.parse::<T>() {
        Ok(n) if n >= lo && n <= hi => n,
        _ => bad_usage(prog, field, &format!("'{v}' is not a whole number in {lo}..{hi}")),
    }
}

/// Time left until a deadline (ns on now_ns's clock), None once it has passed.
pub fn remaining(deadline: u64) -> Option<Duration> {
    let now = now_ns();
    (now < deadline).then(|| Duration::from_nanos(deadline - now))
}

/// The TLS group names pqbench uses (pqtimer prints OpenSSL's), by IANA code point.
pub const GROUPS: &[(u16, &str)] = &[
    (0x001d, "x25519"),
    (0x0017, "secp256r1"),
    (0x0018, "secp384r1"),
    (0x0019, "secp521r1"),
    (0x001e, "x448"),
    (0x11ec, "X25519MLKEM768"),
    (0x11eb, "SecP256r1MLKEM768"),
    (0x11ed, "SecP384r1MLKEM1024"),
    (0x0201, "MLKEM768"),
    (0x0202, "MLKEM1024"),
    (0x0200, "MLKEM512"),
];

/// Signature scheme names as OpenSSL prints them (SSL_get0_peer_signature_name), by code point.
pub const SIGALGS: &[(u16, &str)] = &[
    (0x0403, "ecdsa_secp256r1_sha256"),
    (0x0503, "ecdsa_secp384r1_sha384"),
    (0x0603, "ecdsa_secp521r1_sha512"),
    (0x0807, "ed25519"),
    (0x0808, "ed448"),
    (0x0804, "rsa_pss_rsae_sha256"),
    (0x0805, "rsa_pss_rsae_sha384"),
    (0x0806, "rsa_pss_rsae_sha512"),
    (0x0809, "rsa_pss_pss_sha256"),
    (0x080a, "rsa_pss_pss_sha384"),
    (0x080b, "rsa_pss_pss_sha512"),
    (0x0401, "rsa_pkcs1_sha256"),
    (0x0501, "rsa_pkcs1_sha384"),
    (0x0601, "rsa_pkcs1_sha512"),
    (0x0904, "mldsa44"),
    (0x0905, "mldsa65"),
    (0x0906, "mldsa87"),
];

pub fn group_name(code: u16) -> Option<&'static str> {
    GROUPS.iter().find(|(c, _)| *c == code).map(|(_, n)| *n)
}

/// A group's code point from any spelling pqbench or a library uses (case and '_'/'-' ignored).
pub fn group_code(name: &str) -> Option<u16> {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['_', '-'], "");
    let n = norm(name);
    let alias = match n.as_str() {
        "p256" | "prime256v1" => "secp256r1",
        "p384" => "secp384r1",
        "p521" => "secp521r1",
        other => other,
    };
    GROUPS.iter().find(|(_, g)| norm(g) == alias).map(|(c, _)| *c)
}

pub fn sigalg_name(code: u16) -> Option<&'static str> {
    SIGALGS.iter().find(|(c, _)| *c == code).map(|(_, n)| *n)
}

/// {"name": codepoint, ...} for names in `table`'s spelling (the capabilities' key to the catalog).
pub fn codepoints_json(names: &[String], table: &[(u16, &str)]) -> String {
    let pairs: Vec<(&str, String)> = names
        .iter()
        .filter_map(|n| table.iter().find(|(_, t)| t == n).map(|(c, _)| (n.as_str(), c.to_string())))
        .collect();
    json::object(&pairs)
}
