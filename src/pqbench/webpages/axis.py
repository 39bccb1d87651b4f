"""The webpage axis (pqbench.axis): what page a browser cell loads. "single" (the default): the cell's page as it
is, one resource; "origins-N": a multi-origin page (pqbench.webpages.pages) whose document comes from the cell's
site and whose stylesheets, scripts and images come from N-1 more origins, each its own name, address and
certificate (pqbench.webpages.serve makes them when the run's server starts).

    [axes]
    webpage = ["single", "origins-3"]

A port of its own per value. A client without the "pages" feature (one that fetches one resource), a server without
the origins (every stack but openssl's nginx) and QUIC cells (nginx-h3 serves every origin over HTTP/3, but the
browser's record of the page does not tell its QUIC connections apart yet; pqtimer loads pages over TCP only) are
skipped cells with the reason. pqtimer loads a page as a simple browser would (pqbench.endpoints.openssl.pqtimer)."""

from __future__ import annotations

from pqbench import axis, transport
from pqbench import protocol as proto
from pqbench.webpages import pages

CLIENT_FEATURE = "pages"  # a client that loads a page's every resource (a browser, pqtimer)
SERVER_FEATURE = "origins"  # a server that serves a page's origins (pqbench.webpages.serve)


def parse(field: str, value) -> str | None:
    name = pages.parse(field, value)
    return None if name == "single" else name


def _tcp_only(value, caps, role: str, values) -> str | None:
    # nginx-h3 serves the origins over HTTP/3 and Chromium loads them, but its DevTools do not tell the page's QUIC
    # connections apart (connectionReused flips between requests of one origin; the UDP sockets of the further
    # origins are not connected, so no local port joins them to their flows): counts and joins would be wrong
    if transport.get(values.get("transport")).datagram and role == "client":
        return caps.feature_notes.get("pages_over_quic") or (
            "a multi-origin page over QUIC: the browser's own record does not tell its HTTP/3 connections apart "
            "(no per-connection count or wire join yet)")
    return None


axis.register(
    axis.Axis("webpage", parse, "pages (single, origins-N)", client_feature=CLIENT_FEATURE, protocols=proto.loads_pages,
              server_feature=SERVER_FEATURE, check=_tcp_only, client_option="--webpage", site=True, order=71,
              help="the page a page-loading client loads: single (default: the page as it is) or origins-N (its "
                   "resources from N-1 more origins, each with its own name and certificate)",
              label=lambda v, row, short: f"{v} page"),
)
