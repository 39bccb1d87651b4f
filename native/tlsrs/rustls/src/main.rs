//! pqrustls: pqbench's rustls endpoint (rustls with the aws-lc-rs provider), TLS 1.3 only.
//!
//!   pqrustls client ARGS     pqtimer's command line (see pqtls_common::client); one JSON sample per line
//!   pqrustls server ARGS     see pqtls_common::server
//!   pqrustls --capabilities  the groups and signature schemes this build offers, as JSON
//!
//! Client phases: rustls has no message callback, so the client reads the socket itself and hands
//! rustls one TLS record at a time. client_hello_sent is taken as the ClientHello goes to the socket;
//! server_hello_received and server_finished_received are the times the record holding that
//! message was complete in our buffer (before rustls processed it), told apart by rustls' state after
//! the record (a negotiated group appears; the handshake ends).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};

use pqtls_common::client::{self, ClientOpts, Handshake, Library, Phases};
use pqtls_common::http::{self, TlsIo};
use pqtls_common::net::{io_failure, read_fd, wait_fd, write_fd};
use pqtls_common::{bad_usage, cannot, group_code, group_name, json, server, sigalg_name, Failure};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{aws_lc_rs, CryptoProvider, SupportedKxGroup};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

mod mtc;

const PROG: &str = "pqrustls";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("mtc-verify") {
        std::process::exit(mtc_verify(&args[1..]));
    }
    pqtls_common::dispatch(PROG, capabilities, run_client, run_server)
}

/// pqrustls mtc-verify TRUSTFILE CERT.pem SERVERNAME [ROUNDS]: verifies one Merkle Tree Certificate as the client
/// does, ROUNDS times (default 1); prints what was verified and the time per verification as JSON; exit 1 when
/// it does not verify (with why).
fn mtc_verify(args: &[String]) -> i32 {
    let [trust, cert, name, rest @ ..] = args else { bad_usage(PROG, "mtc-verify", "TRUSTFILE CERT.pem SERVERNAME [ROUNDS]") };
    let rounds: u32 = rest.first().map(|r| pqtls_common::parse_num(PROG, "ROUNDS", r, 1, 1_000_000)).unwrap_or(1);
    let store = match mtc::load(trust) {
        Ok(Some(store)) => store,
        Ok(None) => bad_usage(PROG, "TRUSTFILE", &format!("{trust} names no Merkle Tree CA")),
        Err(e) => bad_usage(PROG, "TRUSTFILE", &e),
    };
    let der = load_certs(cert, "CERT").remove(0);
    let name = ServerName::try_from(name.clone()).unwrap_or_else(|e| bad_usage(PROG, "SERVERNAME", &e.to_string()));
    let start = std::time::Instant::now();
    let mut result = mtc::verify(&store, &der, &name, UnixTime::now());
    for _ in 1..rounds {
        result = mtc::verify(&store, &der, &name, UnixTime::now());
    }
    let per = start.elapsed().as_secs_f64() * 1e6 / f64::from(rounds);
    match result {
        Ok(v) => {
            let kind = match v.kind { mtcs::VerificationKind::Standalone => "standalone", _ => "landmark" };
            let cosigners: Vec<String> = v.satisfied_cosigners.iter().map(|c| c.to_dotted()).collect();
            println!("{}", json::object(&[
                ("verified", "true".into()), ("kind", json::quoted(kind)), ("ca", json::quoted(&v.ca_id.to_dotted())),
                ("entry", v.entry_index.to_string()), ("subtree", format!("[{}, {}]", v.subtree.start, v.subtree.end)),
                ("cosigners", json::list(&cosigners)), ("us_per_verification", format!("{per:.2}")),
            ]));
            0
        }
        Err(e) => {
            println!("{}", json::object(&[("verified", "false".into()), ("error", json::quoted(&e))]));
            1
        }
    }
}

fn all_groups() -> &'static [&'static dyn SupportedKxGroup] {
    aws_lc_rs::ALL_KX_GROUPS
}

