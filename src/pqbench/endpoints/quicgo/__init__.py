"""The `quicgo` stack: quic-go v0.65 (HTTP/3 over QUIC, TLS 1.3 by Go 1.27's crypto/tls) as server and
client, one binary (native/quicgo), QUIC only.

What it can do is asked of the built binary (`quicgo capabilities` tries every group and key type in a
QUIC handshake on loopback UDP), never listed here. quic-go on Go 1.27.3 found: x25519,
secp256r1/384r1/521r1, X25519MLKEM768, SecP256r1MLKEM768, SecP384r1MLKEM1024, MLKEM1024; ECDSA
P-256/384/521, Ed25519, RSA (PSS) and ML-DSA-44/65/87 certificates, as crypto/tls over TCP. Everything
else of the catalog is a skipped cell with the reason. Retry per site (server) and the Initial datagram's
size (client, 1200..1452 bytes) are features.
"""

from __future__ import annotations

import functools

from pqbench import transport
from pqbench.algorithms import catalog
from pqbench.endpoints import gostack
from pqbench.endpoints.base import Capabilities, Stack
from pqbench.endpoints.quicgo import build, client
from pqbench.endpoints.quicgo.client import QuicGoClient
from pqbench.endpoints.quicgo.server import QuicGoServer

__all__ = ["STACK"]


def unsupported(kex: str, sig: str, role: str = "server") -> str | None:
    """Why quic-go as built here cannot run kex with sig over QUIC in this role, or None."""
    caps = build.capabilities()
    if caps is None:
        return f"{build.binary()} is not built: {build.FIX}"
    who = f"quic-go {caps.get('quic_go', '')} on {caps.get('go', 'Go')}".replace("  ", " ")
    gap = gostack.kex_sig_gap(build.GO_BUILD, caps, kex, sig)
    if gap is not None and gap[0] == "group":
        return f"{who} has no TLS group {catalog.find(kex, 'kem').name} over QUIC (it has {gap[1]})"
    s = catalog.find(sig, "sig")
    if gap is not None:
        kind, detail = gap
        return {"certs": f"no {s.name} certificates here: {detail}",
                "sig": f"{who} (crypto/tls, crypto/x509) has no {s.name} (it has {detail})",
                "chain": f"{who} cannot use a {s.name} chain: {detail}"}[kind]
    if role == "client":
        # A server of another stack picks its chain by what the client offers (as the quicgo server read it)
        offered = (caps.get("client_hello") or {}).get("signature_algorithms") or []
        want = s.sigalg or s.name
        if want not in offered:
            return f"the {who} client omits {want} from signature_algorithms"
    return None


@functools.lru_cache(maxsize=None)
def capabilities() -> Capabilities:
    caps = build.capabilities() or {}
    versions = gostack.versions(caps, build.provenance(), **{"quic-go": caps.get("quic_go")})
    modes = tuple(caps.get("modes", client.MODES))
    return Capabilities(stack="quicgo", protocol="tls", transports=client.SPEAKS, modes=modes,
                        transport_modes={t: modes for t in client.SPEAKS}, versions=versions, unsupported=unsupported,
                        features=("retry", "initial_size"), initial_sizes=(transport.MIN_INITIAL, client.MAX_INITIAL),
                        feature_notes={"offer": "crypto/tls chooses its key shares from its curve preferences",
                                       "cert_compression": "crypto/tls has no certificate compression"})


STACK = Stack(name="quicgo", protocol="tls", server=QuicGoServer, client=QuicGoClient, capabilities=capabilities)
