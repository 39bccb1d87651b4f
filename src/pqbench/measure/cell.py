"""One cell's measurement: batches of samples until the stopping rule says enough, then the cell's
record with its late-sample detector and the wire-vs-client comparison."""

from __future__ import annotations

import dataclasses
import datetime
import threading
from pathlib import Path

from pqbench import late, stats
from pqbench.endpoints.base import ClientJob
from pqbench.endpoints.sampler import failure_classes
from pqbench.experiment.spec import Samples
from pqbench.sample import END_PHASE
from pqbench.testbed import LinkSpec, TcpKnobs

WIRE_TOLERANCE_MS = 0.25  # client and wire times of one sample further apart than this disagree
WIRE_DISAGREE_SHARE = 0.05  # the report warns when more samples than this disagree


@dataclasses.dataclass
class Plan:
    """What one cell measures: the link, the TCP knobs, the client's job and how many samples."""
    link: LinkSpec
    tcp: TcpKnobs
    job: ClientJob
    samples: Samples
    max_bias: float  # the detector's margin (and Auto's bound)

    @property
    def metric(self) -> str:
        return END_PHASE[self.job.mode]


def ci_narrow(durations: list[float], target: float) -> bool:
    """True when the p50 and p95 bootstrap CIs' half-widths are within target × the estimate."""
    if len(durations) < 5:
        return False
    v = sorted(durations)
    for q in (50, 95):
        lo, hi = stats.bootstrap_ci(v, q, resamples=400)
        est = stats.percentile(v, q)
        if est <= 0 or (hi - lo) / 2 > target * est:
            return False
    return True


def collect(rig, plan: Plan, control, scratch: Path, *, tail: threading.Event | None = None,
            stop: threading.Event | None = None) -> tuple[list, str]:
    """Samples in batches until the CIs are narrow enough, or min/max says stop. control: how many
    workers (a pqbench.concurrency policy). tail: set when the cell's last possible batch has only
    stragglers left. stop: cancels the cell (sampler.Cancelled)."""
    rule, metric = plan.samples, plan.metric
    samples: list[dict] = []
    batch = rule.min
    while True:
        last = rule.ci is None or len(samples) + batch >= rule.max
        new = rig.sample(plan.job, batch, control, scratch, tail=tail if last else None, stop=stop)
        for s in new:
            s["i"] = s.get("i", 0) + len(samples)  # indices unique across the cell's batches
        samples += new
        if not any(s.get("ok") for s in samples):
            return samples, "every sample failed"
        if rule.ci is None:
            return samples, "fixed count"
        durations = [s["t_ns"][metric] / 1e6 for s in samples if s.get("ok") and s["t_ns"].get(metric) is not None]
        if ci_narrow(durations, rule.ci):
            return samples, "confidence intervals narrow enough"
        if len(samples) >= rule.max:
            return samples, "reached samples.max"
        control.start = control.peak  # the next batch starts where this one got to
        batch = min(max(control.peak * 5, len(samples) // 2, 10), rule.max - len(samples))


def wire_agreement(samples: list[dict], metric: str) -> dict:
    """Client-measured vs wire-measured time of the samples the wire record covers."""
    diffs = sorted(s["t_ns"][metric] / 1e6 - s["wire"]["ms"] for s in samples
                   if s.get("ok") and (s.get("wire") or {}).get("ms") is not None
                   and (s.get("t_ns") or {}).get(metric) is not None)
    if not diffs:
        return {"n": 0}
    disagree = sum(1 for d in diffs if abs(d) > WIRE_TOLERANCE_MS)
    return {"n": len(diffs), "median_diff_ms": round(stats.percentile(diffs, 50), 4),
            "p5_diff_ms": round(stats.percentile(diffs, 5), 4), "p95_diff_ms": round(stats.percentile(diffs, 95), 4),
            "tolerance_ms": WIRE_TOLERANCE_MS, "disagree": disagree}


def measure(rig, plan: Plan, control, scratch: Path, *, tail=None, stop=None) -> tuple[dict, list, str]:
    """Measures one cell on a rig: (record fields, samples, why it stopped)."""
    started = datetime.datetime.now()
    rig.begin_cell(plan.link, plan.tcp)
    samples, why = collect(rig, plan, control, scratch, tail=tail, stop=stop)
    counters = rig.end_cell(samples, plan.job.mode, scratch)
    ok = sum(1 for s in samples if s.get("ok"))
    record = {"status": "done" if ok else "failed", "reason": None if ok else why,
              "link": plan.link.to_dict(), "metric": plan.metric, "n": len(samples), "ok": ok,
              "failures": len(samples) - ok, "failure_classes": failure_classes(samples), "link_counters": counters,
              "concurrency": control.summary(), "started": started, "finished": datetime.datetime.now(),
              "stop_reason": why, "detector": late.detect(samples, plan.metric, plan.max_bias),
              "wire": wire_agreement(samples, plan.metric)}
    return record, samples, why
