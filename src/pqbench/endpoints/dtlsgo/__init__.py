"""The `dtlsgo` stack: pion/dtls v4 (DTLS 1.3, RFC 9147, in Go) as server and client, one binary
(native/dtlsgo), protocol dtls over UDP.

What it can do is asked of the built binary (`dtlsgo capabilities` tries every group and key type in a DTLS
1.3 handshake on loopback UDP), never listed here. pion/dtls v4.0.1 on Go 1.27.3 found: x25519,
secp256r1/384r1, X25519MLKEM768; ECDSA P-256/384/521 and RSA certificates (no Ed25519, no ML-DSA). Everything
else of the catalog is a skipped cell with the reason. The cookie exchange per site is a feature (the cookie
axis).
"""

from __future__ import annotations

import functools

from pqbench.algorithms import catalog
from pqbench.endpoints import gostack
from pqbench.endpoints.base import Capabilities, Stack
from pqbench.endpoints.dtlsgo import build, client
from pqbench.endpoints.dtlsgo.client import DtlsGoClient
from pqbench.endpoints.dtlsgo.server import DtlsGoServer

__all__ = ["STACK"]


def unsupported(kex: str, sig: str, role: str = "server") -> str | None:
    """Why pion/dtls as built here cannot run kex with sig in this role, or None."""
    caps = build.capabilities()
    if caps is None:
        return f"{build.binary()} is not built: {build.FIX}"
    who = f"pion/dtls {caps.get('pion_dtls', '')} on {caps.get('go', 'Go')}"
    gap = gostack.kex_sig_gap(build.GO_BUILD, caps, kex, sig)
    if gap is None:
        return None
    kind, detail = gap
    s = catalog.find(sig, "sig")
    return {"group": f"{who} has no DTLS 1.3 group {catalog.find(kex, 'kem').name} (it has {detail})",
            "certs": f"no {s.name} certificates here: {detail}",
            "sig": f"{who} has no {s.name} certificates (it has {detail})",
            "chain": f"{who} cannot use a {s.name} chain: {detail}"}[kind]


@functools.lru_cache(maxsize=None)
def capabilities() -> Capabilities:
    caps = build.capabilities() or {}
    versions = gostack.versions(caps, build.provenance(), **{"pion-dtls": caps.get("pion_dtls")})
    modes = tuple(caps.get("modes", client.MODES))
    return Capabilities(stack="dtlsgo", protocol="dtls", transports=client.SPEAKS, modes=modes,
                        transport_modes={t: modes for t in client.SPEAKS}, versions=versions, unsupported=unsupported,
                        features=("cookie", "dtls_mtu"), first_timer_ms=1000.0,  # pion's initial flight interval
                        feature_notes={"offer": "pion/dtls chooses its key shares from its curve list",
                                       "cert_compression": "pion/dtls has no certificate compression"})


STACK = Stack(name="dtlsgo", protocol="dtls", server=DtlsGoServer, client=DtlsGoClient, capabilities=capabilities)
