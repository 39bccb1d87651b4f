"""The `openssl` stack: Debian's nginx and pqtimer, both on our OpenSSL with pqprov."""

from __future__ import annotations

import functools

from pqbench.algorithms import catalog, openssl_build
from pqbench.endpoints.base import Capabilities, Stack
from pqbench.endpoints.openssl import nginx
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
    return Capabilities(stack="openssl", protocol="tls", transports=("tcp",),
                        modes=("handshake", "page", "requests", "resume", "resume_page", "early"),
                        features=("offer", "cert_compression"),
                        versions={"openssl": openssl_build.openssl_version(), "nginx": nginx.version(),
                                  "nginx_running_with_openssl": nginx.running_with_openssl()},
                        unsupported=unsupported)


STACK = Stack(name="openssl", protocol="tls", server=NginxServer, client=Pqtimer, capabilities=capabilities,
              load=Pqload)
