"""Descriptive statistics over samples (pure Python: no dependency for the basics)."""

import math

PERCENTILES = (5, 25, 50, 75, 95, 99)


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if not sorted_values:
        return math.nan
    pos = (len(sorted_values) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (pos - lo) * (sorted_values[hi] - sorted_values[lo])


def median(values) -> float:
    return percentile(sorted(values), 50)


def summary_ms(values_ms: list[float]) -> dict:
    """mean and p5…p99 of durations in ms, rounded to µs."""
    v = sorted(values_ms)
    out = {"mean_ms": round(sum(v) / len(v), 3) if v else None}
    for q in PERCENTILES:
        out[f"p{q}_ms"] = round(percentile(v, q), 3) if v else None
    return out
