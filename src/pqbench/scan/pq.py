"""Which names a server sends are post-quantum, judged from the catalog (its families), with the
algorithm names' own words as a fallback for what the catalog does not know."""

from __future__ import annotations

import functools
import re

from pqbench.algorithms import catalog

CLASSICAL_FAMILIES = {"elliptic curve", "finite field", "RSA"}
# words in a name that mark a post-quantum algorithm the catalog may not list (OIDs, other spellings)
PQ_WORDS = ("mldsa", "slhdsa", "falcon", "sphincs", "mayo", "cross", "mlkem", "sntrup", "frodo", "hqc", "bike",
            "mceliece", "dilithium", "kyber")
SSH_HYBRID_MLKEM = "mlkem768x25519-sha256"
SSH_SNTRUP = ("sntrup761x25519-sha512", "sntrup761x25519-sha512@openssh.com")


def norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


@functools.lru_cache(maxsize=None)
def _sig_families() -> dict[str, str]:
    out = {}
    for a in catalog.algorithms("sig"):
        for n in (a.name, *a.aliases, a.sigalg or "", a.keytype or ""):
            if n:
                out[norm(n)] = a.family
    return out


def sig_is_pq(name: str | None) -> bool | None:
    """A TLS signature scheme or a certificate's signature algorithm (as OpenSSL names either):
    post-quantum or not; None when there is no name. Synthetic algorithms are not post-quantum."""
    if not name:
        return None
    family = _sig_families().get(norm(name))
    if family is not None:
        return family not in CLASSICAL_FAMILIES and family != "synthetic"
    return any(w in norm(name) for w in PQ_WORDS)


def kem_is_pq(alg: catalog.Algorithm) -> bool:
    return alg.family not in CLASSICAL_FAMILIES and alg.family != "synthetic"


def is_hybrid_mlkem(name: str) -> bool:
    """A TLS group that combines ML-KEM with a classical exchange (X25519MLKEM768, SecP256r1MLKEM768…)."""
    try:
        alg = catalog.find(name, "kem")
    except Exception:
        return "mlkem" in norm(name) and any(c in norm(name) for c in ("x25519", "secp", "p256", "p384", "x448"))
    return alg.hybrid and any(norm(c).startswith("mlkem") for c in alg.components)


def ssh_kex_is_pq(name: str) -> bool:
    n = name.lower()
    return "mlkem" in n or "sntrup" in n


def ssh_hostkey_is_pq(name: str) -> bool:
    n = norm(name)
    return any(w in n for w in ("mldsa", "slhdsa", "falcon", "sphincs", "mayo"))