/// The provider restricted to exactly `names` (in that order); exit 2 naming an unknown one.
fn provider_for(names: &[String]) -> CryptoProvider {
    let mut kx = vec![];
    for n in names {
        let code = group_code(n).unwrap_or_else(|| bad_usage(PROG, "--groups", &format!("unknown group {n}")));
        let g = all_groups().iter().find(|g| u16::from(g.name()) == code).unwrap_or_else(|| {
            bad_usage(PROG, "--groups", &format!("{n} is not offered by rustls' aws-lc-rs provider (see --capabilities)"))
        });
        kx.push(*g);
    }
    CryptoProvider { kx_groups: kx, ..aws_lc_rs::default_provider() }
}

fn scheme_name(s: SignatureScheme) -> String {
    let code = u16::from(s);
    sigalg_name(code).map(String::from).unwrap_or_else(|| format!("0x{code:04x}"))
}

fn capabilities() {
    let p = aws_lc_rs::default_provider();
    let groups: Vec<String> = all_groups()
        .iter()
        .map(|g| group_name(u16::from(g.name())).map(String::from).unwrap_or_else(|| format!("{:?}", g.name())))
        .collect();
    let verify: Vec<String> = p.signature_verification_algorithms.supported_schemes().into_iter().map(scheme_name).collect();
    // Server keys: what any_supported_type loads (aws-lc-rs): ECDSA, Ed25519, RSA, ML-DSA.
    let sign = ["ecdsa_secp256r1_sha256", "ecdsa_secp384r1_sha384", "ecdsa_secp521r1_sha512", "ed25519",
                "rsa_pss_rsae_sha256", "rsa_pss_rsae_sha384", "rsa_pss_rsae_sha512", "mldsa44", "mldsa65", "mldsa87"];
    let sign: Vec<String> = sign.iter().map(|s| s.to_string()).collect();
    println!(
        "{}",
        json::object(&[
            ("stack", json::quoted("rustls")),
            ("library", json::quoted("rustls")),
            ("provider", json::quoted("aws-lc-rs")),
            ("versions", json::list(&["TLSv1.3".into()])),
            ("modes", json::list(&client::MODES.iter().map(|s| s.to_string()).collect::<Vec<_>>())),
            ("groups", json::list(&groups)),
            ("group_codepoints", pqtls_common::codepoints_json(&groups, pqtls_common::GROUPS)),
            ("sigalg_codepoints", pqtls_common::codepoints_json(&verify, pqtls_common::SIGALGS)),
            ("client", json::object(&[("groups", json::list(&groups)), ("verify_sigalgs", json::list(&verify))])),
            ("server", json::object(&[("groups", json::list(&groups)), ("sign_sigalgs", json::list(&sign))])),
            // the client verifies Merkle Tree Certificates (draft-ietf-plants-merkle-tree-certs-07) with this crate
            ("mtc", json::quoted("mtcs")),
        ])
    );
}

// ---- client ---------------------------------------------------------------------------------

/// WebPKI verification (with the cafile's roots), or the `mtcs` crate's for a Merkle Tree Certificate when the
/// cafile names an MTC CA, that also notes which scheme the server signed with.
struct NotingVerifier {
    inner: Option<Arc<WebPkiServerVerifier>>,  // None: the cafile holds MTC CAs alone
    mtc: Option<mtcs::TrustStore>,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
    seen: Mutex<Option<SignatureScheme>>,
}

impl std::fmt::Debug for NotingVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotingVerifier").field("mtc", &self.mtc.is_some()).finish()
    }
}

