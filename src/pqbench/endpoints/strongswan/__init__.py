"""The `strongswan` stack (protocol "ike"): strongSwan 6.1's charon, built from Debian's archive on pqbench's OpenSSL
(scripts/build-ike.sh, on first use), as server (a charon per site in the server namespace) and client (a charon
per sample in the client namespace, timed from its log: ikeclient).

What it can do is asked of the built charon (probe: its key exchange methods over vici, and which signature
families' certificates it parses and loads), never listed here. strongSwan 6.1.0 on OpenSSL 3.5.7 found: x25519,
x448, ecp256/384/521, ML-KEM-512/768/1024 (its own `ml` plugin) in IKE_SA_INIT and as additional key exchanges;
RSA, ECDSA, Ed25519 and Ed448 certificates; no ML-DSA or SLH-DSA (its X.509 parsers do not know their keys).
Everything else is a skipped cell with the reason.
"""

from __future__ import annotations

import functools

from pqbench.algorithms import catalog
from pqbench.endpoints.base import Capabilities, Stack
from pqbench.endpoints.strongswan import build, probe, proposals
from pqbench.endpoints.strongswan.client import MODES, SPEAKS, StrongswanClient
from pqbench.endpoints.strongswan.server import StrongswanServer

__all__ = ["STACK"]


def unsupported(kex: str, sig: str, role: str = "server") -> str | None:
    """Why strongSwan as built here cannot run kex with sig in this role, or None."""
    caps = probe.capabilities()
    if caps is None:
        return f"{build.charon()} is not built: {build.FIX}"
    who = f"strongSwan {build.provenance().get('version', '')}".strip()
    words = proposals.key_exchanges(kex)
    if words is None:
        return f"IKEv2 has no key exchange {catalog.find(kex, 'kem').name} (it has {', '.join(proposals.KEYWORDS)} " \
               "and their ML-KEM hybrids)"
    lacking = [w for w in words if proposals.METHODS[w] not in caps["ke"]]
    if lacking:
        return f"{who} as built here has no key exchange {', '.join(lacking)}"
    family = probe.family_probe(sig)
    name = catalog.find(sig, "sig").name
    if family is None:
        return f"{who} signs with its OpenSSL plugin on OpenSSL's default provider, which has no {name}"
    why = caps["sigs"].get(family, "not asked of this build")
    return None if why is None else f"{who} cannot use a {name} certificate ({why})"


@functools.lru_cache(maxsize=None)
def capabilities() -> Capabilities:
    prov = build.provenance()
    return Capabilities(stack="strongswan", protocol="ike", transports=SPEAKS, modes=MODES,
                        transport_modes={t: MODES for t in SPEAKS},
                        versions={"strongswan": prov.get("version"), "openssl": prov.get("openssl"),
                                  "proposal": f"{proposals.CIPHER_PRF}-<key exchanges>"},
                        unsupported=unsupported, features=("fragment_size", "additional_ke", "retransmit_timeout"),
                        first_timer_ms=4000.0,  # charon's retransmit_timeout (the retransmit_timeout axis sets it)
                        feature_notes={"offer": "IKEv2 offers its proposal's key exchanges, one of each kind",
                                       "cert_compression": "IKEv2 has no certificate compression"})


STACK = Stack(name="strongswan", protocol="ike", server=StrongswanServer, client=StrongswanClient,
              capabilities=capabilities)
