"""Warnings about the quality of a run's numbers, each with the fix it suggests (hyperfine/pyperf style).

Each check looks at one cell; the report groups the hits of one check into one line.
"""

from __future__ import annotations

import dataclasses
import statistics

import numpy as np

from pqbench.algorithms import catalog
from pqbench.measure import late, wire
from pqbench.analysis.cells import CellStats
from pqbench.errors import BadInput

TAIL_RATIO = 2.0  # p99/p50 above this on a loss-free link means something other than the link
CI_WIDTH = 0.10  # p95's CI wider than this fraction of p95
MODES_SHARE = 0.01  # with this share of retransmitted handshakes or more, a wide p95 CI is their doing
SPLIT_MEDIAN = 0.5  # p50's CI wider than this fraction of p50: the samples split into modes around it
FEW_SAMPLES = 20
OUTLIER_IQR = 3.0
OUTLIER_SHARE = 0.01
BELOW_BOUND = 0.02  # measured median this far under the lower bound (and 0.1 ms) is suspicious
ABOVE_BOUND = 2.0  # measured median over twice the bound at 0 % loss (and 5 ms more)
NODE_SPEED_RATIO = 1.25  # one node's crypto this much slower than another's (the 25 %)
CPU_SPEED_RATIO = 1.25  # one microbenchmark round's median this much slower than another's
CPU_SPEED_MIN_MS = 0.2  # shorter operations are left out: timer and cache noise, not the CPU's speed


@dataclasses.dataclass
class Warning:
    check: str
    message: str  # what was seen, with the numbers
    fix: str = ""  # what to do about it
    note: bool = False  # information that moves no reported number beyond its CI: shown, not warned

    def text(self) -> str:
        return f"{self.message}; {self.fix}" if self.fix else self.message


# One line per check when several cells hit it (the report lists the cells below it).
TITLES = {
    "no_success": "no sample succeeded",
    "few_samples": f"fewer than {FEW_SAMPLES} successful samples",
    "tail": f"p99/p50 above {TAIL_RATIO:g} at 0 % loss",
    "wide_ci": f"CI of p95 wider than {100 * CI_WIDTH:g} % of p95",
    "modes": f"CI of p95 wider than {100 * CI_WIDTH:g} % of p95, between the modes of clean and recovered handshakes",
    "split_median": f"CI of the median wider than {100 * SPLIT_MEDIAN:g} % of it",
    "outliers": f"samples beyond Q3 + {OUTLIER_IQR:g}×IQR at 0 % loss",
    "outliers_note": f"samples beyond Q3 + {OUTLIER_IQR:g}×IQR at 0 % loss, moving no reported percentile beyond its CI",
    "failures": "failures at 0 % loss",
    "below_bound": "median below the lower-bound model",
    "above_bound": f"median above {ABOVE_BOUND:g}× the lower bound at 0 % loss",
    "group": "another group negotiated than the cell's key exchange",
    "late": f"over {100 * late.LATE_SHARE:g} % of the samples without a retransmission came late",
    "late_note": f"over {100 * late.LATE_SHARE:g} % of the samples without a retransmission came late, moving no "
                 "reported percentile beyond its CI",
    "wire": f"client and wire times disagree in over {100 * wire.DISAGREE_SHARE:g} % of the samples",
    "wire_clock": "the client's clock stood further from the wire's than the machine allows",
}


def _lossless(c: CellStats) -> bool:
    return not c.row.get("loss")


def _same_group(a: str, b: str) -> bool:
    try:
        return catalog.find(a, "kem").name == catalog.find(b, "kem").name
    except BadInput:
        return a.lower() == b.lower()


