"""The report's section on links as users live on them (cells with a cellular trace, a managed queue or
competing traffic): handshake time per algorithm on each such link, and what a standing queue adds — the
same algorithm, trace and queue discipline with and without the competing flows (bootstrap CI of the
difference of medians), beside the queueing delay those flows built on the server's direction (pqlink's
record of each packet's time in the queue)."""

from __future__ import annotations

from pqbench import stats
from pqbench.report.tables import Table, ms, with_ci
from pqbench.report.sections import Section, register

FIELDS = ("trace", "queue", "cross")
DOWN = "server_to_client"  # the direction the competing flows fill, where the server's flight queues


def users_link_cells(a) -> list:
    """A run's measured cells when any of them has a trace, a managed queue or competing flows (the others
    are their baselines: fixed rate, drop-tail, alone); else none."""
    if not any(c.row.get(f) for c in a.cells for f in FIELDS):
        return []
    return [c for c in a.cells if c.ok]


def _link(c) -> str:
    """The trace and queue of a cell: "ATT-LTE-driving-2016, codel" ("fixed rate, drop-tail" for neither)."""
    return f"{c.row.get('trace') or 'fixed rate'}, {c.row.get('queue') or 'drop-tail'}"


def sojourn_ms(c, q: str = "p50") -> float | None:
    """The queueing delay packets met on the server's direction during the cell (pqlink's record), ms."""
    counters = c.row.get("link_counters") if isinstance(c.row.get("link_counters"), dict) else {}
    sojourn = (counters.get(DOWN) or {}).get("sojourn_us") or {}
    return sojourn[q] / 1000 if sojourn.get(q) is not None else None


def table(a) -> Table | None:
    cells = users_link_cells(a)
    if not cells:
        return None
    # each trace's columns together: alone before with flows, drop-tail before a managed queue
    columns = sorted({(_link(c), c.row.get("cross") or "") for c in cells},
                     key=lambda col: (col[0].split(", ")[0], bool(col[1]), "drop-tail" not in col[0], col))
    by = {(a.label(c), _link(c), c.row.get("cross") or ""): c for c in cells}
    rows = []
    for label in a.labels():
        if any((label, *col) in by for col in columns):
            rows.append([label] + [with_ci(by[label, *col].pct[50]) if (label, *col) in by else "–" for col in columns])
    headers = ["algorithm"] + [f"{link}{f', +{cross} flow' if cross else ''}" for link, cross in columns]
    return Table("users-links", "Handshake time on users' links (p50 ms, 95 % CI): per trace, queue discipline and "
                                "competing traffic", headers, rows,
                 "A trace's rate is its recorded delivery opportunities (mahimahi format); every connection starts "
                 "at the next of a seeded series of offsets into it, the same series for every algorithm. "
                 "Competing flows run from the server's side to the client's for the whole cell.")


def queue_cost(a) -> Table | None:
    """Per algorithm, trace and queue discipline: p50 with the competing flows minus without them."""
    cells = users_link_cells(a)
    base = {(a.label(c), _link(c)): c for c in cells if not c.row.get("cross")}
    rows = []
    for c in sorted((c for c in cells if c.row.get("cross")), key=lambda c: (_link(c), a.label(c))):
        b = base.get((a.label(c), _link(c)))
        if b is None:
            continue
        diff = stats.bootstrap_diff(b.durations, c.durations, 50)
        rows.append([a.label(c), _link(c), c.row["cross"], ms(b.p50), ms(c.p50), with_ci(diff),
                     ms(sojourn_ms(b)), ms(sojourn_ms(c)), ms(sojourn_ms(c, "p95"))])
    if not rows:
        return None
    return Table("queue-cost", "What a standing queue adds: handshake p50 without and with competing flows (ms)",
                 ["algorithm", "link", "competing", "p50 alone", "p50 with flows", "added [95 % CI]",
                  "queue delay alone (p50)", "queue delay with flows (p50)", "(p95)"], rows,
                 "Queue delay: the time packets on the server's direction spent in the emulator's queue during the "
                 "cell (pqlink's record, the competing flows' packets included). A managed queue (CoDel, PIE) "
                 "holds it near its target; a drop-tail queue lets the flows fill it.")


register(Section("links", 16, lambda con, run_id, a: [table(a), queue_cost(a)]))
