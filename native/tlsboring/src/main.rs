//! pqboring: pqbench's BoringSSL endpoint, TLS 1.3 (BoringSSL as vendored in the boring-sys crate).
//!
//!   pqboring client ARGS [--trust-anchors IDS] [--trusted-anchors IDS]
//!                                     pqtimer's command line; one JSON sample per line
//!   pqboring server ARGS [--anchor PORT,ID,CHAIN_PEM,KEY_PEM ...]
//!                                     see pqtls_common::server
//!   pqboring --capabilities           groups, signature schemes, trust anchor IDs (JSON)
//!
//! Trust anchor IDs (draft-ietf-tls-trust-anchor-ids-06, extension 0xca34) are BoringSSL's own: a server site
//! holds its --site chain as the fallback and each --anchor chain as a credential that is sent only when the
//! client's trust_anchors names its ID (and then with the empty trust_anchors extension in its first
//! CertificateEntry); the server lists those IDs in EncryptedExtensions. The client sends --trust-anchors (IDs
//! in dotted text, comma-separated; "-" sends the extension empty) and, given --trusted-anchors (the IDs of the
//! anchors in its --cafile), recovers as the draft's §5.6 says: a chain it cannot verify from a server that
//! listed an ID it trusts is followed by one new connection requesting only that ID, within the same sample
//! (the failed attempt is in the sample's "trust_anchors").
//!
//! Client phases come from BoringSSL's message callback: client_hello_sent when the ClientHello is written,
//! server_hello_received and server_finished_received when BoringSSL reads those messages.

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::ptr;

use boring_sys as ffi;
use pqtls_common::client::{self, ClientOpts, Handshake, Library, Phases};
use pqtls_common::http::{self, TlsIo};
use pqtls_common::net::{io_failure, wait_fd};
use pqtls_common::{bad_usage, cannot, group_code, group_name, json, server, sigalg_name, Failure, GROUPS};

mod dtls;

const PROG: &str = "pqboring";

/// The groups BoringSSL has for TLS 1.3, by code point (SSL_GROUP_* in its ssl.h).
const BORING_GROUPS: &[u16] = &[0x001d, 0x0017, 0x0018, 0x0019, 0x11ec, 0x0202];
/// The signature schemes this endpoint verifies and signs with (BoringSSL's SSL_SIGN_*): ML-DSA as TLS 1.3 names
/// it, EdDSA, ECDSA, RSA-PSS and, for certificates only, PKCS#1.
const SIGALGS: &[u16] = &[0x0904, 0x0905, 0x0906, 0x0807, 0x0403, 0x0503, 0x0603, 0x0804, 0x0805, 0x0806, 0x0401,
                          0x0501, 0x0601];
const SSL3_RT_HANDSHAKE: c_int = 22;

fn main() {
    pqtls_common::dispatch(PROG, capabilities, run_client, run_server)
}

fn names(codes: &[u16], f: fn(u16) -> Option<&'static str>) -> Vec<String> {
    codes.iter().filter_map(|c| f(*c).map(String::from)).collect()
}

fn capabilities() {
    let groups = names(BORING_GROUPS, group_name);
    let sigalgs = names(SIGALGS, sigalg_name);
    let tls13_sign: Vec<String> = sigalgs.iter().filter(|s| !s.starts_with("rsa_pkcs1")).cloned().collect();
    println!(
        "{}",
        json::object(&[
            ("stack", json::quoted("boringssl")),
            ("library", json::quoted("BoringSSL")),
            ("versions", json::list(&["TLSv1.3".into()])),
            ("modes", json::list(&client::MODES.iter().map(|s| s.to_string()).collect::<Vec<_>>())),
            ("groups", json::list(&groups)),
            ("group_codepoints", pqtls_common::codepoints_json(&groups, GROUPS)),
            ("sigalg_codepoints", pqtls_common::codepoints_json(&sigalgs, pqtls_common::SIGALGS)),
            ("client", json::object(&[("groups", json::list(&groups)), ("verify_sigalgs", json::list(&sigalgs))])),
            ("server", json::object(&[("groups", json::list(&groups)), ("sign_sigalgs", json::list(&tls13_sign))])),
            // draft-ietf-tls-trust-anchor-ids-06, BoringSSL's implementation: server certificates only
            ("trust_anchors", json::quoted("draft-ietf-tls-trust-anchor-ids-06")),
        ])
    );
}

