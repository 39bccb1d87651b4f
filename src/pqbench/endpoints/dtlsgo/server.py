"""The `dtlsgo` stack's server: `dtlsgo server --config FILE` (pion/dtls's listener) in the server namespace, a
UDP port per site, exactly the run's groups, DTLS 1.3 only, the cookie exchange per site (the cookie axis; on by
default, as pion's own)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from pqbench import interrupts
from pqbench.endpoints.base import ClientJob, Place, Serving, Site, probe, stop_group
from pqbench.endpoints.dtlsgo import build
from pqbench.endpoints.dtlsgo.client import SPEAKS, DtlsGoClient
from pqbench.endpoints.ready import Starting
from pqbench.errors import MeasurementFailed

PROBE_TIMEOUT_MS = 1000  # one try; a port not bound yet just times out and is tried again


class DtlsGoServer:
    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.serving: Serving | None = None
        self.addr = ""
        self.groups: list[str] = []
        self._stderr = None

    @property
    def log_path(self) -> Path:
        return Path(self.serving.run_dir) / "dtlsgo-server.log"

    def config(self) -> dict:
        return {"addr": self.addr, "log": str(self.log_path), "groups": self.groups,
                "sites": [{"port": s.port, "chain": str(s.chain.chain_file), "key": str(s.chain.leaf_key),
                           "cookie": s.options.get("cookie") is not False} for s in self.serving.sites]}

    def start(self, place: Place, serving: Serving) -> None:
        b = build.require()
        self.serving, self.addr = serving, place.addr
        run_dir = Path(serving.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        other = [s.port for s in serving.sites if s.transport not in SPEAKS]
        if other:
            raise MeasurementFailed(f"the dtlsgo server serves only DTLS over UDP, not ports {other}")
        self.groups = [n for n in map(build.group_name, serving.groups) if n]
        if not self.groups:
            raise MeasurementFailed(f"pion/dtls has none of the groups {serving.groups}")
        conf = run_dir / "dtlsgo-server.json"
        conf.write_text(json.dumps(self.config(), indent=1))
        self._stderr = open(run_dir / "dtlsgo-server.stderr", "wb")
        with interrupts.deferred():  # a Ctrl-C as it starts is raised once stop() can find it
            self.proc = place.popen([str(b), "server", "--config", str(conf)], env={}, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=self._stderr, process_group=0)

    def ready(self, client_place: Place) -> None:
        """Every site completes one DTLS handshake with the dtlsgo client (first group), tried until the server
        has bound its ports."""
        sites = {s.port: s for s in self.serving.sites}
        up = Starting("dtlsgo server", self.proc, [Path(self.serving.run_dir) / "dtlsgo-server.stderr", self.log_path],
                      self.stop)
        up.wait(sites, lambda port: handshake(client_place, self.addr, sites[port], self.groups[0], PROBE_TIMEOUT_MS),
                "complete a DTLS handshake on UDP")

    def stop(self) -> None:
        stop_group(self.proc)
        if self._stderr:
            self._stderr.close()
            self._stderr = None


def handshake(place: Place, addr: str, site: Site, group: str, timeout_ms: int = 5000) -> str | None:
    """None when one DTLS handshake with `group` against site succeeds from place (dtlsgo client), else why not."""
    client = DtlsGoClient()
    job = ClientJob(host=addr, port=site.port, groups=[group], cafile=str(site.chain.root_cert),
                    servername=site.chain.server_name, timeout_ms=timeout_ms, transport="udp")
    return probe(place, client.argv(job, 1, 0, claims=None), env=client.env())
