"""The adaptive stopping rule (pqbench.measure.cell.collect) on scripted durations: it stops when the
CIs are narrow, and also when p95 sits between the clean handshakes and those that waited for a
retransmission timeout (where more samples cannot narrow it) once the timeout share is known."""

import random
import types

from pqbench.experiment.spec import Samples
from pqbench.measure import cell

METRIC = "handshake_done"


class ScriptedRig:
    """Hands out samples whose durations come from draw(rng), as a rig's sample() returns them."""

    def __init__(self, draw, seed=7):
        self.draw, self.rng, self.handed = draw, random.Random(seed), 0

    def sample(self, job, n, control, scratch, *, tail=None, stop=None, client=None):
        self.handed += n
        return [{"ok": True, "t_ns": {METRIC: int(self.draw(self.rng) * 1e6)}} for _ in range(n)]


def collect(draw, rule=Samples(min=40, max=300, ci=0.05)):
    plan = types.SimpleNamespace(samples=rule, metric=METRIC, job=None, client=None)
    control = types.SimpleNamespace(start=1, peak=1)
    samples, why = cell.collect(ScriptedRig(draw), plan, control, None)
    return len(samples), why


def clean(rng):
    return 12.0 + rng.random() * 0.3


def test_a_tight_cell_stops_when_its_cis_are_narrow():
    assert collect(clean) == (40, "confidence intervals narrow enough")


def test_a_p95_between_the_clean_and_the_timeout_mode_stops_once_the_share_is_known():
    """7 % of the handshakes waited for a retransmission timeout (+200 ms and more): p95's CI spans
    both modes at any count, so the cell stops once the timeout share's CI is within ±5 points."""
    lossy = lambda rng: clean(rng) + (200 + 40 * rng.random() if rng.random() < 0.07 else 0)  # noqa: E731
    n, why = collect(lossy)
    assert why == "p95 between modes, their shares known" and 100 <= n < 300


def test_a_spread_that_is_not_a_timeout_gap_samples_on_to_the_maximum():
    """A second mode 15 ms up (a fast retransmission at this RTT) is no timeout gap: the rule does not
    stop for it, and the cell runs to samples.max."""
    fast = lambda rng: clean(rng) + (15 * (1 + rng.random()) if rng.random() < 0.07 else 0)  # noqa: E731
    assert collect(fast) == (300, "reached samples.max")
