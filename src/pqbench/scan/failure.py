"""A scan's failures in a few classes a user can act on: the server refused the connection, did not
answer in time, could not be reached, answered with a TLS alert or error, closed it, or its
certificate did not verify."""

from __future__ import annotations

CLASSES = ("refused", "timeout", "unreachable", "alert", "tls_error", "closed", "cert_verify", "protocol")

# pqtimer's error classes -> ours
_PQTIMER = {"connect_refused": "refused", "connect_timeout": "timeout", "timeout": "timeout",
            "connect_error": "unreachable", "socket": "unreachable", "closed": "closed",
            "cert_verify": "cert_verify"}


def from_pqtimer(error_class: str | None, error: str | None) -> str | None:
    if error_class is None:
        return None
    if error_class == "tls_error":
        return "alert" if "alert" in (error or "") else "tls_error"
    return _PQTIMER.get(error_class, "tls_error")


def from_oserror(e: BaseException) -> str:
    """A socket's error (connect, read) as a class."""
    if isinstance(e, TimeoutError):
        return "timeout"
    if isinstance(e, ConnectionRefusedError):
        return "refused"
    if isinstance(e, (ConnectionResetError, BrokenPipeError)):
        return "closed"
    return "unreachable"


def from_connect_errors(errors: list[str]) -> str:
    """pqbench.testbed.realpath.connect_rtt's error texts as one class."""
    text = " ".join(errors).lower()
    if "refused" in text:
        return "refused"
    if "timeout" in text or "timed out" in text:
        return "timeout"
    return "unreachable"


def failure(cls: str, error: str) -> dict:
    return {"class": cls, "error": error}
