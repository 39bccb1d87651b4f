"""The `openssl` stack: Debian's nginx (TCP), nginx-h3 (QUIC) and pqtimer, all on our OpenSSL with pqprov."""

from __future__ import annotations

import functools

from pqbench.algorithms import catalog, openssl_build
from pqbench.endpoints.base import Capabilities, Stack
from pqbench.endpoints.openssl import nginx, nginx_h3, pqtimer
from pqbench.endpoints.openssl.nginx import NginxServer
from pqbench.endpoints.openssl.pqload import Pqload
from pqbench.endpoints.openssl.pqtimer import Pqtimer

__all__ = ["STACK"]


def unsupported(kex: str, sig: str, role: str = "server") -> str | None:
    """Why this build of OpenSSL + pqprov cannot run kex with sig in TLS 1.3 (either role), or None."""
    for name, kind in ((kex, "kem"), (sig, "sig")):
        alg = catalog.find(name, kind)
        avail = catalog.availability(alg)
        if not avail.tls:
            return f"{alg.name} is not usable in TLS 1.3 here: {avail.reason or 'no TLS code point'}"
    return None


@functools.lru_cache(maxsize=None)
def capabilities() -> Capabilities:
    # QUIC: nginx-h3 (built on first use) serves the QUIC sites (its version is None until it is built),
    # with Retry per site. Over QUIC, nginx 1.26's OpenSSL compatibility layer has no 0-RTT (no early mode)
    # and pqtimer's QUIC client does not resume (no resume modes).
    return Capabilities(stack="openssl", protocol="tls", transports=("tcp", "quic"),
                        modes=("handshake", "page", "requests", "resume", "resume_page", "early"),
                        transport_modes={"quic": pqtimer.QUIC_MODES},
                        # mtc_serve: nginx sends a Merkle Tree Certificate (nginx_config.certificate); pqtimer cannot
                        # verify one. mtls_*: nginx asks for and verifies a client certificate, pqtimer sends one
                        features=("offer", "cert_compression", "retry", "http2", "origins", "pages", "mtc_serve",
                                  "mtls_server", "mtls_client"),
                        feature_notes={"initial_size": "OpenSSL 3.5's QUIC client sends 1200-byte datagrams, always",
                                       "h2_alpn": "pqtimer speaks HTTP/1.1 over TCP (no ALPN)",
                                       # the webpage axis's check reads it (pqtimer's pages: TCP only)
                                       "pages_over_quic": "pqtimer loads a multi-origin page over TCP only "
                                                          "(HTTP/1.1, one connection per origin)"},
                        versions={"openssl": openssl_build.openssl_version(), "nginx": nginx.version(),
                                  "nginx_running_with_openssl": nginx.running_with_openssl(),
                                  "nginx_h3": nginx_h3.version()},
                        unsupported=unsupported)


STACK = Stack(name="openssl", protocol="tls", server=NginxServer, client=Pqtimer, capabilities=capabilities,
              load=Pqload)
