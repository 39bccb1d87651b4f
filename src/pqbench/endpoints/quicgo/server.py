"""The `quicgo` stack's server: `quicgo server --config FILE` (quic-go's HTTP/3 server) in the server
namespace, a UDP port per site, exactly the run's groups, TLS 1.3 only, pages by name, Retry where the
site asks (quic.Transport.VerifySourceAddress). UDP segmentation offload is off (QUIC_GO_DISABLE_GSO,
set in the environment here and by the binary itself); quic-go v0.65 never enables GRO.

ML-DSA leaf keys are converted to the seed-only form Go reads, as for the gotls server."""

from __future__ import annotations

from pathlib import Path

from pqbench.endpoints import gostack
from pqbench.endpoints.base import ClientJob, Place, Site, probe
from pqbench.endpoints.gostack import ConfiguredServer
from pqbench.endpoints.quicgo import build
from pqbench.endpoints.quicgo.client import ENV, SPEAKS, QuicGoClient

PROBE_TIMEOUT_MS = 1000  # one try; a port not bound yet just times out and is tried again


class QuicGoServer(ConfiguredServer):
    program, build, speaks, library, env = "quicgo", build.GO_BUILD, SPEAKS, "quic-go", ENV
    handshake_word = "complete a QUIC handshake on UDP"

    def config(self, run_dir: Path) -> dict:
        keys = run_dir / "quicgo-keys"  # the seed-only ML-DSA copies (0600), apart from gotls's
        keys.mkdir(mode=0o700, exist_ok=True)
        return {"addr": self.addr, "log": str(self.log_path), "groups": self.groups,
                "pages": dict(self.serving.pages),
                "sites": [{"port": s.port, "chain": str(s.chain.chain_file), "key": str(gostack.go_key(s, keys)),
                           "retry": bool(s.retry)} for s in self.serving.sites]}

    def probe(self, place: Place, site: Site, group: str) -> str | None:
        return handshake(place, self.addr, site, group, PROBE_TIMEOUT_MS)


def handshake(place: Place, addr: str, site: Site, group: str, timeout_ms: int = 5000) -> str | None:
    """None when one QUIC handshake with `group` against site succeeds from place (quicgo client), else why not."""
    client = QuicGoClient()
    job = ClientJob(host=addr, port=site.port, groups=[group], cafile=str(site.chain.root_cert),
                    servername=site.chain.server_name, timeout_ms=timeout_ms, transport="quic")
    return probe(place, client.argv(job, 1, 0, claims=None), env=client.env())