// ---- BoringSSL's errors ------------------------------------------------------------------------

/// BoringSSL's error queue as one line (emptied).
fn err_text() -> String {
    let mut parts = vec![];
    loop {
        let e = unsafe { ffi::ERR_get_error() };
        if e == 0 {
            break;
        }
        let mut buf = [0 as c_char; 256];
        unsafe { ffi::ERR_error_string_n(e, buf.as_mut_ptr(), buf.len()) };
        parts.push(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned());
    }
    if parts.is_empty() { "no error queued".into() } else { parts.join("; ") }
}

fn check(ok: c_int, what: &str) {
    if ok != 1 {
        cannot(PROG, &format!("{what}: {}", err_text()));
    }
}

/// Why an SSL call that returned ret failed, or None when it only has to wait (Some(events) to poll for).
enum Step {
    Wait(i16),
    Failed(Failure),
}

fn step(ssl: *mut ffi::SSL, ret: c_int, during: &str) -> Step {
    let e = unsafe { ffi::SSL_get_error(ssl, ret) };
    match e {
        ffi::SSL_ERROR_WANT_READ => Step::Wait(libc::POLLIN),
        ffi::SSL_ERROR_WANT_WRITE => Step::Wait(libc::POLLOUT),
        ffi::SSL_ERROR_ZERO_RETURN => Step::Failed(Failure::new("closed", format!("{during}: the peer closed the connection"))),
        ffi::SSL_ERROR_SYSCALL => {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
            if errno == 0 {
                Step::Failed(Failure::new("closed", format!("{during}: the peer closed the connection")))
            } else {
                Step::Failed(io_failure(during, errno))
            }
        }
        _ => {
            let verify = unsafe { ffi::SSL_get_verify_result(ssl) };
            if verify != ffi::X509_V_OK as _ {
                let why = unsafe { CStr::from_ptr(ffi::X509_verify_cert_error_string(verify)) }.to_string_lossy().into_owned();
                let _ = err_text();
                Step::Failed(Failure::new("cert_verify", format!("certificate verification failed: {why}")))
            } else {
                Step::Failed(Failure::new("tls_error", format!("{during}: {}", err_text())))
            }
        }
    }
}

/// Drives op (SSL_do_handshake, SSL_read, SSL_write …) on a non-blocking socket by the deadline.
fn drive(ssl: *mut ffi::SSL, fd: RawFd, deadline: u64, during: &str, mut op: impl FnMut() -> c_int) -> Result<c_int, Failure> {
    loop {
        let ret = op();
        if ret > 0 {
            return Ok(ret);
        }
        match step(ssl, ret, during) {
            Step::Wait(ev) => {
                if !wait_fd(fd, ev, deadline) {
                    return Err(Failure::new("timeout", format!("{during} did not complete within the timeout")));
                }
            }
            Step::Failed(f) => return Err(f),
        }
    }
}

// ---- groups ------------------------------------------------------------------------------------

/// A group name (any spelling pqbench or a library uses) as BoringSSL's code point; exit 2 naming field.
fn boring_group(name: &str, field: &str) -> u16 {
    group_code(name).filter(|c| BORING_GROUPS.contains(c))
        .unwrap_or_else(|| bad_usage(PROG, field, &format!("BoringSSL has no TLS group {name}")))
}

/// A client's --groups in OpenSSL's notation: every group in supported_groups order, and those marked '*' as the
/// ones that get a key share (none marked: BoringSSL's choice, a share for the first).
fn client_groups(names: &[String]) -> (Vec<u16>, Vec<u16>) {
    let groups = names.iter().map(|g| boring_group(g.trim_start_matches('*'), "--groups")).collect();
    let shares = names.iter().filter(|g| g.starts_with('*')).map(|g| boring_group(&g[1..], "--groups")).collect();
    (groups, shares)
}

/// A server's preference order in OpenSSL's tuple syntax (A/B: A strictly first; A:B within a tuple: alike, the
/// client's order and key shares decide) as BoringSSL's groups and equal-preference flags.
fn server_preference(spec: &str, field: &str) -> (Vec<u16>, Vec<u32>) {
    let (mut groups, mut flags) = (vec![], vec![]);
    for tuple in spec.split('/') {
        let names: Vec<&str> = tuple.split(':').filter(|n| !n.is_empty()).collect();
        for (k, n) in names.iter().enumerate() {
            groups.push(boring_group(n, field));
            flags.push(if k + 1 < names.len() { ffi::SSL_GROUP_FLAG_EQUAL_PREFERENCE_WITH_NEXT as u32 } else { 0 });
        }
    }
    (groups, flags)
}

