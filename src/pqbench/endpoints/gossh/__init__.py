"""The `gossh` stack (protocol "ssh"): Go's golang.org/x/crypto/ssh, server (sshserver) and timing
client (sshtimer), both from native/sshgo built with Go 1.27. The only SSH stack here with ML-DSA host
keys (ssh-mldsa-44/65/87); key exchanges as x/crypto implements them (no sntrup761x25519-sha512,
no diffie-hellman-group18-sha512)."""

from __future__ import annotations

import functools

from pqbench.endpoints import sshkeys
from pqbench.endpoints.base import Capabilities, Stack
from pqbench.endpoints.gossh import build
from pqbench.endpoints.gossh.client import SshTimer
from pqbench.endpoints.gossh.load import SshLoad
from pqbench.endpoints.gossh.server import GoSshServer

__all__ = ["STACK"]


def unsupported(kex: str, sig: str, role: str = "server") -> str | None:
    """Why golang.org/x/crypto/ssh as built here cannot run kex with host key sig in this role, or None."""
    binary = "sshserver" if role == "server" else "sshtimer"
    caps = build.capabilities(binary)
    if caps is None:
        return f"{build.binary(binary)} is not built ({build.FIX})"
    where = f"golang.org/x/crypto/ssh {caps.get('x_crypto')} with {caps.get('go')}"
    if kex not in caps.get("kex", []):
        return f"key exchange {kex} is not implemented by {where}"
    alg, bits = sshkeys.split_hostkey(sig)
    if alg not in caps.get("hostkeys", []):
        return f"host key {sig} is not implemented by {where}"
    return None


@functools.lru_cache(maxsize=None)
def capabilities() -> Capabilities:
    caps = build.capabilities("sshtimer") or {}
    return Capabilities(stack="gossh", protocol=sshkeys.PROTOCOL, transports=("tcp",), modes=("handshake",),
                        versions={"go": caps.get("go"), "golang.org/x/crypto": caps.get("x_crypto")},
                        unsupported=unsupported)


STACK = Stack(name="gossh", protocol=sshkeys.PROTOCOL, server=GoSshServer, client=SshTimer, capabilities=capabilities,
              load=SshLoad)