impl ServerCertVerifier for NotingVerifier {
    fn verify_server_cert(&self, end_entity: &CertificateDer<'_>, intermediates: &[CertificateDer<'_>],
                          server_name: &ServerName<'_>, ocsp: &[u8], now: UnixTime) -> Result<ServerCertVerified, rustls::Error> {
        match &self.mtc {
            Some(store) if mtc::is_mtc(end_entity) => mtc::verify(store, end_entity, server_name, now)
                .map(|_| ServerCertVerified::assertion())
                .map_err(|e| rustls::Error::InvalidCertificate(rustls::CertificateError::Other(rustls::OtherError(
                    Arc::new(std::io::Error::other(format!("Merkle Tree Certificate: {e}"))))))),
            _ => match &self.inner {
                Some(inner) => inner.verify_server_cert(end_entity, intermediates, server_name, ocsp, now),
                None => Err(rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer)),
            },
        }
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct)
                              -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct)
                              -> Result<HandshakeSignatureValid, rustls::Error> {
        *self.seen.lock().unwrap() = Some(dss.scheme);
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

struct Rustls {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
    verifier: Arc<NotingVerifier>,
    mode: String,
}

struct Conn {
    tls: ClientConnection,
    fd: RawFd,
    deadline: u64,
    inbuf: Vec<u8>,
    written: u64,  // bytes sent on the socket so far
}

fn tls_failure(e: rustls::Error, during: &str) -> Failure {
    match e {
        rustls::Error::InvalidCertificate(c) => Failure::new("cert_verify", format!("certificate verification failed: {c:?}")),
        e => Failure::new("tls_error", format!("{during}: {e}")),
    }
}

impl Conn {
    /// Writes what rustls has queued to the socket.
    fn flush(&mut self, during: &str) -> Result<(), Failure> {
        while self.tls.wants_write() {
            let fd = self.fd;
            let mut w = FdWriter(fd);
            match self.tls.write_tls(&mut w) {
                Ok(n) => self.written += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if !wait_fd(fd, libc::POLLOUT, self.deadline) {
                        return Err(Failure::new("timeout", format!("{during} did not complete within the timeout")));
                    }
                }
                Err(e) => return Err(io_failure(during, e.raw_os_error().unwrap_or(0))),
            }
        }
        Ok(())
    }

    /// Reads more bytes from the socket into inbuf (waiting up to the deadline); false at EOF.
    fn fill(&mut self, during: &str) -> Result<bool, Failure> {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match read_fd(self.fd, &mut buf) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.inbuf.extend_from_slice(&buf[..n]);
                    return Ok(true);
                }
                Err(e) if e == libc::EAGAIN || e == libc::EINTR => {
                    if !wait_fd(self.fd, libc::POLLIN, self.deadline) {
                        return Err(Failure::new("timeout", format!("{during} did not complete within the timeout")));
                    }
                }
                Err(e) => return Err(io_failure(during, e)),
            }
        }
    }

    /// Length of the first complete TLS record in inbuf, if there is one.
    fn record_len(&self) -> Option<usize> {
        if self.inbuf.len() < 5 {
            return None;
        }
        let n = 5 + u16::from_be_bytes([self.inbuf[3], self.inbuf[4]]) as usize;
        (self.inbuf.len() >= n).then_some(n)
    }

    fn feed(&mut self, n: usize, during: &str) -> Result<(), Failure> {
        let mut rec = &self.inbuf[..n];
        while !rec.is_empty() {
            self.tls.read_tls(&mut rec).map_err(|e| Failure::new("tls_error", format!("{during}: {e}")))?;
        }
        self.inbuf.drain(..n);
        self.tls.process_new_packets().map_err(|e| tls_failure(e, during))?;
        Ok(())
    }
}

struct FdWriter(RawFd);

impl Write for FdWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        write_fd(self.0, buf).map_err(std::io::Error::from_raw_os_error)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl TlsIo for Conn {
    fn send_all(&mut self, buf: &[u8]) -> Result<(), Failure> {
        self.tls.writer().write_all(buf).map_err(|e| Failure::new("tls_error", format!("sending: {e}")))?;
        self.flush("sending the HTTP request")
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, Failure> {
        loop {
            match self.tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    return Err(Failure::new("closed", "reading the HTTP response: the server closed the connection"))
                }
                Err(e) => return Err(Failure::new("tls_error", format!("reading the HTTP response: {e}"))),
            }
            if self.inbuf.is_empty() && !self.fill("reading the HTTP response")? {
                return Err(Failure::new("closed", "reading the HTTP response: the server closed the connection"));
            }
            let n = self.inbuf.len();
            self.feed(n, "reading the HTTP response")?;
            self.flush("reading the HTTP response")?;
        }
    }
}