/// The key shares a connection sends, where --groups marks them.
unsafe fn set_key_shares(ssl: *mut ffi::SSL, shares: &[u16]) -> Result<(), Failure> {
    if !shares.is_empty() && ffi::SSL_set1_client_key_shares(ssl, shares.as_ptr(), shares.len()) != 1 {
        return Err(Failure::new("tls_error", format!("key shares: {}", err_text())));
    }
    Ok(())
}

// ---- trust anchor IDs --------------------------------------------------------------------------

/// A trust anchor ID's binary representation (§4: the relative OID's DER contents) from its dotted text.
fn anchor_id(text: &str) -> Option<Vec<u8>> {
    let mut out = vec![];
    for part in text.split('.') {
        let mut v: u128 = part.parse().ok()?;
        let mut digits = vec![(v & 0x7f) as u8];
        v >>= 7;
        while v > 0 {
            digits.push(0x80 | (v & 0x7f) as u8);
            v >>= 7;
        }
        out.extend(digits.iter().rev());
    }
    (!out.is_empty() && out.len() <= 32).then_some(out)
}

/// The dotted text of a binary trust anchor ID.
fn anchor_text(bin: &[u8]) -> String {
    let mut parts = vec![];
    let mut v: u128 = 0;
    for b in bin {
        v = (v << 7) | u128::from(b & 0x7f);
        if b & 0x80 == 0 {
            parts.push(v.to_string());
            v = 0;
        }
    }
    parts.join(".")
}

fn anchor_ids(prog_field: &str, text: &str) -> Vec<Vec<u8>> {
    if text == "-" {
        return vec![];
    }
    text.split(',')
        .map(|t| anchor_id(t.trim()).unwrap_or_else(|| bad_usage(PROG, prog_field, &format!("'{t}' is not a trust anchor ID (dotted numbers such as 32473.1)"))))
        .collect()
}

/// IDs as TLS carries them: each prefixed by its one-byte length.
fn wire_list(ids: &[Vec<u8>]) -> Vec<u8> {
    ids.iter().flat_map(|id| std::iter::once(id.len() as u8).chain(id.iter().copied())).collect()
}

fn from_wire_list(mut b: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![];
    while let Some((&n, rest)) = b.split_first() {
        if rest.len() < n as usize {
            break;
        }
        out.push(rest[..n as usize].to_vec());
        b = &rest[n as usize..];
    }
    out
}

fn texts(ids: &[Vec<u8>]) -> Vec<String> {
    ids.iter().map(|id| anchor_text(id)).collect()
}

// ---- the client --------------------------------------------------------------------------------

/// What one handshake heard of trust anchors (saved in the verify callback: BoringSSL keeps it only then).
#[derive(Default, Clone)]
struct Heard {
    matched: bool,
    available: Vec<Vec<u8>>,
}

thread_local! {
    static PHASES: Cell<*mut Phases> = const { Cell::new(ptr::null_mut()) };
    static HEARD: RefCell<Heard> = RefCell::new(Heard::default());
}

unsafe extern "C" fn on_message(is_write: c_int, _version: c_int, content_type: c_int, buf: *const c_void, len: usize,
                                _ssl: *mut ffi::SSL, _arg: *mut c_void) {
    if content_type != SSL3_RT_HANDSHAKE || len == 0 {
        return;
    }
    let ph = PHASES.with(|p| p.get());
    if ph.is_null() {
        return;
    }
    let ph = &mut *ph;
    let now = Some(pqtls_common::now_ns());
    match (is_write != 0, *(buf as *const u8)) {
        (true, 1) if ph.client_hello_sent.is_none() => ph.client_hello_sent = now,
        (false, 2) if ph.server_hello_received.is_none() => ph.server_hello_received = now,
        (false, 20) => ph.server_finished_received = now,
        _ => {}
    }
}

