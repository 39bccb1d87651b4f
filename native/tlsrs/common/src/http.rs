//! HTTP/1.1 as pqtimer speaks it (one GET per request, Content-Length bodies, keep-alive), and the
//! servers' side: GET /<page> answers that page's bytes.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::Arc;

use crate::{now_ns, Failure};

/// A TLS connection after its handshake, as the HTTP client needs it. Each call waits (poll) up to
/// the deadline the implementation was given.
pub trait TlsIo {
    fn send_all(&mut self, buf: &[u8]) -> Result<(), Failure>;
    /// Ok(0) is end of stream.
    fn recv(&mut self, buf: &mut [u8]) -> Result<usize, Failure>;
}

#[derive(Debug, Default)]
pub struct HttpResult {
    pub first_byte: Option<u64>,
    pub status: Option<u32>,
    pub body_bytes: u64,
    pub requests: u32,
}

/// One GET; records the first byte of the response when `first`.
pub fn get(io: &mut dyn TlsIo, path: &str, host: &str, first: bool, res: &mut HttpResult) -> Result<(), Failure> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: keep-alive\r\n\r\n");
    io.send_all(req.as_bytes())?;
    let mut buf = vec![0u8; 1 << 16];
    let mut head: Vec<u8> = Vec::new();
    let mut content_length: Option<u64> = None;
    let mut body = 0u64;
    loop {
        let n = io.recv(&mut buf)?;
        if n == 0 {
            return Err(Failure::new("closed", "reading the HTTP response: the server closed the connection"));
        }
        if first && res.first_byte.is_none() {
            res.first_byte = Some(now_ns());
        }
        match content_length {
            Some(_) => body += n as u64,
            None => {
                head.extend_from_slice(&buf[..n]);
                let Some(end) = find(&head, b"\r\n\r\n") else {
                    if head.len() > 1 << 16 {
                        return Err(Failure::new("http_error", "response headers too long"));
                    }
                    continue;
                };
                let text = String::from_utf8_lossy(&head[..end]).to_string();
                let status = text
                    .strip_prefix("HTTP/1.")
                    .and_then(|r| r.get(2..))
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|s| s.parse::<u32>().ok())
                    .ok_or_else(|| Failure::new("http_error", "not an HTTP response"))?;
                res.status = Some(status);
                let cl = text
                    .split("\r\n")
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.trim().eq_ignore_ascii_case("content-length").then(|| v.trim().parse::<u64>().ok()).flatten()
                    })
                    .ok_or_else(|| Failure::new("http_error", "response without Content-Length"))?;
                content_length = Some(cl);
                body = (head.len() - end - 4) as u64;
            }
        }
        if let Some(cl) = content_length {
            if body >= cl {
                break;
            }
        }
    }
    res.body_bytes += body;
    res.requests += 1;
    if res.status != Some(200) {
        return Err(Failure::new("http_status", format!("HTTP status {}", res.status.unwrap_or(0))));
    }
    Ok(())
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Page name -> body, made once per server (pseudo-random bytes: TLS does not compress).
pub type Pages = Arc<HashMap<String, Vec<u8>>>;

pub fn make_pages(spec: &[(String, usize)]) -> Pages {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut pages = HashMap::new();
    for (name, size) in spec {
        let mut body = Vec::with_capacity(*size);
        while body.len() < *size {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            body.extend_from_slice(&x.to_le_bytes());
        }
        body.truncate(*size);
        pages.insert(name.clone(), body);
    }
    Arc::new(pages)
}

/// Serves GET /<page> on one connection until the peer closes it (keep-alive).
pub fn serve<S: Read + Write>(stream: &mut S, pages: &Pages) -> std::io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut have: Vec<u8> = Vec::new();
    loop {
        let end = loop {
            if let Some(end) = find(&have, b"\r\n\r\n") {
                break end;
            }
            if have.len() > 64 * 1024 {
                return Ok(());
            }
            let n = stream.read(&mut buf)?;
            if n == 0 {
                return Ok(());
            }
            have.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&have[..end]).to_string();
        have.drain(..end + 4);
        let mut parts = head.split_whitespace();
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let page = pages.get(target.trim_start_matches('/'));
        let (status, body): (&str, &[u8]) = match (method, page) {
            ("GET", Some(b)) => ("200 OK", b),
            ("GET", None) => ("404 Not Found", b""),
            _ => ("405 Method Not Allowed", b""),
        };
        let header = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n",
            body.len()
        );
        let mut out = Vec::with_capacity(header.len() + body.len());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(body);
        stream.write_all(&out)?;
        stream.flush()?;
    }
}