impl Library for Rustls {
    type Conn = Conn;

    fn handshake(&mut self, fd: RawFd, deadline: u64, ph: &mut Phases) -> Result<Handshake<Conn>, Failure> {
        *self.verifier.seen.lock().unwrap() = None;
        let tls = ClientConnection::new(self.config.clone(), self.name.clone())
            .map_err(|e| Failure::new("tls_error", format!("TLS handshake: {e}")))?;
        let mut c = Conn { tls, fd, deadline, inbuf: Vec::with_capacity(32 * 1024), written: 0 };
        const DURING: &str = "TLS handshake";
        ph.client_hello_sent = Some(pqtls_common::now_ns());
        c.flush(DURING)?;
        while c.tls.is_handshaking() {
            let Some(n) = c.record_len() else {
                // Write what the records so far produced only once they are all processed, as rustls'
                // own I/O loop does: the middlebox-compatibility ChangeCipherSpec leaves together
                // with the client's Finished, not after the ServerHello on its own.
                c.flush(DURING)?;
                if !c.fill(DURING)? {
                    return Err(Failure::new("closed", "TLS handshake: the server closed the connection"));
                }
                continue;
            };
            let t_record = pqtls_common::now_ns();
            c.feed(n, DURING)?;
            if ph.server_hello_received.is_none() && c.tls.negotiated_key_exchange_group().is_some() {
                ph.server_hello_received = Some(t_record);
            }
            if !c.tls.is_handshaking() {
                ph.server_finished_received = Some(t_record);
            }
        }
        // The client's Finished leads what is written now. When the server's flight spans more than one
        // congestion window, the ChangeCipherSpec has gone on its own after the first (nothing else to read
        // then), so the Finished is not the client's second flight: the sample names it by the bytes before it.
        let finished_offset = c.written;
        c.flush(DURING)?;
        let mut extra = vec![];
        if self.mode == "handshake" {
            extra.push(("wire_milestone".to_string(),
                        format!("{{\"dir\": \"c2s\", \"offset\": {finished_offset}, \"edge\": \"first\"}}")));
        }
        let group = c.tls.negotiated_key_exchange_group().map(|g| {
            let code = u16::from(g.name());
            group_name(code).map(String::from).unwrap_or_else(|| format!("0x{code:04x}"))
        });
        let sigalg = self.verifier.seen.lock().unwrap().map(scheme_name);
        Ok(Handshake { conn: c, group, sigalg, extra })
    }

    fn close(&mut self, conn: &mut Conn) {
        conn.tls.send_close_notify();
        let _ = conn.flush("closing");
    }
}

fn load_certs(path: &str, field: &str) -> Vec<CertificateDer<'static>> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_file_iter(path)
        .unwrap_or_else(|e| bad_usage(PROG, field, &format!("cannot read {path}: {e}")))
        .collect();
    let certs = certs.unwrap_or_else(|e| bad_usage(PROG, field, &format!("{path}: {e}")));
    if certs.is_empty() {
        bad_usage(PROG, field, &format!("{path} holds no certificate"));
    }
    certs
}

