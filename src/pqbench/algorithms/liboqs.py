"""Read-only view of the built liboqs through ctypes: which algorithms it has and their sizes.

Used by `doctor` and by the catalog consistency test; the measurements themselves go through
OpenSSL's EVP API (native/cryptobench), never through here.
"""

import ctypes
import dataclasses
import functools

from pqbench import paths


class _KemHead(ctypes.Structure):  # leading fields of liboqs 0.13's OQS_KEM
    _fields_ = [("method_name", ctypes.c_char_p), ("alg_version", ctypes.c_char_p),
                ("claimed_nist_level", ctypes.c_uint8), ("ind_cca", ctypes.c_bool),
                ("length_public_key", ctypes.c_size_t), ("length_secret_key", ctypes.c_size_t),
                ("length_ciphertext", ctypes.c_size_t), ("length_shared_secret", ctypes.c_size_t)]


class _SigHead(ctypes.Structure):  # leading fields of liboqs 0.13's OQS_SIG
    _fields_ = [("method_name", ctypes.c_char_p), ("alg_version", ctypes.c_char_p),
                ("claimed_nist_level", ctypes.c_uint8), ("euf_cma", ctypes.c_bool),
                ("suf_cma", ctypes.c_bool), ("sig_with_ctx_support", ctypes.c_bool),
                ("length_public_key", ctypes.c_size_t), ("length_secret_key", ctypes.c_size_t),
                ("length_signature", ctypes.c_size_t)]


@dataclasses.dataclass(frozen=True)
class OqsAlgorithm:
    name: str
    kind: str
    level: int
    pk: int
    sk: int
    ct: int | None = None
    ss: int | None = None
    sig: int | None = None


@functools.lru_cache(maxsize=None)
def _lib():
    path = paths.LIBOQS_LIB / "liboqs.so"
    if not path.exists():
        return None
    lib = ctypes.CDLL(str(path))
    for prefix, head in (("OQS_KEM", _KemHead), ("OQS_SIG", _SigHead)):
        getattr(lib, f"{prefix}_alg_identifier").restype = ctypes.c_char_p
        getattr(lib, f"{prefix}_alg_identifier").argtypes = [ctypes.c_size_t]
        getattr(lib, f"{prefix}_alg_is_enabled").argtypes = [ctypes.c_char_p]
        getattr(lib, f"{prefix}_new").restype = ctypes.POINTER(head)
        getattr(lib, f"{prefix}_new").argtypes = [ctypes.c_char_p]
        getattr(lib, f"{prefix}_free").argtypes = [ctypes.POINTER(head)]
    lib.OQS_version.restype = ctypes.c_char_p
    return lib


def available() -> bool:
    return _lib() is not None


def lacks(names) -> list[str]:
    """The liboqs algorithms among names that the built liboqs does not have: `make` builds the demo's only, the
    catalog's are built on first use (pqbench.endpoints.ondemand). Read from the list the build writes beside the
    library (a tree from before that list had the catalog's)."""
    try:
        have = set((paths.LIBOQS_PREFIX / "algorithms.txt").read_text().split())
    except OSError:
        return []
    return [n for n in dict.fromkeys(names) if n not in have]


def version() -> str | None:
    lib = _lib()
    return lib.OQS_version().decode() if lib else None


def _names(prefix: str) -> list[str]:
    lib = _lib()
    if lib is None:
        return []
    count = getattr(lib, f"{prefix}_alg_count")()
    ident = getattr(lib, f"{prefix}_alg_identifier")
    enabled = getattr(lib, f"{prefix}_alg_is_enabled")
    return [ident(i).decode() for i in range(count) if enabled(ident(i))]


def kem_names() -> list[str]:
    return _names("OQS_KEM")


def sig_names() -> list[str]:
    return _names("OQS_SIG")


@functools.lru_cache(maxsize=None)
def describe(name: str) -> OqsAlgorithm | None:
    """Sizes of an enabled liboqs algorithm, from the library itself."""
    lib = _lib()
    if lib is None:
        return None
    for prefix, kind in (("OQS_KEM", "kem"), ("OQS_SIG", "sig")):
        if not getattr(lib, f"{prefix}_alg_is_enabled")(name.encode()):
            continue
        obj = getattr(lib, f"{prefix}_new")(name.encode())
        if not obj:
            continue
        h = obj.contents
        try:
            if kind == "kem":
                return OqsAlgorithm(name, kind, h.claimed_nist_level, h.length_public_key,
                                    h.length_secret_key, ct=h.length_ciphertext, ss=h.length_shared_secret)
            return OqsAlgorithm(name, kind, h.claimed_nist_level, h.length_public_key,
                                h.length_secret_key, sig=h.length_signature)
        finally:
            getattr(lib, f"{prefix}_free")(obj)
    return None
