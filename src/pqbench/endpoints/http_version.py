"""The http axis (pqbench.axis): which HTTP a TCP cell's server offers by ALPN, "1.1" (the default: every
server as it always was) or "2" (nginx's `http2 on;` in the site's server block). HTTP/3 is not a value here:
it is what a QUIC cell speaks (the transport axis's quic).

A client that speaks HTTP/1.1 only (pqtimer sends no ALPN) would fetch HTTP/1.1 from an HTTP/2 site: such a
cell is skipped with the reason rather than labelled HTTP/2. Browsers choose h2 by ALPN themselves, and each
request records the protocol it used."""

from __future__ import annotations

from pqbench import axis, transport
from pqbench import protocol as proto
from pqbench.errors import BadInput

VERSIONS = ("1.1", "2")
SERVER_FEATURE = "http2"  # a server that serves HTTP/2 over TLS per site
CLIENT_FEATURE = "h2_alpn"  # a client that asks for h2 by ALPN and speaks it


def parse(field: str, value) -> str | None:
    text = str(value).strip().upper().removeprefix("HTTP/")
    if text in ("3", "H3"):
        raise BadInput(field, "HTTP/3 is what QUIC cells speak: add \"quic\" to axes.transport "
                              f"(allowed here: {', '.join(VERSIONS)})")
    text = {"H2": "2", "1": "1.1", "H1": "1.1"}.get(text, text)
    if text not in VERSIONS:
        raise BadInput(field, f"{value!r} is not an HTTP version over TCP (allowed: {', '.join(VERSIONS)})")
    return None if text == "1.1" else text


def _over_tcp(values) -> bool:
    return not transport.get(values.get("transport")).datagram  # HTTP/1.1 and 2 run over a byte stream


def http2_of(site) -> bool:
    """Whether a server's site offers HTTP/2 (its server block's `http2 on;`)."""
    return (site.options or {}).get("http") == "2"


axis.register(
    axis.Axis("http", parse, "HTTP versions over TCP (1.1, 2)", applies=_over_tcp, protocols=proto.loads_pages,
              needs_text='applies to TCP cells (QUIC cells speak HTTP/3): add "tcp" to axes.transport',
              server_feature=SERVER_FEATURE, client_feature=CLIENT_FEATURE, site=True, order=33,
              help="the HTTP version of a page over TCP: 1.1 or 2 (QUIC's is 3)",
              label=lambda v, row, short: f"HTTP/{v}"),
)