def cell_warnings(c: CellStats) -> list[Warning]:
    out = []
    if c.ok == 0:
        return [Warning("no_success", f"none of {c.n} samples succeeded ({_classes(c)})",
                        "the cell has no timing; see the failure classes and the server log")]
    p50, p95, p99 = c.pct[50][0], c.pct[95], c.pct[99][0]
    if c.ok < FEW_SAMPLES:
        out.append(Warning("few_samples", f"only {c.ok} successful samples",
                           "p95/p99 rest on the top one or two samples; raise samples.min to 100 or more"))
    if _lossless(c) and c.ok >= FEW_SAMPLES and p50 > 0 and p99 / p50 > TAIL_RATIO:
        out.append(Warning("tail", f"p99/p50 = {p99 / p50:.1f} at 0 % loss",
                           "the machine was busy; rerun with fewer --parallel (spec: parallel) on an idle machine"))
    if p95[0] > 0 and (p95[2] - p95[1]) / p95[0] > CI_WIDTH:
        width = f"CI of p95 spans {100 * (p95[2] - p95[1]) / p95[0]:.0f} % of p95 (n = {c.ok})"
        recovered = 1 - c.modes["clean"][0] if c.modes else 0.0
        if recovered >= MODES_SHARE:
            out.append(Warning("modes", f"{width}: it sits between modes ({100 * c.modes['clean'][0]:.1f} % clean, "
                                        f"{100 * c.modes['fast'][0]:.1f} % recovered fast, "
                                        f"{100 * c.modes['timeout'][0]:.1f} % after a timeout)",
                               "more samples do not narrow a percentile between modes: read these cells through "
                               "their mode shares (figure: handshakes by mode) and p50", note=True))
        else:
            out.append(Warning("wide_ci", width, _more_samples(c)))
    p50_lo, p50_hi = c.pct[50][1:]
    if c.ok >= FEW_SAMPLES and p50 > 0 and (p50_hi - p50_lo) / p50 > SPLIT_MEDIAN:
        out.append(Warning("split_median", f"the median {p50:.1f} ms has a 95 % CI of {p50_lo:.1f}–{p50_hi:.1f} ms: "
                                           "the samples split into modes around the middle (with loss: handshakes "
                                           "with and without a retransmission timeout)",
                           "read this cell through p25/p75 or its CDF: its median, and its neighbours' at other "
                           "loss rates, can land on either mode"))
    if _lossless(c) and c.durations.size >= FEW_SAMPLES:
        q1, q3 = np.percentile(c.durations, [25, 75])
        far = int((c.durations > q3 + OUTLIER_IQR * (q3 - q1)).sum())
        if far >= 2 and far / c.durations.size > OUTLIER_SHARE and q3 > q1:
            out.extend(_outliers(c, f"{far} samples ({100 * far / c.durations.size:.0f} %) beyond "
                                    f"Q3 + {OUTLIER_IQR:g}×IQR at 0 % loss"))
    if _lossless(c) and c.failures:
        out.append(Warning("failures", f"{c.failures} of {c.n} samples failed at 0 % loss ({_classes(c)})",
                           "a loss-free link should not fail: check the timeout and the nginx error log"))
    if c.bound is not None:
        b = c.bound.total_ms
        if p50 < b * (1 - BELOW_BOUND) - 0.1:
            out.append(Warning("below_bound", f"median {p50:.2f} ms is below the lower bound {b:.2f} ms",
                               "the link was faster than configured (check the calibration), the model's "
                               "flight sizes are off, or the CPU ran faster during the cell than in every "
                               "crypto microbenchmark round (the crypto table shows their spread)"))
        elif _lossless(c) and p50 > ABOVE_BOUND * b and p50 - b > 5:
            out.append(Warning("above_bound", f"median {p50:.1f} ms is {p50 / b:.1f}× the lower bound at 0 % loss",
                               "time the model does not know about (CPU contention, queueing); rerun with "
                               "fewer --parallel"))
    out += _quality(c)
    kex = c.row.get("kex")
    wrong = [g for g in c.groups if kex and not _same_group(g, kex)]
    if wrong:
        out.append(Warning("group", f"negotiated {', '.join(wrong)} instead of {kex}",
                           "client and server fell back to another group: the cell does not measure "
                           f"{kex}; check the groups nginx offers"))
    return out


def _more_samples(c: CellStats) -> str:
    """How to get more samples for this cell: a fixed count (samples = N) is raised as such, an
    adaptive one (the [samples] table) by its max or ci."""
    if c.row.get("stop_reason") == "fixed count":
        return "raise samples (a fixed count per cell)"
    return "raise samples.max (or lower samples.ci)"