unsafe extern "C" fn on_verify(store: *mut ffi::X509_STORE_CTX, _arg: *mut c_void) -> c_int {
    let ssl = ffi::X509_STORE_CTX_get_ex_data(store, ffi::SSL_get_ex_data_X509_STORE_CTX_idx()) as *mut ffi::SSL;
    if !ssl.is_null() {
        let (mut p, mut n) = (ptr::null(), 0usize);
        ffi::SSL_get0_peer_available_trust_anchors(ssl, &mut p, &mut n);
        let available = if n == 0 { vec![] } else { from_wire_list(std::slice::from_raw_parts(p, n)) };
        let matched = ffi::SSL_peer_matched_trust_anchor(ssl) == 1;
        HEARD.with(|h| *h.borrow_mut() = Heard { matched, available });
    }
    ffi::X509_verify_cert(store)
}

struct Boring {
    ctx: *mut ffi::SSL_CTX,
    servername: Option<CString>,
    verify: bool,
    /// What the ClientHello's trust_anchors requests (None: no extension).
    requested: Option<Vec<Vec<u8>>>,
    /// The IDs of the anchors this client trusts: a recovery requests one of them.
    trusted: Vec<Vec<u8>>,
    /// Set for the connection that recovers: the one ID it requests, and what the failed attempt heard.
    recovering: Option<(Vec<u8>, Heard)>,
    /// The groups that get a key share (empty: BoringSSL's choice).
    shares: Vec<u16>,
}

struct Conn {
    ssl: *mut ffi::SSL,
    fd: RawFd,
    deadline: u64,
}

impl Drop for Conn {
    fn drop(&mut self) {
        unsafe { ffi::SSL_free(self.ssl) };
    }
}

