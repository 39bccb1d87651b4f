"""How the `openssl` stack's nginx is configured: the config file of one run's sites (TCP's nginx and, with
QUIC's listen lines, nginx-h3 render it), certificate compression preloaded, and the pages served."""

import dataclasses
import os
import pwd
from pathlib import Path

from pqbench.endpoints.base import DEFAULT_PAGES, DEFAULT_WORKERS, Site
from pqbench.errors import MissingCapability

# The transports nginx serves (pqbench.transport.TRANSPORTS): TCP ports; nginx-h3 serves QUIC's (nginx_h3.SERVES).
SERVES = ("tcp",)


@dataclasses.dataclass
class NginxConfig:
    run_dir: Path
    listen_addr: str
    sites: list[Site]
    groups: list[str]  # TLS groups the server accepts, in preference order
    workers: int = DEFAULT_WORKERS
    pages: dict = dataclasses.field(default_factory=lambda: dict(DEFAULT_PAGES))

    @property
    def compresses(self) -> bool:
        """Some site sends compressed chains: nginx runs with the libpqcertcomp preload (certcomp_env)."""
        return any(s.compress_certs for s in self.tcp_sites)

    @property
    def tcp_sites(self) -> list[Site]:
        """The sites this nginx serves; the QUIC ones are nginx-h3's (pqbench.endpoints.openssl.nginx_h3)."""
        return [s for s in self.sites if s.transport in SERVES]

    def first_group(self, site: Site) -> str:
        """The group a readiness handshake with site offers: the first it accepts."""
        if site.server_groups:
            from pqbench.endpoints.offer import parse_server_groups
            return parse_server_groups(site.server_groups).groups[0]
        return self.groups[0]

    def site_options(self, site: Site) -> str:
        """What one server block sets beyond its chain: its groups and their order, certificate compression,
        early data. Nothing for a site that asks for none of them (the config is as it always was)."""
        lines = []
        if site.server_groups:
            from pqbench.endpoints.offer import parse_server_groups
            # OpenSSL's tuple syntax as it is; the server's order within a tuple, not the client's
            lines += [f"ssl_ecdh_curve {parse_server_groups(site.server_groups).openssl()};",
                      "ssl_prefer_server_ciphers on;"]
        if self.compresses and not site.compress_certs:
            # the preload compressed every chain; this site sends its own uncompressed
            lines.append("ssl_conf_command Options -TxCertificateCompression;")
        if site.early_data:
            # Every sample resumes from a copy of one ticket (as the resume mode does); OpenSSL's replay
            # protection would make tickets single-use (and needs a session cache shared by the workers),
            # so every sample after the first would be a full handshake.
            lines += ["ssl_early_data on;", "ssl_conf_command Options -AntiReplay;"]
        return "".join(f"\n        {line}" for line in lines)

    @staticmethod
    def certificate(chain) -> str:
        """A server block's certificate lines. A Merkle Tree Certificate (pqbench.algorithms.mtc) is one OpenSSL
        cannot rate: it refuses to load it at security level 1 ("ca md too weak", its signature algorithm being
        unknown). So the block loads the X.509 leaf of the same key, lowers that block's security level (its
        TLS 1.2 cipher string, which TLS 1.3 does not use) and then puts the MTC in the key's place, as
        ssl_conf_command runs after the certificates are loaded. A chain with a client CA asks every client for
        its certificate (mutual TLS) and verifies it."""
        lines = [f"ssl_certificate {chain.chain_file};", f"ssl_certificate_key {chain.leaf_key};"]
        if (getattr(chain, "parts", None) or {}).get("mtc"):
            lines = [f"ssl_certificate {chain.directory / 'x509' / 'leaf.crt'};", lines[1],
                     "ssl_conf_command CipherString DEFAULT:@SECLEVEL=0;",
                     f"ssl_conf_command Certificate {chain.chain_file};"]
        if getattr(chain, "client_ca", None):  # mutual TLS: ask for the client's certificate and verify it
            lines += ["ssl_verify_client on;", f"ssl_client_certificate {chain.client_ca};"]
        return "".join(f"\n        {line}" for line in lines)

    # What the TCP nginx and nginx-h3 (pqbench.endpoints.openssl.nginx_h3) render differently.
    NAME = "nginx"  # the prefix of its files in the run directory
    HTTP_EXTRA = ("sendfile on;", "tcp_nodelay on;")

    def served(self) -> list[Site]:
        return self.tcp_sites

    def listen(self, site: Site) -> list[str]:
        # the http axis (pqbench.endpoints.http_version): h2 by ALPN (Debian's nginx 1.22 knows only the listen flag)
        h2 = " http2" if (site.options or {}).get("http") == "2" else ""
        return [f"listen {self.listen_addr}:{site.port} ssl{h2} reuseport;"]

    def temp_paths(self) -> list[str]:
        tmp = self.run_dir / f"{self.NAME}-tmp"
        return [f"{kind}_temp_path {tmp / sub};" for kind, sub in (("client_body", "body"), ("proxy", "proxy"),
                                                                   ("fastcgi", "fastcgi"), ("uwsgi", "uwsgi"),
                                                                   ("scgi", "scgi"))]

    def origin_listen(self, addr: str, site: Site) -> list[str]:
        h2 = " http2" if (site.options or {}).get("http") == "2" else ""
        return [f"listen {addr}:{site.port} ssl{h2};"]

    def origins(self, site: Site) -> list[str]:
        """The server blocks of a multi-origin page's further origins (pqbench.webpages.serve): each on its own
        address at the site's port, with its own chain."""
        return [f"""
    server {{{"".join(f"{chr(10)}        {line}" for line in self.origin_listen(addr, site))}{self.certificate(chain)}{self.site_options(site)}
        location / {{ root {self.run_dir / 'www'}; }}
    }}""" for addr, chain in (site.options or {}).get("origins", [])]

    def render(self) -> str:
        # /html/PAGE: the same page as a document a browser loads (as application/octet-stream it downloads it)
        servers = "\n".join("\n    server {" + "".join(f"\n        {line}" for line in self.listen(s)) + f"""\
{self.certificate(s.chain)}{self.site_options(s)}
        location / {{ root {self.run_dir / 'www'}; }}
        location /html/ {{ alias {self.run_dir / 'www'}/; default_type text/html; }}
    }}""" + "".join(self.origins(s)) for s in self.served())
        d, name = self.run_dir, self.NAME
        # a multi-origin page's resources with the types a browser checks (a stylesheet is applied as text/css)
        types = ["types { text/html html; text/css css; application/javascript js; image/png png; }"] * any(
            (s.options or {}).get("origins") for s in self.served())
        http = "".join(f"\n    {line}" for line in (*self.temp_paths(), "default_type application/octet-stream;",
                                                      *self.HTTP_EXTRA, *types))
        # Workers keep the master's user: run directories (e.g. under a 0700 temp dir) stay private,
        # and the server is reachable only inside its namespace anyway.
        return f"""# Generated by pqbench for one run; see pqbench.endpoints.openssl.{name.replace('-', '_')}.
user {pwd.getpwuid(os.geteuid()).pw_name};
worker_processes {self.workers};
daemon off;
master_process on;
pid {d / f'{name}.pid'};
error_log {d / f'{name}-error.log'} warn;
events {{ worker_connections 4096; }}
http {{
    # the last two: r when the TLS session resumed, 1 when the request came as 0-RTT early data (a browser's
    # warm load is checked against them: pqbench.endpoints.browsers.warm)
    log_format pqbench '$remote_addr:$remote_port $ssl_protocol $ssl_curve $ssl_cipher '
                       '"$request" $status $body_bytes_sent $request_time $connection_requests '
                       '$ssl_session_reused $ssl_early_data';
    access_log {d / f'{name}-access.log'} pqbench;{http}
    keepalive_timeout 120s;
    keepalive_requests 1000000;
    ssl_protocols TLSv1.3;
    ssl_ecdh_curve {':'.join(self.groups)};
    ssl_session_tickets on;
    ssl_session_timeout 1h;
{servers}
}}
"""


def certcomp_library() -> Path:
    """native/certcomp's preload that makes nginx compress its certificate chains (RFC 8879)."""
    from pqbench import paths
    return paths.NATIVE_BUILD / "certcomp" / "libpqcertcomp.so"


def certcomp_env(algorithms: str = "all") -> dict:
    """The environment in which nginx compresses every chain it loads with these algorithms (all: every
    one our OpenSSL has); a site that should not send them turns TxCertificateCompression off."""
    lib = certcomp_library()
    if not lib.exists():
        raise MissingCapability(f"{lib} is missing (nginx cannot compress certificates without it)",
                                "run `make` in the project root")
    return {"LD_PRELOAD": str(lib), "PQB_CERT_COMPRESSION": algorithms}


def write_pages(www: Path, pages: dict) -> None:
    """Static pages of random (incompressible) bytes, named by size (1k, 10k, …)."""
    www.mkdir(parents=True, exist_ok=True)
    for name, size in pages.items():
        path = www / name
        if not path.exists() or path.stat().st_size != size:
            path.write_bytes(os.urandom(size))