def _quality(c: CellStats) -> list[Warning]:
    """The late-sample detector's and the wire comparison's verdicts, stored with the cell."""
    out = []
    d = c.row.get("detector") if isinstance(c.row.get("detector"), dict) else {}
    if d.get("late") is not None and d["untouched"] and d["late"] / d["untouched"] > late.LATE_SHARE:
        out.append(_late(c, d))
    w = c.row.get("wire") if isinstance(c.row.get("wire"), dict) else {}
    if c.wire_clock:
        out.append(Warning("wire_clock", c.wire_clock,
                           "the client spent time the wire does not show (a process's start, a CPU wait, a late "
                           "wake-up on this machine): its figures and comparisons are the wire's where every sample "
                           "has a wire time (else compare it by wire_ms in the export); or rerun on an idle or "
                           "faster machine"))
    elif w.get("n") and w["disagree"] / w["n"] > wire.DISAGREE_SHARE:
        out.append(Warning("wire", f"the client's time differs from the wire's by more than {w['tolerance_ms']} ms "
                                   f"in {w['disagree']} of {w['n']} samples (median {w['median_diff_ms']:+.3f} ms)",
                           "the client spent time the wire does not show (waiting for a CPU before its "
                           "connect or after the server's last packet): read the wire times, or rerun on an "
                           "idle machine"))
    return out


# What to do about late samples, by the side that held them up.
LATE_FIXES = {
    "server": "the server answered late (a stall some handshakes pay, not its computation, which every "
              "handshake pays and the clean time holds): run on an idle machine, with fewer server workers "
              "(spec: workers) or lanes",
    "client": "the client waited for a CPU: run with fewer lanes or workers (spec: lanes, parallel, a lower "
              "max_bias) or on an idle machine",
    "link": "the emulator released packets late: run on an idle machine (pqlink's threads need a CPU at "
            "each deadline; `pqbench doctor` shows its real-time priority)",
    "unexplained": "no instrument recorded where they waited (a client without a CPU-wait record, or no wire "
                   "record): rerun on an idle machine and compare this cell through p25 or its CDF",
}


def _sides(d: dict) -> tuple[str, str]:
    """The detector's split of the late samples by the side that held them up, as text, and the fix that
    fits the side holding up the most."""
    by_side = d.get("by_side") or {}
    excess = d.get("excess_ms") or {}
    sides = sorted((k for k in by_side if by_side[k]), key=lambda k: -by_side[k])
    split = "; ".join(f"{by_side[k]} {'not attributed' if k == 'unexplained' else 'the ' + k + chr(39) + 's'}"
                      + (f" (+{excess[k]:.2f} ms median)" if k in excess else "") for k in sides)
    if not by_side and d.get("late_client_cpu") is not None:  # stores from before sides were told apart
        split = f"{d['late_client_cpu']} of them the client's own wait for a CPU"
    return split, LATE_FIXES[sides[0]] if sides else LATE_FIXES["unexplained"]


def _late(c: CellStats, d: dict) -> Warning:
    """Late samples, split by the side that held them up; a warning only when dropping them would move
    the reported p50 or p95 beyond its confidence interval, else a note."""
    split, fix = _sides(d)
    answer = f"; the server's typical answer at the wire {d['server_answer_ms']:.2f} ms" \
        if d.get("server_answer_ms") is not None else ""
    message = (f"{d['late']} of {d['untouched']} samples without a retransmission "
               f"({100 * d['late'] / d['untouched']:.1f} %) took over {d['threshold_ms']:.2f} ms against a clean "
               f"{d['clean_ms']:.2f} ms" + (f": {split}" if split else "") + answer
               + ("" if d.get("wire") else " (no wire record: server retransmissions count too)"))
    return _verdict("late", c, d, message, fix)


def _verdict(check: str, c: CellStats, d: dict, message: str, fix: str) -> Warning:
    """A warning when dropping the late samples would move p50 or p95 beyond its CI, else a note."""
    moved = _moves_a_percentile(c, d)
    if moved is False:
        return Warning(f"{check}_note", message + "; without them p50 and p95 stay within their CIs", note=True)
    return Warning(check, message + (f"; {moved}" if moved else ""), fix)


def _outliers(c: CellStats, seen: str) -> list[Warning]:
    """Far samples at 0 % loss. Where the late-sample detector ran they are among its late samples:
    nothing more to say when it already reports them, else its split by side and its verdict on the
    percentiles (a note when none moves beyond its CI). Older stores: the bare count."""
    d = c.row.get("detector") if isinstance(c.row.get("detector"), dict) else {}
    if d.get("late") is None:
        return [Warning("outliers", seen, "other processes interfered; rerun with fewer --parallel or on an "
                                          "idle machine")]
    if d["untouched"] and d["late"] / d["untouched"] > late.LATE_SHARE:
        return []  # the late check reports them, with their sides
    split, fix = _sides(d)
    message = (f"{seen}; of the {d['late']} late ones (over {d['threshold_ms']:.2f} ms), {split}" if d["late"]
               else f"{seen}; none over the late threshold {d['threshold_ms']:.2f} ms")
    return [_verdict("outliers", c, d, message, fix)]


