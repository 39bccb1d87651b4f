"""The late-sample detector: CPU queueing seen in a cell's own samples.

A sample that no retransmission touched (none by the client, as its TCP_INFO says, none by either
sender as the wire record says) should take the cell's clean time. One
that took clearly longer waited for something the link did not cause: a CPU busy with other
handshakes, or a CPU that ran slower for a while. Counted per cell and stored; the report warns
when the share is high.
"""

from __future__ import annotations

from pqbench import stats

CLEAN_QUANTILE = 5  # the clean time: this percentile of the untouched samples (the fast mode's edge)
MARGIN_MS = 0.5  # beyond the clean time by max_bias and this much, a sample is late
MIN_UNTOUCHED = 10
LATE_SHARE = 0.03  # the report warns above this share of late samples among the untouched


def touched(s: dict) -> bool:
    """A retransmission on this sample's connection, either way (the client's TCP_INFO, and the wire's
    record of both senders). A drop alone is not one: a lost packet that held the sample up was sent
    again before the sample ended, and one never resent (a pure ACK, the client's Finished, a
    session ticket, the teardown) did not hold it up; counting those as touched hid CPU-late samples
    (at 10 % loss a third of the clean ones)."""
    tcp = s.get("tcp_end") or s.get("tcp_handshake") or {}
    if (tcp.get("retransmits") or 0) > 0:
        return True
    w = s.get("wire")
    return bool(w) and any(w.get(k) for k in ("retrans_c2s", "retrans_s2c"))


def clean_and_threshold(untouched_ms: list[float], max_bias: float) -> tuple[float, float]:
    """The clean time (CLEAN_QUANTILE of the untouched samples' times) and the time beyond which one is
    late: what the detector judges with, and Auto while a cell runs (concurrency.late_handshakes)."""
    clean = stats.percentile(sorted(untouched_ms), CLEAN_QUANTILE)
    return clean, clean * (1 + max_bias) + MARGIN_MS


def detect(samples: list[dict], metric: str, max_bias: float) -> dict:
    """{clean_ms, threshold_ms, untouched, late, late_client_cpu, wire}: how many untouched samples were
    late, and of those how many spent at least half their lateness waiting for a CPU in the client
    itself (clients that report their run-queue wait, cpu_wait_ns; else None). wire says whether
    server-side retransmissions were visible (pqlink's record) or not (netem)."""
    untouched = [s for s in samples
                 if s.get("ok") and (s.get("t_ns") or {}).get(metric) is not None and not touched(s)]
    wire = any("wire" in s for s in samples)
    if len(untouched) < MIN_UNTOUCHED:
        return {"clean_ms": None, "threshold_ms": None, "untouched": len(untouched), "late": None,
                "late_client_cpu": None, "wire": wire}
    clean, threshold = clean_and_threshold([s["t_ns"][metric] / 1e6 for s in untouched], max_bias)
    late = [s for s in untouched if s["t_ns"][metric] / 1e6 > threshold]
    waits = all(s.get("cpu_wait_ns") is not None for s in late)
    client_cpu = sum(1 for s in late if s["cpu_wait_ns"] / 1e6 >= (s["t_ns"][metric] / 1e6 - clean) / 2) \
        if waits else None
    return {"clean_ms": round(clean, 3), "threshold_ms": round(threshold, 3), "untouched": len(untouched),
            "late": len(late), "late_client_cpu": client_cpu, "wire": wire}
