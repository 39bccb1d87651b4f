"""The late-sample detector: which side held up a cell's samples.

A sample that no loss recovery touched (pqbench.transport.touched: over TCP no retransmission by the
client, as its TCP_INFO says, or by either sender, as the wire record says; over QUIC no dropped
datagram) should take the cell's clean time. One that took clearly longer
waited for something the link's loss did not cause. Each late sample's excess over the clean time is
split, from what the instruments recorded, into the side that spent it:

- the client: its own wait for a CPU during the handshake (the kernel's schedstat, `cpu_wait_ns`);
- the server: its answer at the wire, from the last segment of the client's first flight to the first
  segment of the server's flight, against that gap's typical value in the cell (the typical value,
  the server's computation included, is what every sample pays and is part of what is measured; only
  a stall some samples pay is late);
- the link: how late the emulator released the connection's packets against their deadlines
  (pqlink's record, `link_late_ms`).

A late sample is the side's whose part is at least half of its excess; otherwise it is unexplained.
Counted per cell and stored; the report warns when the share is high and the late samples move a
reported percentile beyond its confidence interval.
"""

from __future__ import annotations

from pqbench import stats
from pqbench.transport import touched

CLEAN_QUANTILE = 5  # the clean time: this percentile of the untouched samples (the fast mode's edge)
MARGIN_MS = 0.5  # beyond the clean time by max_bias and this much, a sample is late
MIN_UNTOUCHED = 10
LATE_SHARE = 0.03  # the report warns above this share of late samples among the untouched
SIDES = ("server", "client", "link")
RTO_MIN_MS = 200.0  # Linux's shortest retransmission timeout: a recovery that cost this much waited for one


def clean_and_threshold(untouched_ms: list[float], max_bias: float) -> tuple[float, float]:
    """The clean time (CLEAN_QUANTILE of the untouched samples' times) and the time beyond which one is
    late: what the detector judges with, and Auto while a cell runs (concurrency.late_handshakes)."""
    clean = stats.percentile(sorted(untouched_ms), CLEAN_QUANTILE)
    return clean, clean * (1 + max_bias) + MARGIN_MS


def server_answer_ms(s: dict) -> float | None:
    """The gap at the wire from the client's first flight (its last segment) to the server's answer
    (the first segment of the next server flight): one round trip plus the server's own time."""
    flights = (s.get("wire") or {}).get("flights_ms") or []
    first_c2s = next((f for f in flights if f[0] == "c2s"), None)
    if first_c2s is None or first_c2s[2] is None:
        return None
    answer = next((f for f in flights if f[0] == "s2c" and f[1] is not None and f[1] >= first_c2s[2]), None)
    return answer[1] - first_c2s[2] if answer else None


def split(s: dict, excess_ms: float, typical_answer_ms: float | None) -> dict:
    """{server, client, link} ms of one late sample's excess that each side spent (None: not recorded),
    and `side`: the one that spent at least half of it, or "unexplained"."""
    answer = server_answer_ms(s)
    parts = {"server": max(0.0, answer - typical_answer_ms) if answer is not None and typical_answer_ms is not None
             else None,
             "client": s["cpu_wait_ns"] / 1e6 if s.get("cpu_wait_ns") is not None else None,
             "link": (s.get("wire") or {}).get("link_late_ms")}
    known = {k: v for k, v in parts.items() if v is not None}
    side = max(known, key=known.get) if known else None
    parts["side"] = side if side is not None and known[side] >= excess_ms / 2 else "unexplained"
    return parts


def detect(samples: list[dict], metric: str, max_bias: float) -> dict:
    """{clean_ms, threshold_ms, untouched, late, by_side, excess_ms, server_answer_ms, late_client_cpu,
    p50/p95 with and without the late samples, wire}: how many untouched samples were late, which side
    held up how many (by_side) and by how much (excess_ms: the median of their excess over the clean
    time), the server's typical answer time at the wire (a round trip plus its own time, paid by every
    sample), and what the late samples do to the percentiles a report shows. wire says whether
    server-side retransmissions were visible (pqlink's record) or not (netem)."""
    untouched = [s for s in samples
                 if s.get("ok") and (s.get("t_ns") or {}).get(metric) is not None and not touched(s)]
    wire = any("wire" in s for s in samples)
    if len(untouched) < MIN_UNTOUCHED:
        return {"clean_ms": None, "threshold_ms": None, "untouched": len(untouched), "late": None,
                "late_client_cpu": None, "wire": wire}
    ms = lambda s: s["t_ns"][metric] / 1e6  # noqa: E731
    clean, threshold = clean_and_threshold([ms(s) for s in untouched], max_bias)
    late = [s for s in untouched if ms(s) > threshold]
    answers = sorted(a for s in untouched if (a := server_answer_ms(s)) is not None)
    typical = stats.percentile(answers, 50) if answers else None
    splits = [split(s, ms(s) - clean, typical) for s in late]
    by_side = {side: sum(1 for p in splits if p["side"] == side) for side in (*SIDES, "unexplained")}
    excess = {side: round(stats.percentile(sorted(ms(s) - clean for s, p in zip(late, splits) if p["side"] == side), 50), 3)
              for side in by_side if by_side[side]}
    ok = sorted(ms(s) for s in samples if s.get("ok") and (s.get("t_ns") or {}).get(metric) is not None)
    late_ids = {id(s) for s in late}
    without = sorted(ms(s) for s in samples if s.get("ok") and (s.get("t_ns") or {}).get(metric) is not None
                     and id(s) not in late_ids)
    pct = lambda v, q: round(stats.percentile(v, q), 3) if v else None  # noqa: E731
    return {"clean_ms": round(clean, 3), "threshold_ms": round(threshold, 3), "untouched": len(untouched),
            "late": len(late), "by_side": by_side, "excess_ms": excess,
            "server_answer_ms": round(typical, 3) if typical is not None else None,
            # as before sides were told apart: late samples that were the client's own wait for a CPU
            "late_client_cpu": by_side["client"] if all(s.get("cpu_wait_ns") is not None for s in late) else None,
            "p50_ms": pct(ok, 50), "p95_ms": pct(ok, 95),
            "p50_without_late_ms": pct(without, 50), "p95_without_late_ms": pct(without, 95), "wire": wire}