impl TlsIo for Conn {
    fn send_all(&mut self, mut buf: &[u8]) -> Result<(), Failure> {
        while !buf.is_empty() {
            let (ssl, b) = (self.ssl, buf);
            let n = drive(ssl, self.fd, self.deadline, "sending the HTTP request", || unsafe {
                ffi::SSL_write(ssl, b.as_ptr() as *const c_void, b.len().min(1 << 20) as c_int)
            })?;
            buf = &buf[n as usize..];
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, Failure> {
        let (ssl, p, len) = (self.ssl, buf.as_mut_ptr(), buf.len().min(1 << 20) as c_int);
        match drive(ssl, self.fd, self.deadline, "reading the HTTP response", || unsafe {
            ffi::SSL_read(ssl, p as *mut c_void, len)
        }) {
            Ok(n) => Ok(n as usize),
            Err(f) if f.class == "closed" => Ok(0),
            Err(f) => Err(f),
        }
    }
}

impl Boring {
    /// What this connection requested of trust anchors and what it heard.
    fn trust_json(&self, heard: &Heard) -> String {
        let requested = match (&self.recovering, &self.requested) {
            (Some((id, _)), _) => json::list(&[anchor_text(id)]),
            (None, Some(ids)) => json::list(&texts(ids)),
            (None, None) => "null".into(),
        };
        json::object(&[("requested", requested), ("matched", heard.matched.to_string()),
                       ("available", json::list(&texts(&heard.available)))])
    }
}

impl Library for Boring {
    type Conn = Conn;

    fn handshake(&mut self, fd: RawFd, deadline: u64, ph: &mut Phases) -> Result<Handshake<Conn>, Failure> {
        let ssl = unsafe { ffi::SSL_new(self.ctx) };
        if ssl.is_null() {
            return Err(Failure::new("tls_error", format!("SSL_new: {}", err_text())));
        }
        let conn = Conn { ssl, fd, deadline };
        unsafe {
            ffi::SSL_set_connect_state(ssl);
            ffi::SSL_set_fd(ssl, fd);
            set_key_shares(ssl, &self.shares)?;
            if let Some(name) = &self.servername {
                ffi::SSL_set_tlsext_host_name(ssl, name.as_ptr());
                if self.verify {
                    ffi::SSL_set1_host(ssl, name.as_ptr());
                }
            }
            let ids = match (&self.recovering, &self.requested) {
                (Some((id, _)), _) => Some(vec![id.clone()]),
                (None, r) => r.clone(),
            };
            if let Some(ids) = ids {
                let w = wire_list(&ids);
                // an empty list still sends the extension (BoringSSL's documented behaviour)
                if ffi::SSL_set1_requested_trust_anchors(ssl, w.as_ptr(), w.len()) != 1 {
                    return Err(Failure::new("tls_error", format!("trust anchors: {}", err_text())));
                }
            }
        }
        HEARD.with(|h| *h.borrow_mut() = Heard::default());
        PHASES.with(|p| p.set(ph as *mut Phases));
        let done = drive(ssl, fd, deadline, "TLS handshake", || unsafe { ffi::SSL_do_handshake(ssl) });
        PHASES.with(|p| p.set(ptr::null_mut()));
        let heard = HEARD.with(|h| h.borrow().clone());
        if let Err(f) = done {
            if self.recovering.is_none() && f.class == "cert_verify" {
                // the recovery's choice: the server's most preferred ID among those this client trusts
                let choice = heard.available.iter().find(|id| self.trusted.contains(id)).cloned();
                self.recovering = choice.map(|id| (id, heard));
            }
            return Err(f);
        }
        let group = Some(unsafe { ffi::SSL_get_group_id(ssl) }).filter(|g| *g != 0)
            .map(|g| group_name(g).map(String::from).unwrap_or_else(|| format!("0x{g:04x}")));
        let sig = unsafe { ffi::SSL_get_peer_signature_algorithm(ssl) };
        let sigalg = Some(sig).filter(|s| *s != 0)
            .map(|s| sigalg_name(s).map(String::from).unwrap_or_else(|| format!("0x{s:04x}")));
        let mut extra = vec![];
        if self.requested.is_some() || self.recovering.is_some() {
            extra.push(("trust_anchors".to_string(), self.trust_json(&heard)));
        }
        Ok(Handshake { conn, group, sigalg, extra })
    }

    fn again(&mut self, _failure: &Failure) -> Option<Vec<(String, String)>> {
        // a recovery the failed handshake chose (once per sample): what that attempt requested and heard
        let (_, before) = self.recovering.as_ref()?;
        let requested = json::list(&texts(self.requested.as_deref().unwrap_or(&[])));
        let heard = json::object(&[("requested", requested), ("matched", before.matched.to_string()),
                                   ("available", json::list(&texts(&before.available)))]);
        Some(vec![("trust_anchors".to_string(), heard)])
    }

    fn sample_done(&mut self) {
        self.recovering = None;
    }

    fn close(&mut self, conn: &mut Conn) {
        unsafe { ffi::SSL_shutdown(conn.ssl) };
    }
}

/// A client context of method (TLS or DTLS) at exactly version (1.3).
fn client_ctx(o: &ClientOpts, method: *const ffi::SSL_METHOD, version: u16) -> *mut ffi::SSL_CTX {
    unsafe {
        let ctx = ffi::SSL_CTX_new(method);
        if ctx.is_null() {
            cannot(PROG, &format!("SSL_CTX_new: {}", err_text()));
        }
        check(ffi::SSL_CTX_set_min_proto_version(ctx, version), "version 1.3");
        check(ffi::SSL_CTX_set_max_proto_version(ctx, version), "version 1.3");
        let (codes, _) = client_groups(&o.groups);
        check(ffi::SSL_CTX_set1_group_ids(ctx, codes.as_ptr(), codes.len()), "--groups");
        check(ffi::SSL_CTX_set_verify_algorithm_prefs(ctx, SIGALGS.as_ptr(), SIGALGS.len()), "signature schemes");
        ffi::SSL_CTX_set_msg_callback(ctx, Some(on_message));
        match &o.cafile {
            Some(ca) => {
                let ca = CString::new(ca.as_str()).unwrap_or_else(|_| bad_usage(PROG, "--cafile", "contains a NUL byte"));
                if ffi::SSL_CTX_load_verify_locations(ctx, ca.as_ptr(), ptr::null()) != 1 {
                    bad_usage(PROG, "--cafile", &err_text());
                }
                ffi::SSL_CTX_set_verify(ctx, ffi::SSL_VERIFY_PEER as c_int, None);
                ffi::SSL_CTX_set_cert_verify_callback(ctx, Some(on_verify), ptr::null_mut());
            }
            None => ffi::SSL_CTX_set_verify(ctx, ffi::SSL_VERIFY_NONE as c_int, None),
        }
        ctx
    }
}

fn run_client(args: &[String]) -> i32 {
    let o = client::parse(PROG, args, &["--trust-anchors", "--trusted-anchors", "--transport", "--mtu"]);
    match o.extra("transport") {
        None | Some("tcp") => {}
        Some("udp") => {
            if o.extra("trust-anchors").is_some() {
                bad_usage(PROG, "--trust-anchors", "measured over TCP only");
            }
            return dtls::run_client(&o);
        }
        Some(t) => bad_usage(PROG, "--transport", &format!("'{t}': allowed tcp, udp (DTLS 1.3)")),
    }
    if o.sigalgs.is_some() {
        bad_usage(PROG, "--sigalgs", "pqboring verifies every scheme it has (see --capabilities)");
    }
    let requested = o.extra("trust-anchors").map(|t| anchor_ids("--trust-anchors", t));
    let trusted = o.extra("trusted-anchors").map(|t| anchor_ids("--trusted-anchors", t)).unwrap_or_default();
    if !trusted.is_empty() && requested.is_none() {
        bad_usage(PROG, "--trusted-anchors", "recovers a trust anchor negotiation: give --trust-anchors too");
    }
    let servername = o.servername.as_ref().map(|s| CString::new(s.as_str())
        .unwrap_or_else(|_| bad_usage(PROG, "--servername", "contains a NUL byte")));
    let ctx = client_ctx(&o, unsafe { ffi::TLS_method() }, ffi::TLS1_3_VERSION as u16);
    let shares = client_groups(&o.groups).1;
    let mut lib = Boring { ctx, servername, shares, verify: o.cafile.is_some(), requested, trusted, recovering: None };
    client::run(PROG, &mut lib, &o)
}

// ---- the server --------------------------------------------------------------------------------

/// PEM blocks of `label` in a file, as DER.
fn pem_blocks(path: &str, label: &str, field: &str) -> Vec<Vec<u8>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| bad_usage(PROG, field, &format!("{path}: {e}")));
    let (begin, end) = (format!("-----BEGIN {label}-----"), format!("-----END {label}-----"));
    let mut out = vec![];
    let mut rest = text.as_str();
    while let Some(a) = rest.find(&begin) {
        let body = &rest[a + begin.len()..];
        let Some(b) = body.find(&end) else { break };
        let b64: String = body[..b].chars().filter(|c| !c.is_whitespace()).collect();
        out.push(base64(&b64).unwrap_or_else(|| bad_usage(PROG, field, &format!("{path}: bad base64 in a {label} block"))));
        rest = &body[b + end.len()..];
    }
    out
}

