"""The `openssl` stack's readiness probe: one real TLS handshake by pqtimer (rustls's client for a Merkle Tree
Certificate) against a site."""

from __future__ import annotations

from pqbench.endpoints.base import ClientJob, Place, Site, probe
from pqbench.endpoints.openssl.pqtimer import Pqtimer


def tls_handshake(place: Place, addr: str, site: Site, group: str) -> str | None:
    """None when one handshake with `group` against site succeeds from place, else why not. A site that sends a
    Merkle Tree Certificate is probed by the client that verifies one (rustls's): pqtimer cannot."""
    if (getattr(site.chain, "parts", None) or {}).get("mtc"):
        from pqbench.endpoints.rustls import RustlsClient
        client = RustlsClient()
    else:
        client = Pqtimer()
    job = ClientJob(host=addr, port=site.port, groups=[group], cafile=str(site.chain.root_cert),
                    servername=site.chain.server_name, timeout_ms=5000)
    return probe(place, client.argv(job, 1, 0, claims=None), env=client.env())
