"""The report's page loads by client: pqtimer's page mode (a page loaded as a simple browser would, over HTTP/1.1)
beside the browsers on the same multi-origin page, link and key exchange (issue 38, item 3). Every client's sample
carries the load's record (pqbench.store.browser_samples): the last resource's last byte from the start of the
load's first connection, its connections and the TLS handshakes on its critical path. The browsers' own section
(pqbench.report.browsers) has their load events; this table compares what every client has, the last byte."""

from __future__ import annotations

import math

from pqbench import stats
from pqbench.report.tables import Table, ms, with_ci
from pqbench.store import browser_samples
from pqbench.report.sections import Section, register

PQTIMER = "openssl"  # the client stack whose timing client (pqtimer) loads pages too


def _ci(values: list[float]) -> tuple[float, float, float]:
    if not values:
        return (math.nan, math.nan, math.nan)
    lo, hi = stats.bootstrap_ci(values, 50)
    return (stats.percentile(sorted(values), 50), lo, hi)


def table(con, run_id: str, a) -> Table | None:
    by_cell: dict[str, list[dict]] = {}
    for s in browser_samples.page_loads(con, run_id):
        if s["ok"] and s["last_byte_ms"] is not None:
            by_cell.setdefault(s["cell_id"], []).append(s)
    cells = [c for c in a.cells if c.row.get("cell_id") in by_cell and c.row.get("webpage")]
    if not any(c.row.get("client") == PQTIMER for c in cells):
        return None  # no timing client loaded a page: the browsers' own section says it all
    key = lambda c: (c.row.get("webpage"), c.row.get("rtt_ms") or 0, c.row.get("loss") or 0,  # noqa: E731
                     c.row.get("sized_as") or "", c.row.get("http") or "1.1", c.row.get("kex"), c.row.get("client"))
    rows = []
    for c in sorted(cells, key=key):
        r, got = c.row, by_cell[c.row["cell_id"]]
        med = lambda f: stats.percentile(sorted(s[f] for s in got if s[f] is not None), 50) \
            if any(s[f] is not None for s in got) else math.nan  # noqa: E731
        client = "pqtimer (OpenSSL)" if r.get("client") == PQTIMER else r.get("client")
        chain = f"{r.get('sig')}" + (f" sized as {r['sized_as']}" if r.get("sized_as") else "")
        rows.append([r.get("webpage"), f"{r.get('rtt_ms') or 0:g}", f"{100 * (r.get('loss') or 0):g} %", chain,
                     f"HTTP/{r.get('http') or '1.1'}", r.get("kex"), client,
                     with_ci(_ci([s["last_byte_ms"] for s in got])), ms(med("load_event_ms")),
                     f"{med('connections'):g}", f"{med('critical_handshakes'):g}", str(len(got))])
    return Table("page-clients", "Page loads by client: pqtimer beside the browsers (ms)",
                 ["page", "RTT ms", "loss", "chain", "HTTP", "key exchange", "client", "last resource p50 [95 % CI]",
                  "load event p50", "connections", "TLS handshakes on the critical path", "n"], rows,
                 "Last resource: the last byte of the load's last response, from the start of its first connection "
                 "(each client's own clock). pqtimer loads a page as a simple browser would: the document on one "
                 "connection, then, once its first bytes are readable, one connection per further origin at once, "
                 "each origin's requests pipelined (HTTP/1.1 over TCP); it has no load event. Browsers speak the "
                 "cell's HTTP (an HTTP/1.1 cell: several connections per origin). Medians over the cell's successful "
                 "loads; CI: percentile bootstrap of the median.")


register(Section("page clients", 24, lambda con, run_id, a: [table(con, run_id, a)]))
