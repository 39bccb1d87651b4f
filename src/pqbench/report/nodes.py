"""The report's nodes section, for a run measured on several machines (`run --cluster`, merged shards): each
node's segment (status, cells, when it joined and left), its emulator floor at its start and end, its crypto
speed against the fastest node's (the lower-bound model uses each cell's own node's rounds) and the CPU its
engine used while idle. A run on one machine has no such section."""

from __future__ import annotations

from pqbench.report.tables import Table
from pqbench.report.sections import Section, register


def several(a) -> bool:
    return len({n["node"] for n in a.nodes}) > 1


def _time(t) -> str:
    return t.strftime("%H:%M:%S") if t is not None else "–"


def _floor(cal) -> str:
    p50 = (cal or {}).get("p50_ms")
    return f"{p50:.3f}" if p50 is not None else "–"


def _commit(rev: str | None) -> str:
    """The commit abbreviated, keeping the mark of uncommitted changes."""
    if not rev:
        return "–"
    return rev[:12] + ("+dirty" if rev.endswith("+dirty") else "")


def table(a) -> Table | None:
    if not several(a):
        return None
    rows = []
    for n in a.nodes:
        prov = n.get("provenance") or {}
        idle = [prov.get(k) for k in ("engine_idle_cpu", "engine_idle_cpu_end") if prov.get(k) is not None]
        rows.append([n["node"], str(n.get("status")), str(n.get("cells") or 0), _time(n.get("joined")), _time(n.get("left")),
                     f"{_floor(n.get('calibration_start'))} → {_floor(n.get('calibration_end'))}",
                     f"{n['crypto_speed']:.2f}×" if n.get("crypto_speed") else "–",
                     " → ".join(f"{v:.1%}" for v in idle) or "–",
                     str((prov.get("openssl") or {}).get("version") or "–"), _commit(prov.get("git_commit"))])
    return Table("nodes", "Nodes: the machines that measured this run",
                 ["node", "status", "cells", "joined", "left", "floor p50 start → end (ms)", "crypto time vs fastest",
                  "engine idle CPU", "OpenSSL", "commit"], rows,
                 "Each row is one node's part in one start of the run. Crypto time: the median over the operations "
                 "every node timed of its fastest round against the fastest node's. A lost node's worker died "
                 "mid-run; its unfinished cell was measured again on another node. `pqbench report --by-node` "
                 "writes one report per node.")


register(Section("nodes", 60, lambda con, run_id, a: [table(a)]))
