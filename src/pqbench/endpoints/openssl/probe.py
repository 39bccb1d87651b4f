"""The `openssl` stack's readiness probe: one real TLS handshake against a site by pqtimer, or, for a chain pqtimer
cannot verify, by a client stack that can."""

from __future__ import annotations

from pqbench.endpoints.base import ClientJob, Place, Site, probe
from pqbench.endpoints.openssl.pqtimer import Pqtimer


def tls_handshake(place: Place, addr: str, site: Site, group: str) -> str | None:
    """None when one handshake with `group` against site succeeds from place, else why not. A site that sends a
    Merkle Tree Certificate is probed by a client stack with the mtc_verify feature: pqtimer cannot verify one."""
    client = _mtc_client() if (getattr(site.chain, "parts", None) or {}).get("mtc") else Pqtimer()
    job = ClientJob(host=addr, port=site.port, groups=[group], cafile=str(site.chain.root_cert),
                    servername=site.chain.server_name, timeout_ms=5000)
    return probe(place, client.argv(job, 1, 0, claims=None), env=client.env())


def _mtc_client():
    from pqbench import endpoints
    from pqbench import protocol as proto
    from pqbench.algorithms.chain_axes import MTC
    from pqbench.errors import MissingCapability
    for name in endpoints.names():
        stack = endpoints.get(name)  # a client of nginx's own protocol (TLS) that verifies an MTC
        if proto.get(stack.protocol).is_default and MTC["client"] in stack.capabilities().features:
            return stack.client()
    raise MissingCapability("no client stack here verifies a Merkle Tree Certificate to probe the server with",
                            "build the rustls stack (`make stacks`)")
