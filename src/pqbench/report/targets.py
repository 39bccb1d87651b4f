"""The report's targets section: cells measured against servers pqbench did not start, over a path
that was measured (TCP connect before and after each cell) instead of emulated. Handshake time against
that measured RTT, per algorithm, as the published studies plotted their Internet measurements."""

from __future__ import annotations

from pqbench.report.tables import Table, ms, with_ci
from pqbench.report.sections import Section, register


def _path(c) -> dict:
    return c.row.get("path") or {}


def path_rtt(c) -> float | None:
    """The cell's path RTT: the mean of the p50s measured before and after it."""
    v = [m["p50_ms"] for m in _path(c).values() if m and m.get("p50_ms") is not None]
    return sum(v) / len(v) if v else None


def target_cells(a) -> list:
    return [c for c in a.cells if c.row.get("target") and c.ok]


def table(a) -> Table | None:
    cells = target_cells(a)
    if not cells:
        return None
    addresses = {t["name"]: t["address"] for t in a.run.get("provenance", {}).get("targets", [])} \
        if isinstance(a.run.get("provenance"), dict) else {}
    rows = []
    for c in sorted(cells, key=lambda c: (c.target, path_rtt(c) or 0, a.label(c))):
        p = _path(c)
        before, after = p.get("before") or {}, p.get("after") or {}
        rows.append([c.target, addresses.get(c.target, ""), a.label(c), ms(before.get("p50_ms")),
                     ms(after.get("p50_ms")), ms(max(before.get("spread_ms") or 0, after.get("spread_ms") or 0)),
                     with_ci(c.pct[50]), with_ci(c.pct[95]), f"{c.ok}/{c.n}"])
    return Table("targets", "Targets: handshake time over the measured path",
                 ["target", "address", "algorithm", "path RTT before", "after", "spread (p95-p5)", "p50 [95 % CI]",
                  "p95 [95 % CI]", "ok/n"], rows,
                 note="Servers pqbench did not start, reached over the host's network. The path is not emulated: "
                      "before and after each cell, 10 TCP connects measure its round trip (p50, and the spread "
                      "p95 - p5). A handshake takes at least 2 round trips (TCP, then TLS 1.3). Paired differences "
                      "against each target's classical baseline are in the paired table (condition = target).")


register(Section("targets", 12, lambda con, run_id, a: [table(a)]))
