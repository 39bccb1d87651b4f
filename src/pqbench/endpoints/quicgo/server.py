"""The `quicgo` stack's server: `quicgo server --config FILE` (quic-go's HTTP/3 server) in the server
namespace, a UDP port per site, exactly the run's groups, TLS 1.3 only, pages by name, Retry where the
site asks (quic.Transport.VerifySourceAddress). UDP segmentation offload is off (QUIC_GO_DISABLE_GSO,
set in the environment here and by the binary itself); quic-go v0.65 never enables GRO.

ML-DSA leaf keys are converted to the seed-only form Go reads, as for the gotls server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from pqbench import interrupts
from pqbench.endpoints import gostack
from pqbench.endpoints.base import ClientJob, Place, Serving, Site, probe, stop_group
from pqbench.endpoints.quicgo import build
from pqbench.endpoints.quicgo.client import ENV, SPEAKS, QuicGoClient
from pqbench.endpoints.ready import Starting
from pqbench.errors import MeasurementFailed

PROBE_TIMEOUT_MS = 1000  # one try; a port not bound yet just times out and is tried again


class QuicGoServer:
    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.serving: Serving | None = None
        self.addr = ""
        self.groups: list[str] = []
        self._stderr = None

    @property
    def log_path(self) -> Path:
        return Path(self.serving.run_dir) / "quicgo-server.log"

    def config(self, run_dir: Path) -> dict:
        keys = run_dir / "quicgo-keys"  # the seed-only ML-DSA copies (0600), apart from gotls's
        keys.mkdir(mode=0o700, exist_ok=True)
        return {"addr": self.addr, "log": str(self.log_path), "groups": self.groups,
                "pages": dict(self.serving.pages),
                "sites": [{"port": s.port, "chain": str(s.chain.chain_file), "key": str(gostack.go_key(s, keys)),
                           "retry": bool(s.retry)} for s in self.serving.sites]}

    def start(self, place: Place, serving: Serving) -> None:
        b = build.require()
        self.serving, self.addr = serving, place.addr
        run_dir = Path(serving.run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        tcp = [s.port for s in serving.sites if s.transport not in SPEAKS]
        if tcp:
            raise MeasurementFailed(f"the quicgo server serves only QUIC sites, not TCP ports {tcp}")
        # Only the run's groups this build has (a cell with another one is skipped before it gets here).
        self.groups = [n for n in map(build.group_name, serving.groups) if n]
        if not self.groups:
            raise MeasurementFailed(f"quic-go has none of the groups {serving.groups}")
        conf = run_dir / "quicgo-server.json"
        conf.write_text(json.dumps(self.config(run_dir), indent=1))
        self._stderr = open(run_dir / "quicgo-server.stderr", "wb")
        with interrupts.deferred():  # a Ctrl-C as it starts is raised once stop() can find it
            self.proc = place.popen([str(b), "server", "--config", str(conf)], env=dict(ENV),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
                                    process_group=0)

    def ready(self, client_place: Place) -> None:
        """Every site completes one QUIC handshake with the quicgo client (first group), tried until the
        server has bound its ports."""
        sites = {s.port: s for s in self.serving.sites}
        up = Starting("quicgo server", self.proc, [Path(self.serving.run_dir) / "quicgo-server.stderr", self.log_path],
                      self.stop)
        up.wait(sites, lambda port: handshake(client_place, self.addr, sites[port], self.groups[0], PROBE_TIMEOUT_MS),
                "complete a QUIC handshake on UDP")

    def stop(self) -> None:
        stop_group(self.proc)
        if self._stderr:
            self._stderr.close()
            self._stderr = None


def handshake(place: Place, addr: str, site: Site, group: str, timeout_ms: int = 5000) -> str | None:
    """None when one QUIC handshake with `group` against site succeeds from place (quicgo client), else why not."""
    client = QuicGoClient()
    job = ClientJob(host=addr, port=site.port, groups=[group], cafile=str(site.chain.root_cert),
                    servername=site.chain.server_name, timeout_ms=timeout_ms, transport="quic")
    return probe(place, client.argv(job, 1, 0, claims=None), env=client.env())
