//! The servers' options and listeners: one port per certificate chain on the namespace address, a
//! thread per connection (so concurrent handshakes never queue behind each other).
//!
//!   PROG server --addr A --site PORT,CHAIN_PEM,KEY_PEM [--site ...] --groups G1:G2 [--page NAME=BYTES ...]
//!               [--run-dir DIR]   (the server's working directory: its run's files)

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::Arc;

use crate::http::{make_pages, Pages};
use crate::{bad_usage, parse_num};

#[derive(Debug, Clone)]
pub struct SiteOpts {
    pub port: u16,
    pub chain: String,
    pub key: String,
}

#[derive(Debug, Clone)]
pub struct ServerOpts {
    pub addr: Ipv4Addr,
    pub sites: Vec<SiteOpts>,
    pub groups: Vec<String>,
    pub pages: Vec<(String, usize)>,
    pub extra: Vec<(String, String)>,
}

impl ServerOpts {
    pub fn extra(&self, name: &str) -> Option<&str> {
        self.extra.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

pub fn parse(prog: &str, args: &[String], extra: &[&str]) -> ServerOpts {
    let mut o = ServerOpts { addr: Ipv4Addr::UNSPECIFIED, sites: vec![], groups: vec![], pages: vec![], extra: vec![] };
    let mut addr = None;
    let mut k = 0;
    while k < args.len() {
        let a = args[k].as_str();
        let Some(v) = args.get(k + 1).map(|s| s.as_str()) else { bad_usage(prog, a, "missing value") };
        k += 2;
        match a {
            "--addr" => addr = Some(v.to_string()),
            "--site" => {
                let parts: Vec<&str> = v.splitn(3, ',').collect();
                if parts.len() != 3 {
                    bad_usage(prog, a, "expected PORT,CHAIN_PEM,KEY_PEM");
                }
                o.sites.push(SiteOpts {
                    port: parse_num(prog, a, parts[0], 1u16, 65535),
                    chain: parts[1].into(),
                    key: parts[2].into(),
                });
            }
            "--run-dir" => {
                if let Err(e) = std::env::set_current_dir(v) {
                    bad_usage(prog, a, &format!("{v}: {e}"));
                }
            }
            "--groups" => o.groups = v.split(':').filter(|s| !s.is_empty()).map(String::from).collect(),
            "--page" => {
                let Some((name, size)) = v.split_once('=') else { bad_usage(prog, a, "expected NAME=BYTES") };
                o.pages.push((name.to_string(), parse_num(prog, a, size, 0usize, 1 << 30)));
            }
            _ if extra.contains(&a) => o.extra.push((a.trim_start_matches("--").to_string(), v.to_string())),
            _ => bad_usage(prog, a, "unknown option"),
        }
    }
    let Some(addr) = addr else { bad_usage(prog, "--addr", "required") };
    o.addr = addr.parse().unwrap_or_else(|_| bad_usage(prog, "--addr", "must be an IPv4 address"));
    if o.sites.is_empty() {
        bad_usage(prog, "--site", "at least one is required");
    }
    if o.groups.is_empty() {
        bad_usage(prog, "--groups", "required (the groups the server accepts)");
    }
    o
}

/// Listens on every site's port, then serves forever: `handle(site_index, stream, pages)` runs in a
/// thread of its own per accepted connection.
pub fn serve<F>(prog: &str, o: &ServerOpts, handle: F) -> !
where
    F: Fn(usize, TcpStream, &Pages) + Send + Sync + 'static,
{
    let pages = make_pages(&o.pages);
    let handle = Arc::new(handle);
    let mut listeners = vec![];
    for site in &o.sites {
        let l = TcpListener::bind(SocketAddrV4::new(o.addr, site.port))
            .unwrap_or_else(|e| crate::cannot(prog, &format!("cannot listen on {}:{}: {e}", o.addr, site.port)));
        listeners.push(l);
    }
    eprintln!("{prog}: listening on {} port(s) {:?}", o.addr, o.sites.iter().map(|s| s.port).collect::<Vec<_>>());
    let mut threads = vec![];
    for (idx, l) in listeners.into_iter().enumerate() {
        let handle = handle.clone();
        let pages = pages.clone();
        threads.push(std::thread::spawn(move || loop {
            match l.accept() {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let handle = handle.clone();
                    let pages = pages.clone();
                    let spawned = std::thread::Builder::new()
                        .stack_size(1024 * 1024)
                        .spawn(move || handle(idx, stream, &pages));
                    if let Err(e) = spawned {
                        eprintln!("cannot start a connection thread: {e}");
                    }
                }
                Err(e) => {
                    eprintln!("accept: {e}");
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
        }));
    }
    for t in threads {
        let _ = t.join();
    }
    std::process::exit(1)
}
