"""A cell's key exchange as an IKEv2 proposal strongSwan takes: the catalog's name (as TLS names its groups) to the
key exchange of IKE_SA_INIT and the additional ones (RFC 9370) that follow it in IKE_INTERMEDIATE exchanges.

IKE_SA_INIT cannot be fragmented, so a hybrid's classical part goes there and its ML-KEM follows as the first
additional key exchange (`x25519-ke1_mlkem768`); an ML-KEM alone goes in IKE_SA_INIT itself (`mlkem768`, one
datagram of ~1.2 kB each way). The cipher and PRF are fixed (AES-256-GCM, HMAC-SHA-384): what a cell varies is the
key exchange.
"""

from __future__ import annotations

from pqbench.algorithms import catalog

CIPHER_PRF = "aes256gcm16-prfsha384"
# The catalog's key exchanges that IKEv2 has (IANA's Transform Type 4), by strongSwan's proposal keyword, and
# what strongSwan calls each in its algorithm list (vici get-algorithms, "ke"): what the build is asked for.
KEYWORDS = {"X25519": "x25519", "X448": "x448", "secp256r1": "ecp256", "secp384r1": "ecp384", "secp521r1": "ecp521",
            "MLKEM512": "mlkem512", "MLKEM768": "mlkem768", "MLKEM1024": "mlkem1024"}
METHODS = {"x25519": "CURVE_25519", "x448": "CURVE_448", "ecp256": "ECP_256", "ecp384": "ECP_384",
           "ecp521": "ECP_521", "mlkem512": "ML_KEM_512", "mlkem768": "ML_KEM_768", "mlkem1024": "ML_KEM_1024"}


def key_exchanges(kex: str) -> list[str] | None:
    """[IKE_SA_INIT's, then the additional ones] as strongSwan's keywords, or None when IKEv2 has none for kex."""
    alg = catalog.find(kex, "kem", field="kex")
    parts = [KEYWORDS.get(c) for c in alg.components] if alg.hybrid else [KEYWORDS.get(alg.name)]
    if None in parts:
        return None
    classical = [p for p in parts if not p.startswith("mlkem")]
    return classical + [p for p in parts if p.startswith("mlkem")]


def proposal(kex: str, additional: str | None = None) -> str:
    """The IKE proposal for kex (`aes256gcm16-prfsha384-x25519-ke1_mlkem768`), with further additional key
    exchanges after kex's own (additional: catalog names joined by "+", pqbench.udp.ike's axis); kex must have
    key_exchanges."""
    first, *more = key_exchanges(kex) + [KEYWORDS[catalog.find(a, "kem").name] for a in split(additional)]
    return "-".join([CIPHER_PRF, first, *(f"ke{i}_{k}" for i, k in enumerate(more, 1))])


def split(additional: str | None) -> list[str]:
    return [a for a in (additional or "").split("+") if a]


def negotiated(selected: str | None) -> str | None:
    """The catalog's name for the key exchanges of charon's selected proposal
    (AES_GCM_16_256/PRF_HMAC_SHA2_384/CURVE_25519/KE1_ML_KEM_768 → X25519MLKEM768), else the methods as charon
    named them ("+"-joined), or None."""
    if not selected:
        return None
    by_method = {m: k for k, m in METHODS.items()}
    methods = [p.split("_", 1)[1] if p.startswith("KE") and p[2:3].isdigit() else p for p in selected.split("/")]
    words = [by_method[m] for m in methods if m in by_method]
    if not words:
        return None
    for alg in catalog.algorithms("kem"):
        if key_exchanges(alg.name) == words:
            return alg.name
    return "+".join(words)
