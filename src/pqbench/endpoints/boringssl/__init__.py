"""The `boringssl` stack: BoringSSL as vendored in the boring-sys crate, as server and client (pqboring, built from
native/tlsboring by scripts/build-rust.sh), TLS 1.3 only.

What it can do is asked of the built binary (`pqboring --capabilities`): BoringSSL's groups (x25519, secp256r1,
secp384r1, secp521r1, X25519MLKEM768, MLKEM1024), the signature schemes it verifies and signs with (ML-DSA-44/65/87,
Ed25519, ECDSA, RSA-PSS), and trust anchor IDs (draft-ietf-tls-trust-anchor-ids-06), which it implements for server
certificates: its server chooses among a port's chains by the client's trust_anchors, its client sends them and
recovers from a miss (pqbench.algorithms.trust_anchors).

Its client's phases are BoringSSL's message callback: the ClientHello written, the ServerHello and the server's
Finished read.
"""

from __future__ import annotations

import dataclasses
import functools

from pqbench.algorithms import trust_anchors
from pqbench.endpoints import tlsrs
from pqbench.endpoints.base import Capabilities, ClientJob, Stack

__all__ = ["STACK"]

BINARY = "pqboring"


def _library() -> str:
    return f"BoringSSL (boring-sys {tlsrs.versions('boring-sys', binary_name=BINARY).get('boring-sys') or ''})"


def unsupported(kex: str, sig: str, role: str = "server") -> str | None:
    """Why BoringSSL as built here cannot run kex with sig in TLS 1.3 in this role, or None."""
    return tlsrs.library_gap(BINARY, _library(), kex, sig, role)


@functools.lru_cache(maxsize=None)
def capabilities() -> Capabilities:
    caps = tlsrs.capabilities(BINARY) or {}
    return Capabilities(stack="boringssl", protocol="tls", transports=("tcp",),
                        modes=tuple(caps.get("modes") or ("handshake", "page", "requests")),
                        versions={"boringssl": _library()},
                        unsupported=unsupported,
                        # offer: the client chooses its key shares among its groups, the server takes a per-site
                        # preference order (OpenSSL's tuples as BoringSSL's equal-preference flags)
                        features=("offer", *(trust_anchors.FEATURES.values() if caps.get("trust_anchors") else ())))


class BoringServer(tlsrs.NativeServer):
    """A port whose cell negotiates trust anchors serves the fallback chain by default and the cell's chain as a
    credential matched by its root's ID."""
    binary_name = BINARY

    @staticmethod
    def _fallback(site) -> dict | None:
        return site.chain.trust_anchors.get("fallback") if site.options.get("trust_anchors") else None

    def site_files(self, site) -> tuple:
        fallback = self._fallback(site)
        return (fallback["chain"], fallback["key"]) if fallback else super().site_files(site)

    def probe_cafile(self, site) -> str:
        fallback = self._fallback(site)
        return str(fallback["root"]) if fallback else super().probe_cafile(site)

    def extra_server_args(self, serving) -> list[str]:
        anchors = [a for site in serving.sites if self._fallback(site)
                   for a in ("--anchor", f"{site.port},{site.chain.trust_anchors['id']},{site.chain.chain_file},"
                                         f"{site.chain.leaf_key}")]
        orders = [a for site in serving.sites if site.server_groups
                  for a in ("--site-groups", f"{site.port},{site.server_groups}")]
        return anchors + orders


class BoringClient(tlsrs.NativeClient):
    """pqtimer's options, offers among them; a trust anchor case's IDs and trust file (trust_anchors.client_plan)."""
    name = BINARY
    takes_offers = True

    def argv(self, job: ClientJob, count: int, worker: int, claims) -> list[str]:
        if not job.trust_anchors:
            return super().argv(job, count, worker, claims)
        plan = trust_anchors.client_plan(job.trust_anchors, job.anchors, job.cafile)
        argv = super().argv(dataclasses.replace(job, cafile=plan.cafile), count, worker, claims)
        if plan.requested is not None:
            argv += ["--trust-anchors", ",".join(plan.requested)]
            argv += ["--trusted-anchors", ",".join(plan.trusted)] if plan.trusted else []
        return argv


STACK = Stack(name="boringssl", protocol="tls", server=BoringServer, client=BoringClient, capabilities=capabilities)
