"""TLS names as browsers report them, spelled as the algorithm catalog spells them, so samples of every client
compare (the browser's own spelling kept beside it); and net errors as pqbench's failure classes."""

from __future__ import annotations

# The group a browser reports (Chromium's securityDetails.keyExchangeGroup, NSS's keaGroupName in Firefox)
# -> the catalog's name, where they differ.
GROUPS = {"x25519": "X25519", "P-256": "secp256r1", "P-384": "secp384r1", "P-521": "secp521r1",
          "mlkem768x25519": "X25519MLKEM768", "P256": "secp256r1", "P384": "secp384r1", "P521": "secp521r1"}
# NSS's signature scheme names (Firefox's signatureSchemeName) -> OpenSSL's.
NSS_SIGNATURE_SCHEMES = {"ECDSA-P256-SHA256": "ecdsa_secp256r1_sha256", "ECDSA-P384-SHA384": "ecdsa_secp384r1_sha384",
                         "ECDSA-P521-SHA512": "ecdsa_secp521r1_sha512", "RSA-PSS-SHA256": "rsa_pss_rsae_sha256",
                         "RSA-PSS-SHA384": "rsa_pss_rsae_sha384", "RSA-PSS-SHA512": "rsa_pss_rsae_sha512",
                         "RSA-PKCS1-SHA256": "rsa_pkcs1_sha256", "ED25519": "ed25519"}
# TLS SignatureScheme code points (RFC 8446 §4.2.3) -> OpenSSL's names.
SIGNATURE_SCHEMES = {0x0401: "rsa_pkcs1_sha256", 0x0501: "rsa_pkcs1_sha384", 0x0601: "rsa_pkcs1_sha512",
                     0x0403: "ecdsa_secp256r1_sha256", 0x0503: "ecdsa_secp384r1_sha384",
                     0x0603: "ecdsa_secp521r1_sha512", 0x0804: "rsa_pss_rsae_sha256", 0x0805: "rsa_pss_rsae_sha384",
                     0x0806: "rsa_pss_rsae_sha512", 0x0807: "ed25519", 0x0808: "ed448",
                     0x0904: "mldsa44", 0x0905: "mldsa65", 0x0906: "mldsa87"}


def negotiated(group: str | None, sigalg: int | str | None) -> dict:
    """A connection's group and signature scheme as the catalog spells them, with the browser's own spelling
    beside each where it differs (group_as_sent, sigalg_as_sent; Chromium's code points are not spellings)."""
    out = {"group": GROUPS.get(group, group) if group else None, "sigalg": _sigalg(sigalg)}
    for field, sent in (("group", group), ("sigalg", sigalg)):
        if isinstance(sent, str) and sent and out[field] != sent:
            out[f"{field}_as_sent"] = sent
    return out


def _sigalg(code: int | str | None) -> str | None:
    """A signature scheme by its code point (Chromium) or NSS's name (Firefox)."""
    if isinstance(code, str):
        return NSS_SIGNATURE_SCHEMES.get(code, code) or None
    return SIGNATURE_SCHEMES.get(code, f"0x{code:04x}") if code else None


def nss_error_class(code: str) -> str:
    """NSS's error (Firefox's errorCodeString) as a failure class."""
    if code.startswith(("SEC_ERROR_", "MOZILLA_PKIX_ERROR_")) or code == "SSL_ERROR_BAD_CERT_DOMAIN":
        return "verify_failed"
    return "tls_error" if code.startswith("SSL_ERROR_") else "browser_error"


# Necko's nsresult codes of a failed load -> failure classes.
NSRESULTS = {0x804B000D: "connect_refused", 0x804B000E: "connect_timeout", 0x804B001E: "name_not_resolved",
             0x804B0014: "closed", 0x804B0047: "closed"}


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