def _moves_a_percentile(c: CellStats, d: dict) -> str | bool | None:
    """What dropping the late samples does to p50 and p95 against their CIs: a sentence when one moves
    beyond its CI, False when neither does, None when the detector did not record it (older stores)."""
    moved = []
    for q in (50, 95):
        without = d.get(f"p{q}_without_late_ms")
        if without is None:
            return None
        est, lo, hi = c.pct[q]
        if not lo - 1e-9 <= without <= hi + 1e-9:
            moved.append(f"without them p{q} would be {without:.2f} ms, outside its CI [{lo:.2f}, {hi:.2f}]")
    return "; ".join(moved) if moved else False


def _classes(c: CellStats) -> str:
    return ", ".join(f"{k} ×{v}" for k, v in sorted(c.failure_classes.items())) or "no class recorded"


def cpu_speed_warnings(spread: dict) -> list[Warning]:
    """The same operation timed seconds apart differs beyond noise: the machine's CPU speed drifts
    (frequency scaling, a hypervisor's neighbours), so compute-heavy cells vary with it."""
    spreads = [(s.slowest / s.fastest, name, op, s) for name, ops in spread.items() for op, s in ops.items()
               if s.rounds > 1 and s.fastest >= CPU_SPEED_MIN_MS]
    ratio, name, op, s = max(spreads, key=lambda t: t[0], default=(0, None, None, None))
    if ratio <= CPU_SPEED_RATIO:
        return []
    return [Warning("cpu_speed", f"the CPU's speed changed during the run: {name} {op} took {s.fastest:.2f} ms "
                                 f"in the fastest and {s.slowest:.2f} ms in the slowest of {s.rounds} microbenchmark "
                                 f"rounds ({ratio:.2f}×); compute-heavy cells vary with it, "
                                 "between and within cells, and the lower-bound model uses the fastest round",
                    "measure on a machine with a fixed CPU clock (dedicated cores, no turbo or power saving) "
                    "to narrow the spread")]


def node_speeds(crypto_nodes: dict) -> dict[str, float]:
    """node -> its crypto time relative to the fastest node: the median, over the operations every node
    timed, of the node's fastest round over the fastest node's (1.0: the fastest node; 1.3: 30 % slower).
    The median over many operations (short ones included) is robust to one noisy timing. Empty with fewer
    than two nodes."""
    if len(crypto_nodes) < 2:
        return {}
    shared = set.intersection(*({(name, op) for name, ops in spread.items() for op, s in ops.items()
                                 if s.fastest > 0} for spread in crypto_nodes.values()))
    if not shared:
        return {}
    best = {k: min(spread[k[0]][k[1]].fastest for spread in crypto_nodes.values()) for k in shared}
    return {node: statistics.median(spread[n][op].fastest / best[n, op] for n, op in shared)
            for node, spread in crypto_nodes.items()}


def node_speed_warnings(speeds: dict[str, float]) -> list[Warning]:
    """Nodes whose crypto runs at different speeds: their cells' compute-heavy parts are not comparable across
    nodes (the model uses each cell's own node's speed; comparisons within one node stay fair)."""
    if not speeds or max(speeds.values()) / min(speeds.values()) <= NODE_SPEED_RATIO:
        return []
    slow = max(speeds, key=speeds.get)
    fast = min(speeds, key=speeds.get)
    return [Warning("node_speed", f"the nodes' crypto speeds differ: node {slow} took {speeds[slow] / speeds[fast]:.2f}× "
                                  f"as long as node {fast} for the same operations (median over the operations both "
                                  "timed); a cell's compute-heavy part depends on the node that measured it",
                    "compare algorithms within one node (the report's nodes table and `report --by-node`), or "
                    "measure on identical machines")]


def run_warnings(run: dict) -> list[Warning]:
    """The runner's own warnings (floor drift …) and the run's state."""
    out = []
    for w in run.get("warnings") or []:
        out.append(Warning("runner", str(w)))  # the runner's text carries its own fix
    status = run.get("status")
    if status and status != "done":
        out.append(Warning("status", f"the run is {status}",
                           "finish it with `pqbench run SPEC --resume`; the report shows the cells done so far"))
    return out