fn run_client(args: &[String]) -> i32 {
    // --cert, --key: mutual TLS (the client's certificate chain and key, sent when the server asks)
    let o: ClientOpts = client::parse(PROG, args, &["--cert", "--key"]);
    let own = |name: &str| o.extra.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    if o.sigalgs.is_some() {
        bad_usage(PROG, "--sigalgs", "rustls offers all the schemes its provider verifies; it takes no list");
    }
    let provider = Arc::new(provider_for(&o.groups));
    let mut roots = RootCertStore::empty();
    let Some(cafile) = o.cafile.as_deref() else { bad_usage(PROG, "--cafile", "required (rustls verifies the server)") };
    let mtc = mtc::load(cafile).unwrap_or_else(|e| bad_usage(PROG, "--cafile", &e));
    for c in load_certs(cafile, "--cafile") {
        // an MTC CA's certificate is no X.509 issuer: webpki has no use for it
        if mtc.is_some() && mtcs::CaTrust::from_ca_certificate(&c).is_ok() {
            continue;
        }
        roots.add(c).unwrap_or_else(|e| bad_usage(PROG, "--cafile", &format!("{cafile}: {e}")));
    }
    let inner = (!roots.is_empty()).then(|| {
        WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .unwrap_or_else(|e| cannot(PROG, &format!("cannot set up certificate verification: {e}")))
    });
    let algorithms = provider.signature_verification_algorithms;
    let verifier = Arc::new(NotingVerifier { inner, mtc, algorithms, seen: Mutex::new(None) });
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap_or_else(|e| cannot(PROG, &format!("cannot set up TLS 1.3: {e}")))
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone());
    let mut config = match (own("cert"), own("key")) {
        (None, None) => config.with_no_client_auth(),
        (Some(cert), Some(key)) => {
            let key = PrivateKeyDer::from_pem_file(&key).unwrap_or_else(|e| bad_usage(PROG, "--key", &format!("{key}: {e}")));
            config.with_client_auth_cert(load_certs(&cert, "--cert"), key)
                .unwrap_or_else(|e| bad_usage(PROG, "--key", &format!("rustls cannot use this key with --cert: {e}")))
        }
        (cert, _) => bad_usage(PROG, if cert.is_some() { "--key" } else { "--cert" }, "--cert and --key go together"),
    };
    config.resumption = rustls::client::Resumption::disabled();
    let name = o.servername.clone().unwrap_or_else(|| o.host.to_string());
    let name = ServerName::try_from(name).unwrap_or_else(|e| bad_usage(PROG, "--servername", &e.to_string()));
    let config = Arc::new(config);
    // aws-lc initialises itself on first use (tens of ms): before the first sample's clock starts.
    let _ = ClientConnection::new(config.clone(), name.clone());
    let mut lib = Rustls { config, name, verifier, mode: o.mode.clone() };
    client::run(PROG, &mut lib, &o)
}

// ---- server ---------------------------------------------------------------------------------

fn run_server(args: &[String]) -> ! {
    let o = server::parse(PROG, args, &[]);
    let provider = Arc::new(provider_for(&o.groups));
    let mut configs = vec![];
    for site in &o.sites {
        let certs = load_certs(&site.chain, "--site");
        let key = PrivateKeyDer::from_pem_file(&site.key)
            .unwrap_or_else(|e| bad_usage(PROG, "--site", &format!("{}: {e}", site.key)));
        let config = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap_or_else(|e| cannot(PROG, &format!("cannot set up TLS 1.3: {e}")))
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap_or_else(|e| cannot(PROG, &format!("rustls cannot use the key {}: {e}", site.key)));
        configs.push(Arc::new(config));
    }
    server::serve(PROG, &o, move |idx, stream: TcpStream, pages| {
        let Ok(conn) = rustls::ServerConnection::new(configs[idx].clone()) else { return };
        let mut tls = rustls::StreamOwned::new(conn, stream);
        let _ = tls.sock.set_read_timeout(Some(std::time::Duration::from_secs(120)));
        while tls.conn.is_handshaking() {
            if tls.conn.complete_io(&mut tls.sock).is_err() {
                return;
            }
        }
        let _ = http::serve(&mut tls, pages);
        tls.conn.send_close_notify();
        let _ = tls.conn.complete_io(&mut tls.sock);
    })
}
