"""The `rustls` stack: rustls 0.23 with the aws-lc-rs provider, as server and client (pqrustls, built
from native/tlsrs by scripts/build-rust.sh), TLS 1.3 only.

What it can do is asked of the built binary (`pqrustls --capabilities`): the provider's key exchange
groups (x25519, secp256r1, secp384r1, X25519MLKEM768, SecP256r1MLKEM768, MLKEM768, MLKEM1024 in
0.23.46), the signature schemes its verifier accepts and the key types its server signs with (ECDSA,
Ed25519, RSA-PSS, ML-DSA-44/65/87; our OpenSSL's ML-DSA PKCS#8 keys load as they are). Everything
else OpenSSL + pqprov offers (FrodoKEM, HQC, BIKE, X448, Falcon, SLH-DSA, MAYO, synthetic
algorithms, ...) is a skipped cell with the reason.

Its client cannot see individual handshake messages; it hands rustls one TLS record at a time, so
server_hello_received and server_finished_received are the arrival of the record that held them.
"""

from __future__ import annotations

import functools

from pqbench.endpoints import tlsrs
from pqbench.endpoints.base import Capabilities, Stack

__all__ = ["STACK"]

BINARY = "pqrustls"


def unsupported(kex: str, sig: str, role: str = "server") -> str | None:
    """Why rustls (aws-lc-rs) as built here cannot run kex with sig in TLS 1.3 in this role, or None."""
    version = tlsrs.versions("rustls").get("rustls") or ""
    return tlsrs.library_gap(BINARY, f"rustls {version} (aws-lc-rs)".replace("  ", " "), kex, sig, role)


@functools.lru_cache(maxsize=None)
def capabilities() -> Capabilities:
    caps = tlsrs.capabilities(BINARY) or {}
    return Capabilities(stack="rustls", protocol="tls", transports=("tcp",),
                        modes=tuple(caps.get("modes") or ("handshake", "page", "requests")),
                        versions=tlsrs.versions("rustls", "aws-lc-rs", "aws-lc-sys", "rustls-webpki"),
                        unsupported=unsupported,
                        # the client verifies Merkle Tree Certificates (the mtcs crate); the server sends any certificate
                        # and the client sends a certificate of its own when asked (mutual TLS)
                        features=("mtls_client", *(("mtc_verify", "mtc_serve") if caps.get("mtc") else ())),
                        feature_notes={"offer": "pqrustls takes one group list and lets rustls choose its key shares",
                                       "cert_compression": "pqrustls is built without rustls's brotli/zlib features"})


class RustlsServer(tlsrs.NativeServer):
    binary_name = BINARY


class RustlsClient(tlsrs.NativeClient):
    name = BINARY


STACK = Stack(name="rustls", protocol="tls", server=RustlsServer, client=RustlsClient, capabilities=capabilities)
