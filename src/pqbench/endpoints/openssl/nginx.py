"""The `openssl` stack's server: Debian's nginx on our OpenSSL, configured per run, inside the server
namespace.

Config, pages, logs and PID file all live in the run directory. nginx runs in the foreground
(daemon off) so pqbench owns its master process and stops it by PID.
"""

import re
import shutil
import subprocess
from pathlib import Path

from pqbench import interrupts
from pqbench.algorithms import openssl_build
from pqbench.endpoints.base import Place, Serving, stop_group
from pqbench.endpoints.openssl import nginx_h3
from pqbench.endpoints.openssl.nginx_config import NginxConfig, certcomp_env, write_pages  # noqa: F401 (their old home)
from pqbench.endpoints.ready import Starting, listening
from pqbench.errors import MissingCapability





class NginxServer:
    """The Server of the `openssl` stack: start(place, serving) in the server namespace, stop(). Debian's
    nginx serves the TCP sites; nginx-h3 (pqbench.endpoints.openssl.nginx_h3) the QUIC ones, when any."""

    def __init__(self, config: NginxConfig | None = None):
        if not shutil.which("nginx"):
            raise MissingCapability("nginx is not installed", "run `make`, which installs Debian's nginx-light")
        self.config = config
        self.proc: subprocess.Popen | None = None
        self.h3 = None  # nginx_h3.H3Server while QUIC sites are served

    @property
    def conf_path(self) -> Path:
        return self.config.run_dir / "nginx.conf"

    def prepare(self) -> None:
        d = self.config.run_dir
        d.mkdir(parents=True, exist_ok=True)
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (d / "nginx-tmp" / sub).mkdir(parents=True, exist_ok=True)
        write_pages(d / "www", self.config.pages)
        self.conf_path.write_text(self.config.render())

    def start(self, place: Place, serving: Serving | None = None) -> None:
        """Starts nginx at place (the server namespace) and returns once every site completes a TLS
        handshake with the first group (see ready)."""
        if serving is not None:
            self.config = NginxConfig(serving.run_dir, place.addr, serving.sites, groups=serving.groups,
                                      workers=serving.workers, pages=serving.pages)
        self.start_h3(place)
        if not self.config.tcp_sites:
            return
        self.prepare()
        argv = ["nginx", "-e", str(self.config.run_dir / "nginx-error.log"), "-c", str(self.conf_path),
                "-p", str(self.config.run_dir)]
        env = openssl_build.openssl_env()
        if self.config.compresses:
            env.update(certcomp_env())
        with interrupts.deferred():  # a Ctrl-C as nginx starts is raised once stop() can find it (it was left)
            self.proc = place.popen(argv, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    process_group=0)  # see backend_pqlink: own group, same session

    def start_h3(self, place: Place) -> None:
        """nginx-h3 for the QUIC sites, if there are any."""
        c = self.config
        quic = nginx_h3.quic_sites(c.sites)
        if quic:
            self.h3 = nginx_h3.H3Server(nginx_h3.H3Config(c.run_dir, c.listen_addr, quic, c.groups, c.workers,
                                                          c.pages))
            self.h3.start(place)

    def ready(self, client_place: Place) -> None:
        """Waits until every port accepts TCP, then until each completes one TLS handshake (pqtimer,
        the first group): a server that listens but cannot serve its chain fails here, not in a cell.
        QUIC sites: nginx-h3's ready (its UDP ports bound, then a QUIC handshake each)."""
        if self.h3:
            self.h3.ready(client_place)
        if not self.config.tcp_sites:
            return
        from pqbench.endpoints.openssl import probe
        c = self.config
        up = Starting("nginx", self.proc, [c.run_dir / "nginx-error.log"], self.stop)
        up.wait([s.port for s in c.tcp_sites], listening(client_place, c.listen_addr), "listen on")
        up.serves(c.tcp_sites, lambda site: probe.tls_handshake(client_place, c.listen_addr, site, c.first_group(site)),
                  "a TLS handshake")

    def stop(self) -> None:
        """Stops the masters (their workers follow) and waits for them."""
        try:
            stop_group(self.proc)
        finally:
            if self.h3:
                self.h3.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def version() -> str | None:
    if not shutil.which("nginx"):
        return None
    out = subprocess.run(["nginx", "-v"], capture_output=True, text=True)
    m = re.search(r"nginx/(\S+)", out.stderr + out.stdout)
    return m.group(1) if m else None


def running_with_openssl() -> str | None:
    """The OpenSSL version Debian's nginx reports when run on our libssl (None if it cannot)."""
    from pqbench import paths
    if not shutil.which("nginx") or not paths.OPENSSL_BIN.exists():
        return None
    out = subprocess.run(["nginx", "-V"], capture_output=True, text=True, env=openssl_build.openssl_env())
    m = re.search(r"running with OpenSSL (\S+)", out.stderr)
    if m:
        return m.group(1)
    m = re.search(r"built with OpenSSL (\S+)", out.stderr)
    return m.group(1) if m and out.returncode == 0 else None
