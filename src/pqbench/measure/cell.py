"""One cell's measurement: batches of samples until the stopping rule says enough, then the cell's
record with its late-sample detector and the wire-vs-client comparison."""

from __future__ import annotations

import dataclasses
import datetime
import threading
from pathlib import Path

from pqbench import stats
from pqbench.measure import late, wire
from pqbench.endpoints.base import ClientJob
from pqbench.measure.sampler import failure_classes
from pqbench.experiment.spec import Samples
from pqbench.sample import END_PHASE
from pqbench.testbed import LinkSpec, TcpKnobs



@dataclasses.dataclass
class Plan:
    """What one cell measures: the link, the TCP knobs, the client's job and how many samples."""
    link: LinkSpec
    tcp: TcpKnobs
    job: ClientJob
    samples: Samples
    max_bias: float  # the detector's margin (and Auto's bound)
    client: str | None = None  # the rig's client stack that measures (None: its first)
    server: str | None = None  # the server stack the job's port belongs to (None: the rig's first)

    @property
    def metric(self) -> str:
        return END_PHASE[self.job.mode]


def stop_reason(durations: list[float], target: float) -> str | None:
    """Why the samples so far are enough, or None. Enough when the p50 and p95 bootstrap CIs'
    half-widths are within target × the estimate; or when only p95's is not, because its CI straddles
    the gap between the clean handshakes and those that waited for a retransmission timeout
    (RTO_MIN_MS over the clean time): it stays wide at any sample count, so the cell stops once the
    timeout mode's share (what the report shows beside it) is known to ±target."""
    if len(durations) < 5:
        return None
    v = sorted(durations)
    est = {q: stats.percentile(v, q) for q in (50, 95)}
    ci = {q: stats.bootstrap_ci(v, q, resamples=400) for q in (50, 95)}
    narrow = {q: est[q] > 0 and (ci[q][1] - ci[q][0]) / 2 <= target * est[q] for q in (50, 95)}
    if all(narrow.values()):
        return "confidence intervals narrow enough"
    gap = stats.percentile(v, late.CLEAN_QUANTILE) + late.RTO_MIN_MS
    if narrow[50] and ci[95][0] < gap <= ci[95][1]:
        _, lo, hi = stats.binomial_ci(sum(1 for d in v if d >= gap), len(v))
        if (hi - lo) / 2 <= target:
            return "p95 between modes, their shares known"
    return None


def collect(rig, plan: Plan, control, scratch: Path, *, tail: threading.Event | None = None,
            stop: threading.Event | None = None) -> tuple[list, str]:
    """Samples in batches until the CIs are narrow enough, or min/max says stop. control: how many
    workers (a pqbench.measure.concurrency policy). tail: set when the cell's last possible batch has only
    stragglers left. stop: cancels the cell (sampler.Cancelled)."""
    rule, metric = plan.samples, plan.metric
    samples: list[dict] = []
    batch = rule.min
    while True:
        last = rule.ci is None or len(samples) + batch >= rule.max
        new = rig.sample(plan.job, batch, control, scratch, tail=tail if last else None, stop=stop,
                         client=plan.client)
        for s in new:
            s["i"] = s.get("i", 0) + len(samples)  # indices unique across the cell's batches
        samples += new
        if not any(s.get("ok") for s in samples):
            return samples, "every sample failed"
        if rule.ci is None:
            return samples, "fixed count"
        durations = [s["t_ns"][metric] / 1e6 for s in samples if s.get("ok") and s["t_ns"].get(metric) is not None]
        why = stop_reason(durations, rule.ci)
        if why:
            return samples, why
        if len(samples) >= rule.max:
            return samples, "reached samples.max"
        control.start = control.peak  # the next batch starts where this one got to
        batch = min(max(control.peak * 5, len(samples) // 2, 10), rule.max - len(samples))


def measure(rig, plan: Plan, control, scratch: Path, *, tail=None, stop=None) -> tuple[dict, list, str]:
    """Measures one cell on a rig: (record fields, samples, why it stopped)."""
    started = datetime.datetime.now()
    rig.begin_cell(plan.link, plan.tcp)  # a server that died in an earlier cell is started again
    cc = rig.tb.congestion_control()  # what both ends' connections use, not only what was asked
    before = rig.path_rtt(plan.job)
    samples, why = collect(rig, plan, control, scratch, tail=tail, stop=stop)
    counters = rig.end_cell(samples, plan.job.mode, scratch, client=plan.client, server=plan.server)
    path = {"before": before, "after": rig.path_rtt(plan.job)} if before else None
    ok = sum(1 for s in samples if s.get("ok"))
    # a server that died while samples failed: their failures are the crash's, not the link's or the algorithm's,
    # so the cell is failed and --resume measures it again (died after its last handshake: nothing was touched)
    died = rig.server_died(plan.server) if ok < len(samples) else None
    if died:
        why = f"the {plan.server or 'first'} server died during the cell ({died}): measured again by --resume"
    record = {"status": "done" if ok and not died else "failed", "reason": None if ok and not died else why,
              "link": plan.link.to_dict(), "metric": plan.metric, "n": len(samples), "ok": ok,
              "failures": len(samples) - ok, "failure_classes": failure_classes(samples), "link_counters": counters,
              "concurrency": control.summary(), "started": started, "finished": datetime.datetime.now(),
              "stop_reason": why, "detector": late.detect(samples, plan.metric, plan.max_bias),
              "wire": wire.agreement(samples, plan.metric), "cc_client": cc["client"], "cc_server": cc["server"],
              **({"path": path} if path else {})}
    return record, samples, why
