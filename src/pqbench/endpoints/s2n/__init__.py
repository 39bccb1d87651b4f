"""The `s2n` stack: s2n-tls 0.3 (on aws-lc) as server and client (pqs2n, built from native/tlsrs by
scripts/build-rust.sh), TLS 1.3.

s2n takes groups and signature schemes from a named security policy, never from a list, and its
client always sends a key share for its policy's first hybrid group and another for its first curve.
The client therefore runs a cell only with a policy whose ClientHello carries the cell's group alone;
`pqs2n --capabilities` builds the ClientHello of each candidate policy and reports, per group, the
policy the client will use and the schemes it accepts. Found with s2n-tls 0.3.47: x25519
(AWS-CRT-SDK-TLSv1.3), secp256r1, secp384r1, X25519MLKEM768 (test_pq_only, ECDSA/RSA only) and
MLKEM1024 (cnsa_2, ML-DSA-87 only); no policy sends SecP256r1MLKEM768 or SecP384r1MLKEM1024 alone,
and the policies with ML-DSA-44/65 (default_pq) also send a secp256r1 share — those cells are
skipped with that reason. The server uses default_pq (or test_all when MLKEM1024 is accepted) and
refuses, in the handshake, a client that offers none of the run's groups.

Client phases come from s2n's timing checkpoints (same clock as start_mono_ns).
"""

from __future__ import annotations

import functools

from pqbench.endpoints import tlsrs
from pqbench.endpoints.base import Capabilities, Stack

__all__ = ["STACK"]

BINARY = "pqs2n"


def _lib() -> str:
    return f"s2n-tls {tlsrs.versions('s2n-tls').get('s2n-tls') or ''}".strip()


def server_policy(caps: dict, groups: list[str]) -> dict | None:
    """The policy the server uses for these accepted groups (as the binary chooses it), or None."""
    for pol in caps["server"]["policies"]:
        if all(g in pol["supported_groups"] for g in groups):
            return pol
    return None


def unsupported(kex: str, sig: str, role: str = "server") -> str | None:
    """Why s2n-tls as built here cannot run kex with sig in TLS 1.3 in this role, or None."""
    caps = tlsrs.capabilities(BINARY)
    if caps is None:
        return f"{tlsrs.binary(BINARY)} is not built: {tlsrs.FIX}"
    group = tlsrs.group_for(caps, kex)
    if group is None:
        return f"{_lib()} has no TLS group {kex} in any security policy (it has {', '.join(caps['groups'])})"
    why = tlsrs.chain_problem(sig)
    if why:
        return why
    name = tlsrs.sigalg_for(caps, sig)
    if name is None or name not in caps.get("sigalg_codepoints", {}):
        return f"{_lib()} has no TLS signature scheme for {sig} in any security policy"
    if role == "client":
        pol = caps["client"]["by_group"].get(group)
        if pol is None:
            return (f"no {_lib()} security policy sends a key share for {group} alone (its client always "
                    f"sends the policy's first hybrid group and first curve), so its client cannot offer "
                    f"only the cell's group")
        if name not in pol["sigalgs"]:
            return (f"{_lib()} policy {pol['policy']}, the one whose ClientHello offers {group} alone, does "
                    f"not accept {sig}{'' if name == sig else f' ({name})'} (it accepts {', '.join(pol['sigalgs'])})")
        return None
    pol = server_policy(caps, [group])
    if pol is None:
        return f"no {_lib()} server policy accepts {group}"
    if name not in pol["sigalgs"]:
        return f"{_lib()} policy {pol['policy']} cannot sign with {sig}{'' if name == sig else f' ({name})'}"
    return None


@functools.lru_cache(maxsize=None)
def capabilities() -> Capabilities:
    caps = tlsrs.capabilities(BINARY) or {}
    return Capabilities(stack="s2n", protocol="tls", transports=("tcp",),
                        modes=tuple(caps.get("modes") or ("handshake", "page", "requests")),
                        versions=tlsrs.versions("s2n-tls", "s2n-tls-sys", "aws-lc-rs", "aws-lc-sys"),
                        unsupported=unsupported,
                        feature_notes={"offer": "s2n's client always sends its security policy's key shares (its first "
                                                "hybrid group and its first curve): its offer is what it is",
                                       "cert_compression": "s2n-tls has no certificate compression"})


class S2nServer(tlsrs.NativeServer):
    binary_name = BINARY

    def probe_args(self) -> list[str]:
        # test_all lists every group and scheme: whatever the run accepts, the probe can handshake
        # (with a HelloRetryRequest if need be), including groups s2n's client cannot offer alone.
        return ["--groups", tlsrs.group_names(self.caps(), self.serving.groups)[0], "--policy", "test_all"]


class S2nClient(tlsrs.NativeClient):
    name = BINARY


STACK = Stack(name="s2n", protocol="tls", server=S2nServer, client=S2nClient, capabilities=capabilities)
