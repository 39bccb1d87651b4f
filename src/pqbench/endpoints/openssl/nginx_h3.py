"""The `openssl` stack's QUIC server: nginx 1.26 with HTTP/3 (build/nginx-h3, built on first use by
scripts/build-nginx-h3.sh) on our OpenSSL, serving a run's QUIC sites inside the server namespace.

Debian's nginx-light has no HTTP/3, so a run with both transports runs two nginx: Debian's for the TCP
sites (pqbench.endpoints.openssl.nginx) and this one for the QUIC sites, each on its own ports, with the
same chains, groups and pages. Its files sit beside the TCP nginx's in the run directory, named nginx-h3*.

nginx 1.26 does QUIC through its OpenSSL compatibility layer (see scripts/build-nginx-h3.sh): the TLS
handshake is our OpenSSL's (pqprov's groups and signatures included), but there is no 0-RTT, so a QUIC
site that asks for early data is refused.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from pathlib import Path

from pqbench import interrupts, paths
from pqbench.algorithms import openssl_build
from pqbench.endpoints.base import ClientJob, Place, Site, probe, stop_group
from pqbench.endpoints.openssl.nginx_config import NginxConfig, certcomp_env, write_pages
from pqbench.endpoints.ready import Starting
from pqbench.errors import MissingCapability

STEP = "nginx-h3"  # scripts/build.sh's step, and its folder under build/


def home() -> Path:
    return paths.BUILD / STEP


def binary() -> Path:
    return home() / "sbin" / "nginx"


def built() -> bool:
    return (home() / ".done").exists() and binary().exists()


def version() -> str | None:
    """nginx-h3's version as the binary says it (None until it is built)."""
    if not built():
        return None
    out = subprocess.run([str(binary()), "-v"], capture_output=True, text=True, env=openssl_build.openssl_env())
    m = re.search(r"nginx/(\S+)", out.stderr + out.stdout)
    return m.group(1) if m else None


# The transports nginx-h3 serves (pqbench.transport.TRANSPORTS); nginx itself serves TCP's (nginx_config.SERVES).
SERVES = ("quic",)


def quic_sites(sites: list[Site]) -> list[Site]:
    return [s for s in sites if s.transport in SERVES]


@dataclasses.dataclass
class H3Config(NginxConfig):
    """An NginxConfig whose sites are all QUIC: a UDP port each, HTTP/3, TLS 1.3 only."""

    def check(self) -> None:
        """Refuses what this server cannot do, naming the site."""
        for s in self.sites:
            if s.transport not in SERVES:
                raise ValueError(f"site {s.port}: transport {s.transport!r} is not served by nginx-h3")
            if s.early_data:
                raise MissingCapability(
                    f"site {s.port}: 0-RTT over QUIC: nginx 1.26 does QUIC through its OpenSSL compatibility "
                    "layer, which has no early data", "measure 0-RTT over TCP (transport = tcp)")

    # quic_gso off: one datagram on the wire is one packet in the emulator (it is nginx's default; said
    # here so that no default can change it). reuseport: a socket per worker, the kernel keeps a client's
    # 4-tuple on one worker, so all of a connection's datagrams reach the worker that has it.
    NAME = "nginx-h3"
    HTTP_EXTRA = ("quic_gso off;",)

    def served(self) -> list[Site]:
        return self.sites

    def listen(self, site: Site) -> list[str]:
        return [f"listen {self.listen_addr}:{site.port} quic reuseport;", "http3 on;",
                f"quic_retry {'on' if site.retry else 'off'};"]

    def origin_listen(self, addr: str, site: Site) -> list[str]:
        """A multi-origin page's further origin over QUIC (pqbench.webpages.serve): HTTP/3 at its own address."""
        return [f"listen {addr}:{site.port} quic;", "http3 on;", "quic_retry off;"]

    def temp_paths(self) -> list[str]:
        return [f"client_body_temp_path {self.run_dir / 'nginx-h3-tmp'};"]  # built without the proxy modules


class H3Server:
    """nginx-h3 for one run's QUIC sites: start(place) in the server namespace, ready(client_place), stop()."""

    def __init__(self, config: H3Config):
        config.check()
        if not built():
            raise MissingCapability(f"nginx with HTTP/3 is not built ({binary()} is missing)",
                                    f"run `scripts/build.sh {STEP}` (pqbench builds it on first use)")
        self.config = config
        self.proc: subprocess.Popen | None = None

    @property
    def conf_path(self) -> Path:
        return self.config.run_dir / "nginx-h3.conf"

    def start(self, place: Place) -> None:
        d = self.config.run_dir
        (d / "nginx-h3-tmp").mkdir(parents=True, exist_ok=True)
        write_pages(d / "www", self.config.pages)
        self.conf_path.write_text(self.config.render())
        env = openssl_build.openssl_env()
        if self.config.compresses:
            env.update(certcomp_env())
        with interrupts.deferred():  # a Ctrl-C as it starts is raised once stop() can find it
            self.proc = place.popen([str(binary()), "-e", str(d / "nginx-h3-error.log"), "-c", str(self.conf_path),
                                     "-p", str(d)], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, process_group=0)  # own group: stop_group ends its workers

    def ready(self, client_place: Place) -> None:
        """Waits until every site's UDP port is bound in nginx-h3's (the server) namespace, then until each completes a
        QUIC handshake from the client side with the first group (the chain verified against its root)."""
        c = self.config
        up = Starting("nginx-h3", self.proc, [c.run_dir / "nginx-h3-error.log"], self.stop)
        up.wait([s.port for s in c.sites], lambda port: None if port in udp_bound(self.master_pid()) else "not bound",
                "bind UDP")
        up.serves(c.sites, lambda site: quic_handshake(client_place, c.listen_addr, site, c.first_group(site)),
                  "a QUIC handshake")

    def master_pid(self) -> int | None:
        """nginx-h3's master: the process started (`ip netns exec` executes it), or its child where the place
        starts it through a process that stays; None before it runs."""
        pids = [self.proc.pid]
        try:
            pids += [int(p) for p in Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()]
        except OSError:
            pass
        for pid in pids:
            try:
                if os.readlink(f"/proc/{pid}/exe") == str(binary()):
                    return pid
            except OSError:
                pass
        return None

    def stop(self) -> None:
        stop_group(self.proc)


def udp_bound(pid: int | None) -> set[int]:
    """The UDP ports bound in the network namespace of process pid (its /proc/PID/net/udp: no process to
    start, and the namespace is the process's own); none while pid is None."""
    ports = set()
    if pid is None:
        return ports
    for table in ("udp", "udp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:  # "sl local_address(hex ip:hex port) rem_address st ..."
            ports.add(int(line.split()[1].rpartition(":")[2], 16))
    return ports


def quic_handshake(place: Place, addr: str, site: Site, group: str) -> str | None:
    """None when one QUIC handshake by pqtimer (the stack's own client: HTTP/3's ALPN, only `group` offered,
    the chain verified against its root) against site succeeds from place, else why not."""
    from pqbench.endpoints.openssl.pqtimer import Pqtimer
    client = Pqtimer()
    job = ClientJob(host=addr, port=site.port, groups=[group], cafile=str(site.chain.root_cert),
                    servername=site.chain.server_name, timeout_ms=5000, transport="quic")
    return probe(place, client.argv(job, 1, 0, claims=None), env=client.env())
