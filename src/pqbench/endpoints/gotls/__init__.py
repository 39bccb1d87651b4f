"""The `gotls` stack: Go's crypto/tls (Go 1.27) as server and client, one binary (native/tlsgo).

What it can do is asked of the built binary (`tlsgo capabilities` tries every group and key type in
a handshake in memory and reports the ClientHello it sends), never listed here. Go 1.27.3 found:
x25519, secp256r1/384r1/521r1, X25519MLKEM768, SecP256r1MLKEM768, SecP384r1MLKEM1024, MLKEM1024;
ECDSA P-256/384/521, Ed25519, RSA (PSS) and ML-DSA-44/65/87 certificates. Everything from OpenSSL +
pqprov beyond that (FrodoKEM, HQC, BIKE, ML-KEM-512/768 alone, X448, FFDHE, Falcon, SLH-DSA,
SPHINCS+, MAYO, CROSS, Ed448, synthetic algorithms) is a skipped cell with the reason.
"""

from __future__ import annotations

import functools

from pqbench.algorithms import catalog
from pqbench.endpoints import gostack
from pqbench.endpoints.base import Capabilities, Stack
from pqbench.endpoints.gotls import build
from pqbench.endpoints.gotls.client import GoClient
from pqbench.endpoints.gotls.server import GoServer

__all__ = ["STACK"]


def unsupported(kex: str, sig: str, role: str = "server") -> str | None:
    """Why Go's crypto/tls as built here cannot run kex with sig in TLS 1.3 in this role, or None."""
    caps = build.capabilities()
    if caps is None:
        return f"{build.binary()} is not built: {build.FIX}"
    go = caps.get("go", "Go")
    gap = gostack.kex_sig_gap(build.GO_BUILD, caps, kex, sig)
    if gap is not None and gap[0] == "group":
        return f"{go} crypto/tls has no TLS group {catalog.find(kex, 'kem').name} (it has {gap[1]})"
    s = catalog.find(sig, "sig")
    if gap is not None:
        kind, detail = gap
        return {"certs": f"no {s.name} certificates here: {detail}",
                "sig": f"{go} crypto/tls and crypto/x509 have no {s.name} (they have {detail})",
                "chain": f"{go} crypto/tls cannot use a {s.name} chain: {detail}"}[kind]
    if role == "client":
        # An OpenSSL server picks (or refuses) its chain by the client's signature_algorithms_cert
        # (signature_algorithms when absent): what the Go client really sends is in the capabilities.
        hello = caps.get("client_hello") or {}
        offered = hello.get("signature_algorithms_cert")
        if offered is None:
            offered = hello.get("signature_algorithms") or []
        want = s.sigalg or s.name
        if want not in offered:
            return (f"the {go} client omits {want} from signature_algorithms_cert, so a server that honours "
                    f"it (nginx/OpenSSL) refuses a {s.name} chain")
    return None


@functools.lru_cache(maxsize=None)
def capabilities() -> Capabilities:
    caps = build.capabilities() or {}
    versions = gostack.versions(caps, build.provenance())
    return Capabilities(stack="gotls", protocol="tls", transports=("tcp",),
                        modes=tuple(caps.get("modes", ("handshake", "page", "requests", "resume"))),
                        versions=versions, unsupported=unsupported,
                        feature_notes={"offer": "crypto/tls chooses its key shares from its curve preferences",
                                       "cert_compression": "crypto/tls has no certificate compression"})


STACK = Stack(name="gotls", protocol="tls", server=GoServer, client=GoClient, capabilities=capabilities)
