"""The report's server-capacity section (load cells, `pqbench load`): handshakes per second at saturation
and CPU per handshake per server stack × algorithm, and latency against offered load."""

from __future__ import annotations

from pqbench.experiment.condition import condition
from pqbench.report.tables import Table, ms
from pqbench.report.sections import Section, register


def label(row: dict) -> str:
    return f"{row['kex']} + {row['sig']}"


def capacity(row: dict) -> str:
    v = row.get("load") or {}
    if v.get("saturated_by") == "server":
        return f"{v['capacity_hs']:,.0f}"
    if v.get("saturated_by") == "client":
        return f"≥ {v['at_least_hs']:,.0f} (client-bound)"
    return f"≥ {v.get('at_least_hs') or 0:,.0f} (not saturated)"


def table(a) -> Table | None:
    if not a.load:
        return None
    rows = []
    for r in sorted(a.load, key=lambda r: (r["server"], -((r.get("load") or {}).get("at_least_hs") or 0))):
        v, steps = r.get("load") or {}, r["steps"]
        first, last = (steps[0] if steps else {}), (steps[-1] if steps else {})
        rows.append([r["server"], label(r), condition(r, short=True), capacity(r), v.get("saturated_by") or "–",
                     ms(v.get("server_cpu_ms_per_hs")), ms(v.get("client_cpu_ms_per_hs")),
                     ms((first.get("latency_ms") or {}).get("p50")), ms((last.get("latency_ms") or {}).get("p50")),
                     ms((last.get("latency_ms") or {}).get("p99")), str(len(steps))])
    return Table("load", "Server capacity: handshakes per second at saturation, CPU per handshake",
                 ["server", "algorithm", "link", "capacity (handshakes/s)", "saturated by", "server CPU ms/hs",
                  "client CPU ms/hs", "p50 ms, first rate", "p50 ms, last rate", "p99 ms, last rate", "steps"], rows,
                 note="Open-loop Poisson arrivals from one native load generator (pqload for TLS, sshload for SSH to "
                      "NEWKEYS), the offered rate raised step by step until the server saturates (served under 90 % "
                      "of offered, over 2 % failed, or p50 over 5 × the first step's). Server and generator are pinned "
                      "to different CPUs; CPU times are the kernel's accounting of the server's process tree and the "
                      "generator's own, per completed handshake at the last step. A cell whose generator saturated "
                      "first (its CPU, or arrivals started late) gives only a lower bound, never the server's capacity.")


register(Section("load", 10, lambda con, run_id, a: [table(a)]))
