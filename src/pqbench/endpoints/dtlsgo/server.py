"""The `dtlsgo` stack's server: `dtlsgo server --config FILE` (pion/dtls's listener) in the server namespace, a
UDP port per site, exactly the run's groups, DTLS 1.3 only, the cookie exchange per site (the cookie axis; on by
default, as pion's own)."""

from __future__ import annotations

from pathlib import Path

from pqbench.endpoints.base import ClientJob, Place, Site, probe
from pqbench.endpoints.dtlsgo import build
from pqbench.endpoints.dtlsgo.client import SPEAKS, DtlsGoClient
from pqbench.endpoints.gostack import ConfiguredServer

PROBE_TIMEOUT_MS = 1000  # one try; a port not bound yet just times out and is tried again


class DtlsGoServer(ConfiguredServer):
    program, build, speaks, library = "dtlsgo", build.GO_BUILD, SPEAKS, "pion/dtls"
    handshake_word = "complete a DTLS handshake on UDP"

    def config(self, run_dir: Path) -> dict:
        return {"addr": self.addr, "log": str(self.log_path), "groups": self.groups,
                "sites": [{"port": s.port, "chain": str(s.chain.chain_file), "key": str(s.chain.leaf_key),
                           "cookie": s.options.get("cookie") is not False, "mtu": s.options.get("dtls_mtu") or 0}
                          for s in self.serving.sites]}

    def probe(self, place: Place, site: Site, group: str) -> str | None:
        return handshake(place, self.addr, site, group, PROBE_TIMEOUT_MS)


def handshake(place: Place, addr: str, site: Site, group: str, timeout_ms: int = 5000) -> str | None:
    """None when one DTLS handshake with `group` against site succeeds from place (dtlsgo client), else why not."""
    client = DtlsGoClient()
    job = ClientJob(host=addr, port=site.port, groups=[group], cafile=str(site.chain.root_cert),
                    servername=site.chain.server_name, timeout_ms=timeout_ms, transport="udp")
    return probe(place, client.argv(job, 1, 0, claims=None), env=client.env())
