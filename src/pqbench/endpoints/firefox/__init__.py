"""The `firefox` stack: Debian's Firefox ESR as a client (NSS's TLS, the browser's own connection setup), driven
headless over Marionette; a browser serves nothing, so its cells take another stack's server.

Post-quantum on/off is Firefox's own switch: the prefs security.tls.enable_kyber and
network.http.http3.enable_kyber, set from the cell's group (a classical group: off, and the ClientHello carries no
ML-KEM share). Every sample records it (`pq_switch`: "browser").

Over QUIC, HTTP/3 from the first request: the alternative-service mapping Firefox's own tests use
(network.http.http3.alt-svc-mapping-for-testing, forced), so the timed load is a cold QUIC handshake with no TCP
connection before it; its connection is a UDP socket whose local port Firefox's channel names (the wire join's)."""

from __future__ import annotations

import functools
import shutil
import subprocess

from pqbench.endpoints.base import Capabilities, Stack
from pqbench.endpoints.browsers import NoServer, hello, offered, unsupported_for
from pqbench.endpoints.firefox import launch
from pqbench.endpoints.firefox.client import Firefox

__all__ = ["STACK"]

@functools.lru_cache(maxsize=None)
def version() -> str | None:
    exe = shutil.which("firefox-esr")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out[-1] if out else None


@functools.lru_cache(maxsize=None)
def client_hello() -> hello.Hello | str:
    """What this Firefox's ClientHello offers, post-quantum on (read once per version). Firefox ESR 153:
    X25519MLKEM768, X25519, P-256/384/521 and FFDHE; ECDSA, RSA-PSS and PKCS#1 signature schemes, no Ed25519 and
    no post-quantum one."""
    return hello.of_browser("firefox", "Firefox", version(), launch.start_towards, launch.FIX)


unsupported = unsupported_for("firefox", "Firefox", lambda: offered(client_hello()))


@functools.lru_cache(maxsize=None)
def capabilities() -> Capabilities:
    return Capabilities(stack="firefox", protocol="tls", transports=("tcp", "quic"), modes=Firefox.MODES["tcp"],
                        transport_modes={"quic": Firefox.MODES["quic"]},
                        features=("h2_alpn", "pages"),  # HTTP/2 by ALPN (the http axis), every resource of a page (webpage)
                        versions={"firefox": version()}, unsupported=unsupported,
                        feature_notes={"offer": "Firefox's ClientHello is its own; post-quantum on or off by its "
                                                "prefs, from the cell's group"})


STACK = Stack(name="firefox", protocol="tls", server=NoServer, client=Firefox, capabilities=capabilities)
