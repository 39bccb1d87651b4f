"""TLS names as browsers report them, spelled as pqtimer (OpenSSL) prints them, so samples of every client
compare; and net errors as pqbench's failure classes."""

from __future__ import annotations

# The group a browser reports (Chromium's securityDetails.keyExchangeGroup) -> OpenSSL's name.
GROUPS = {"X25519": "x25519", "P-256": "secp256r1", "P-384": "secp384r1", "P-521": "secp521r1"}
# TLS SignatureScheme code points (RFC 8446 §4.2.3) -> OpenSSL's names.
SIGNATURE_SCHEMES = {0x0401: "rsa_pkcs1_sha256", 0x0501: "rsa_pkcs1_sha384", 0x0601: "rsa_pkcs1_sha512",
                     0x0403: "ecdsa_secp256r1_sha256", 0x0503: "ecdsa_secp384r1_sha384",
                     0x0603: "ecdsa_secp521r1_sha512", 0x0804: "rsa_pss_rsae_sha256", 0x0805: "rsa_pss_rsae_sha384",
                     0x0806: "rsa_pss_rsae_sha512", 0x0807: "ed25519", 0x0808: "ed448",
                     0x0904: "mldsa44", 0x0905: "mldsa65", 0x0906: "mldsa87"}


def group(name: str | None) -> str | None:
    return GROUPS.get(name, name) if name else None


def sigalg(code: int | None) -> str | None:
    return SIGNATURE_SCHEMES.get(code, f"0x{code:04x}") if code else None


def error_class(net_error: str) -> str:
    """A browser's net error (net::ERR_…) as pqtimer's failure classes name the same thing."""
    e = net_error.removeprefix("net::")
    if e in ("ERR_CONNECTION_REFUSED",):
        return "connect_refused"
    if e in ("ERR_CONNECTION_TIMED_OUT", "ERR_TIMED_OUT"):
        return "connect_timeout"
    if e.startswith("ERR_CERT_"):
        return "verify_failed"
    if e.startswith("ERR_SSL_") or e in ("ERR_BAD_SSL_CLIENT_AUTH_CERT",):
        return "tls_error"
    if e in ("ERR_CONNECTION_CLOSED", "ERR_CONNECTION_RESET", "ERR_EMPTY_RESPONSE", "ERR_CONNECTION_ABORTED"):
        return "closed"
    if e in ("ERR_NAME_NOT_RESOLVED", "ERR_NAME_RESOLUTION_FAILED"):
        return "name_not_resolved"
    return "browser_error"
