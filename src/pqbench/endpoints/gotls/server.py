"""The `gotls` stack's server: `tlsgo server` (Go's crypto/tls behind net/http) in the server
namespace, one port per chain, exactly the run's groups, TLS 1.3 only, pages by name.

An ML-DSA leaf key is converted to the seed-only form Go reads, into the run directory (0600) first
(gostack.go_key).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from pqbench import interrupts
from pqbench.endpoints import gostack
from pqbench.endpoints.base import ClientJob, Place, Serving, Site, probe, stop_group
from pqbench.endpoints.gotls import build
from pqbench.endpoints.gotls.client import GoClient
from pqbench.endpoints.ready import Starting, listening
from pqbench.errors import MeasurementFailed


class GoServer:
    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.serving: Serving | None = None
        self.addr = ""
        self.groups: list[str] = []

    @property
    def log_path(self) -> Path:
        return self.serving.run_dir / "gotls-server.log"

    def start(self, place: Place, serving: Serving) -> None:
        b = build.require()
        self.serving, self.addr = serving, place.addr
        run_dir = Path(serving.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        # Only the run's groups this build has (a cell with another one is skipped before it gets here),
        # by the names tlsgo uses.
        self.groups = [n for n in map(build.group_name, serving.groups) if n]
        if not self.groups:
            raise MeasurementFailed(f"Go crypto/tls has none of the groups {serving.groups}")
        argv = [str(b), "server", "--addr", place.addr, "--groups", ":".join(self.groups),
                "--log", str(self.log_path)]
        for site in serving.sites:
            argv += ["--site", f"{site.port},{site.chain.chain_file},{gostack.go_key(site, run_dir)}"]
        for name, size in serving.pages.items():
            argv += ["--page", f"{name}={size}"]
        self._stderr = open(run_dir / "gotls-server.stderr", "wb")
        with interrupts.deferred():  # a Ctrl-C as it starts is raised once stop() can find it
            self.proc = place.popen(argv, env={}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=self._stderr, process_group=0)

    def ready(self, client_place: Place) -> None:
        """Every port accepts TCP, then completes one TLS handshake with the Go client (first group)."""
        up = Starting("tlsgo server", self.proc, [self.serving.run_dir / "gotls-server.stderr", self.log_path],
                      self.stop)
        up.wait([s.port for s in self.serving.sites], listening(client_place, self.addr), "listen on")
        up.serves(self.serving.sites, lambda site: handshake(client_place, self.addr, site, self.groups[0]),
                  "a TLS handshake")

    def stop(self) -> None:
        stop_group(self.proc)
        if getattr(self, "_stderr", None):
            self._stderr.close()
            self._stderr = None


def handshake(place: Place, addr: str, site: Site, group: str) -> str | None:
    """None when one handshake with `group` against site succeeds from place (Go client), else why not."""
    client = GoClient()
    job = ClientJob(host=addr, port=site.port, groups=[group], cafile=str(site.chain.root_cert),
                    servername=site.chain.server_name, timeout_ms=5000)
    return probe(place, client.argv(job, 1, 0, claims=None), env=client.env())
