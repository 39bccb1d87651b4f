"""The `chromium` stack: Debian's Chromium as a client (BoringSSL's TLS, the browser's own connection setup),
driven headless over the DevTools protocol; a browser serves nothing, so its cells take another stack's server.

Post-quantum on/off: Chromium 156 has no switch left for its ML-KEM key share (the PostQuantumKyber and UseMLKEM
features and the PostQuantumKeyAgreementEnabled policy are gone: with them disabled it still offers
X25519MLKEM768, checked against our OpenSSL's trace of its ClientHello). Its ClientHello always carries an
X25519MLKEM768 and an X25519 share; a classical cell is switched off from the server's side (the server accepts
only the cell's group), which every sample records (`pq_switch`).

Warm loads (pqbench.endpoints.browsers.warm): resumed, and 0-RTT with the EnableTLS13EarlyData feature switched on
(Chromium 156 sends no early data without it: a resumed load's GET went after the handshake, by nginx's log)."""

from __future__ import annotations

import functools
import shutil
import subprocess

from pqbench.endpoints.base import Capabilities, Stack
from pqbench.endpoints.browsers import NoServer, hello, nssdb, offered, unsupported_for
from pqbench.endpoints.chromium import launch, policy
from pqbench.endpoints.chromium.client import Chromium

__all__ = ["STACK"]

@functools.lru_cache(maxsize=None)
def version() -> str | None:
    exe = shutil.which("chromium")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.split()[1] if len(out.split()) > 1 else None


@functools.lru_cache(maxsize=None)
def client_hello() -> hello.Hello | str:
    """What this Chromium's ClientHello offers (read once per version). Chromium 156: X25519MLKEM768, X25519, P-256
    and P-384, and ML-DSA-44/65/87 first among its signature schemes (no Ed25519, no P-521)."""
    return hello.of_browser("chromium", "Chromium", version(), launch.start_towards, launch.FIX)


def untrusted(sig: str) -> str | None:
    """Why our root for sig cannot be trusted: NSS's tools cannot hold it and the CACertificates policy cannot be
    written (pqbench.endpoints.chromium.policy)."""
    why = nssdb.refuses(sig)
    other = policy.why_not() if why else None
    return f"{why}; {other}" if other else None


unsupported = unsupported_for("chromium", "Chromium", lambda: offered(client_hello()), untrusted)


@functools.lru_cache(maxsize=None)
def capabilities() -> Capabilities:
    # over QUIC: HTTP/3 from the first request (--origin-to-force-quic-on), its connection a UDP socket
    return Capabilities(stack="chromium", protocol="tls", transports=("tcp", "quic"), modes=Chromium.MODES["tcp"],
                        transport_modes={"quic": Chromium.MODES["quic"]},
                        features=("h2_alpn", "pages"),  # HTTP/2 by ALPN (the http axis), every resource of a page (webpage)
                        versions={"chromium": version()}, unsupported=unsupported,
                        feature_notes={"offer": "Chromium's ClientHello is its own: X25519MLKEM768 and X25519 "
                                                "shares, always (post-quantum off is the server's side)"})


STACK = Stack(name="chromium", protocol="tls", server=NoServer, client=Chromium, capabilities=capabilities)