fn base64(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let s = s.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for &c in s {
        acc = (acc << 6) | u32::from(val(c)?);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// One DER element: (tag, contents, the bytes after it).
fn der(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, b) = b.split_first()?;
    let (&first, mut b) = b.split_first()?;
    let len = if first < 0x80 {
        first as usize
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || b.len() < n {
            return None;
        }
        let len = b[..n].iter().fold(0usize, |a, x| (a << 8) | *x as usize);
        b = &b[n..];
        len
    };
    (b.len() >= len).then(|| (tag, &b[..len], &b[len..]))
}

fn der_len(n: usize) -> Vec<u8> {
    if n < 0x80 {
        vec![n as u8]
    } else {
        let bytes: Vec<u8> = n.to_be_bytes().into_iter().skip_while(|b| *b == 0).collect();
        std::iter::once(0x80 | bytes.len() as u8).chain(bytes).collect()
    }
}

fn der_wrap(tag: u8, contents: &[u8]) -> Vec<u8> {
    [vec![tag], der_len(contents.len()), contents.to_vec()].concat()
}

/// BoringSSL reads ML-DSA private keys only in RFC 9881's seed form; our OpenSSL writes the seed with the
/// expanded key beside it ("both"). The same key in seed form, or None for any other key.
fn mldsa_seed_only(pkcs8: &[u8]) -> Option<Vec<u8>> {
    let (0x30, body, _) = der(pkcs8)? else { return None };
    let (0x02, version, rest) = der(body)? else { return None };
    let (0x30, alg, rest) = der(rest)? else { return None };
    let (0x04, key, _) = der(rest)? else { return None };
    let (0x30, both, _) = der(key)? else { return None };
    let (0x04, seed, _) = der(both)? else { return None };
    let seed_form = der_wrap(0x80, seed);
    let inner = [der_wrap(0x02, version), der_wrap(0x30, alg), der_wrap(0x04, &seed_form)].concat();
    Some(der_wrap(0x30, &inner))
}

fn parse_key(der_bytes: &[u8]) -> *mut ffi::EVP_PKEY {
    unsafe {
        let mut cbs = ffi::CBS { data: der_bytes.as_ptr(), len: der_bytes.len() };
        ffi::EVP_parse_private_key(&mut cbs)
    }
}

fn load_key(path: &str, field: &str) -> *mut ffi::EVP_PKEY {
    let blocks = pem_blocks(path, "PRIVATE KEY", field);
    let Some(pkcs8) = blocks.first() else { bad_usage(PROG, field, &format!("{path}: no PRIVATE KEY block")) };
    let mut key = parse_key(pkcs8);
    if key.is_null() {
        if let Some(seed) = mldsa_seed_only(pkcs8) {
            let _ = err_text();
            key = parse_key(&seed);
        }
    }
    if key.is_null() {
        bad_usage(PROG, field, &format!("{path}: BoringSSL cannot read this key: {}", err_text()));
    }
    key
}

/// A credential of a chain file and its key; must-match with a trust anchor ID.
fn credential(chain: &str, key: &str, anchor: Option<&[u8]>, field: &str) -> *mut ffi::SSL_CREDENTIAL {
    let certs = pem_blocks(chain, "CERTIFICATE", field);
    if certs.is_empty() {
        bad_usage(PROG, field, &format!("{chain}: no CERTIFICATE block"));
    }
    unsafe {
        let cred = ffi::SSL_CREDENTIAL_new_x509();
        let bufs: Vec<*mut ffi::CRYPTO_BUFFER> = certs.iter()
            .map(|c| ffi::CRYPTO_BUFFER_new(c.as_ptr(), c.len(), ptr::null_mut())).collect();
        check(ffi::SSL_CREDENTIAL_set1_cert_chain(cred, bufs.as_ptr(), bufs.len()), &format!("{field} {chain}"));
        for b in bufs {
            ffi::CRYPTO_BUFFER_free(b);
        }
        let pkey = load_key(key, field);
        check(ffi::SSL_CREDENTIAL_set1_private_key(cred, pkey), &format!("{field} {key}"));
        ffi::EVP_PKEY_free(pkey);
        if let Some(id) = anchor {
            check(ffi::SSL_CREDENTIAL_set1_trust_anchor_id(cred, id.as_ptr(), id.len()), &format!("{field} trust anchor ID"));
            ffi::SSL_CREDENTIAL_set_must_match_issuer(cred, 1);
        }
        cred
    }
}

struct Ctx(*mut ffi::SSL_CTX);
unsafe impl Send for Ctx {}
unsafe impl Sync for Ctx {}

/// A site's context: its --anchor chains first (each sent only on a match), its --site chain last (the fallback).
fn server_ctx(o: &server::ServerOpts, site: &server::SiteOpts, method: *const ffi::SSL_METHOD, version: u16) -> Ctx {
    unsafe {
        let ctx = ffi::SSL_CTX_new(method);
        check(ffi::SSL_CTX_set_min_proto_version(ctx, version), "version 1.3");
        check(ffi::SSL_CTX_set_max_proto_version(ctx, version), "version 1.3");
        let own = o.extra.iter().filter(|(k, _)| k == "site-groups").find_map(|(_, v)| {
            let (port, spec) = v.split_once(',').unwrap_or_else(|| bad_usage(PROG, "--site-groups", "expected PORT,GROUPS"));
            (pqtls_common::parse_num(PROG, "--site-groups", port, 1u16, 65535) == site.port).then_some(spec)
        });
        match own {
            Some(spec) => {  // the site's own order, the server's preference first
                let (codes, flags) = server_preference(spec, "--site-groups");
                check(ffi::SSL_CTX_set1_group_ids_with_flags(ctx, codes.as_ptr(), flags.as_ptr(), codes.len()),
                      "--site-groups");
                ffi::SSL_CTX_set_options(ctx, ffi::SSL_OP_CIPHER_SERVER_PREFERENCE as u32);
            }
            None => {
                let codes: Vec<u16> = o.groups.iter().map(|g| boring_group(g, "--groups")).collect();
                check(ffi::SSL_CTX_set1_group_ids(ctx, codes.as_ptr(), codes.len()), "--groups");
            }
        }
        for (k, v) in &o.extra {
            if k != "anchor" {
                continue;
            }
            let parts: Vec<&str> = v.splitn(4, ',').collect();
            if parts.len() != 4 {
                bad_usage(PROG, "--anchor", "expected PORT,ID,CHAIN_PEM,KEY_PEM");
            }
            if pqtls_common::parse_num(PROG, "--anchor", parts[0], 1u16, 65535) != site.port {
                continue;
            }
            let id = anchor_id(parts[1]).unwrap_or_else(|| bad_usage(PROG, "--anchor", &format!("'{}' is not a trust anchor ID", parts[1])));
            let cred = credential(parts[2], parts[3], Some(&id), "--anchor");
            check(ffi::SSL_CTX_add1_credential(ctx, cred), "--anchor");
            ffi::SSL_CREDENTIAL_free(cred);
        }
        let cred = credential(&site.chain, &site.key, None, "--site");
        check(ffi::SSL_CTX_add1_credential(ctx, cred), "--site");
        ffi::SSL_CREDENTIAL_free(cred);
        Ctx(ctx)
    }
}

/// A server connection as a byte stream (blocking socket), for pqtls_common::http::serve.
struct Stream {
    ssl: *mut ffi::SSL,
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = unsafe { ffi::SSL_read(self.ssl, buf.as_mut_ptr() as *mut c_void, buf.len().min(1 << 20) as c_int) };
        if n > 0 {
            return Ok(n as usize);
        }
        match unsafe { ffi::SSL_get_error(self.ssl, n) } {
            ffi::SSL_ERROR_ZERO_RETURN => Ok(0),
            _ => Err(std::io::Error::other(err_text())),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = unsafe { ffi::SSL_write(self.ssl, buf.as_ptr() as *const c_void, buf.len().min(1 << 20) as c_int) };
        if n > 0 { Ok(n as usize) } else { Err(std::io::Error::other(err_text())) }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn debug() -> bool {
    std::env::var_os("PQBORING_DEBUG").is_some()
}

fn run_server(args: &[String]) -> ! {
    let o = server::parse(PROG, args, &["--anchor", "--transport", "--site-mtu", "--site-groups"]);
    match o.extra("transport") {
        None | Some("tcp") => {}
        Some("udp") => dtls::run_server(&o),
        Some(t) => bad_usage(PROG, "--transport", &format!("'{t}': allowed tcp, udp (DTLS 1.3)")),
    }
    let tls = unsafe { ffi::TLS_method() };
    let ctxs: Vec<Ctx> = o.sites.iter().map(|s| server_ctx(&o, s, tls, ffi::TLS1_3_VERSION as u16)).collect();
    let ctxs = std::sync::Arc::new(ctxs);
    server::serve(PROG, &o, move |idx, stream: TcpStream, pages| unsafe {
        let ssl = ffi::SSL_new(ctxs[idx].0);
        ffi::SSL_set_accept_state(ssl);
        ffi::SSL_set_fd(ssl, stream.as_raw_fd());
        if ffi::SSL_do_handshake(ssl) == 1 {
            let mut s = Stream { ssl };
            let _ = http::serve(&mut s, pages);
            ffi::SSL_shutdown(ssl);
        } else if debug() {
            eprintln!("{PROG}: handshake failed: {}", err_text());
        } else {
            let _ = err_text();
        }
        ffi::SSL_free(ssl);
        drop(stream);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_anchor_ids_round_trip_as_the_draft_encodes_them() {
        // §4: 32473.1 is the four octets 0x81 0xfd 0x59 0x01
        assert_eq!(anchor_id("32473.1").unwrap(), vec![0x81, 0xfd, 0x59, 0x01]);
        assert_eq!(anchor_text(&[0x81, 0xfd, 0x59, 0x01]), "32473.1");
        assert_eq!(anchor_id("0").unwrap(), vec![0]);
        assert!(anchor_id("32473.x").is_none() && anchor_id("").is_none());
        let ids = vec![anchor_id("32473.1").unwrap(), anchor_id("32473.2.5").unwrap()];
        assert_eq!(from_wire_list(&wire_list(&ids)), ids);
    }

    #[test]
    fn an_openssl_both_form_ml_dsa_key_becomes_its_seed_form() {
        let seed = [7u8; 32];
        let expanded = [9u8; 100];
        let both = der_wrap(0x30, &[der_wrap(0x04, &seed), der_wrap(0x04, &expanded)].concat());
        let alg = der_wrap(0x30, &der_wrap(0x06, &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x03, 0x11]));
        let pkcs8 = der_wrap(0x30, &[der_wrap(0x02, &[0]), alg.clone(), der_wrap(0x04, &both)].concat());
        let want = der_wrap(0x30, &[der_wrap(0x02, &[0]), alg, der_wrap(0x04, &der_wrap(0x80, &seed))].concat());
        assert_eq!(mldsa_seed_only(&pkcs8).unwrap(), want);
    }
}
