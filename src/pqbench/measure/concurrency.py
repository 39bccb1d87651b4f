"""How many pqtimer workers a cell runs at once.

A fixed count (`Fixed`) or `Auto`: start with one and add workers while the machine's CPU load
stays low enough that waiting for the CPU cannot delay a handshake by more than a set fraction of
its clean time (no retransmission), and while the measured wait (TCP connect times) agrees. Handshakes on a long or lossy link spend nearly all their time waiting, so many can run at
once; on a short clean link one already loads the machine, and more would queue the crypto behind
each other and bias the times upwards (5 workers at 5.4 ms RTT added 14 % to the median). Load and
CPU per handshake are measured, not predicted: busy time from /proc/stat minus pqlink's
idle-priority spinners (they only fill time nothing else wanted).
"""

from __future__ import annotations

import bisect
import collections
import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pqbench import transport as transportmod
from pqbench.measure import late
from pqbench.sample import END_PHASE


SCHED_IDLE = 5
TICKS_PER_S = os.sysconf("SC_CLK_TCK")
CPUS = os.cpu_count() or 1
MIN_BUSY_S = 2 / TICKS_PER_S  # below two ticks the busy time is mostly rounding
LOOK_S = 0.25  # how often Auto looks: /proc/stat counts 10 ms ticks, so a look covers ~50 of them
WINDOW_S = 5.0  # Auto's estimates look this far back
EXCESS_SAMPLES = 10  # connect times before their mean stands for the CPU wait
WAITS = 3  # CPU waits on a handshake's critical path: client at the SYN-ACK and the server's flight, server at the ClientHello
LATE_CONNECT_MS = 1.0  # a connect this much slower than the cell's first ones waited for a CPU
LATE_CONNECT_SHARE = 0.01  # more such connects than this since the last step stop the growth
LATE_CONNECT_MIN = 100  # connects since the last step before a late one's share is judged
STEP = 0.5  # a step adds at most this fraction of the workers running
LATEST_KEPT = 4096  # the latest samples' connect excesses kept in order (the recent mean reads 2 per worker)
SYN_RETRY_MS = 500.0  # a connect this far beyond the RTT lost its SYN or SYN-ACK (the first retry comes after 1 s)
# Whole handshakes: more than this share of those since the last step came late (no retransmission by
# the client, later than the cell's clean time by max_bias + late.MARGIN_MS, yet sooner than a
# recovery could make them) stops the growth: the wait of a server or a client after its connect,
# which connect times do not show. Judged among at least LATE_HANDSHAKE_MIN once one is late. 1 %: the
# issue's bound on samples out of the clean mode is the parallel-1 share plus one point (2 % let 1.3-2.5 %
# through on the lossy grid; 1 % held it to 0.6-1.5 % with no longer wall time, bench/bench_grids.py).
LATE_HANDSHAKE_SHARE = 0.01
LATE_HANDSHAKE_MIN = 100
CLEAN_MIN = 20  # samples before their p5 stands for the clean time
# Samples finished at the current worker count before the next step: widen only on evidence. A step
# taken after fewer (one or two samples at one worker) rests on a load model nothing has checked yet,
# and a small cell (20 samples) ended with its workers queueing: 8 of 20 hybrid samples late, its cost
# over X25519 +1.25 ms instead of +0.79 ms at one worker. With this many, a 20-sample cell keeps one
# worker, and each step's effect is seen in as many handshakes as the late detector needs for a clean time.
EVIDENCE_MIN = CLEAN_MIN


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of all CPUs since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def _task_stat(pid: int, tid: str) -> list[str]:
    return Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()


def idle_spinners() -> list[tuple[int, str]]:
    """Threads of any process that run at SCHED_IDLE: pqlink's keep-awake spinners, ours and those
    of other testbeds on the machine (they only take time nobody else wants)."""
    out = []
    for pid in (int(d) for d in os.listdir("/proc") if d.isdigit()):
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                if int(_task_stat(pid, tid)[38]) == SCHED_IDLE:
                    out.append((pid, tid))
        except (OSError, IndexError, ValueError):
            continue
    return out


class BusyMeter:
    """CPU time spent on real work: the load between two looks, and the busy time since creation."""

    def __init__(self, exclude: list[tuple[int, str]] = ()):
        self.exclude = list(exclude)
        self.first = self.last = self._read()

    def _excluded(self) -> int:
        total = 0
        for pid, tid in self.exclude:
            try:
                st = _task_stat(pid, tid)
                total += int(st[11]) + int(st[12])  # utime, stime
            except (OSError, IndexError, ValueError):
                pass
        return total

    def _read(self) -> tuple[int, int]:
        busy, total = _cpu_ticks()
        return busy - self._excluded(), total

    def look(self) -> tuple[float | None, float]:
        """(load since the previous look as a fraction of all CPUs or None if no tick passed,
        busy CPU-seconds since creation)."""
        now = self._read()
        busy, total = now[0] - self.last[0], now[1] - self.last[1]
        self.last = now
        cpu_load = None if total <= 0 else min(1.0, max(0.0, busy / total))
        return cpu_load, max(0, now[0] - self.first[0]) / TICKS_PER_S


class Fixed:
    """Always `parallel` workers."""

    def __init__(self, parallel: int):
        self.start = parallel
        self.peak = parallel

    def more(self, running: int, started: int, samples: list[dict]) -> int:
        return 0

    def finish(self) -> None:
        pass

    def summary(self) -> dict:
        return {"policy": "fixed", "workers": self.peak}


def cpu_load_target(max_bias: float, clean_ms: float, cpu_ms: float) -> float:
    """The CPU load at which queueing for the CPU delays a handshake by about max_bias of its clean
    time. Waiting grows like cpu × load / (1 - load) (one queue; measured: 5 workers at load 0.45
    added 1.9 ms to a 12.9 ms handshake costing 2.2 ms of CPU), so the load may reach x / (1 + x)
    with x = max_bias × clean / cpu: long links tolerate a busy machine, short ones not. The clean
    time (no retransmission) is the reference, never a median that retransmission timeouts inflate:
    at 15 % loss the median is 1.1-5× the clean time while CPU waits still hit clean handshakes."""
    x = max_bias * clean_ms / cpu_ms
    return x / (1 + x)


class Budget:
    """One CPU budget for a whole run: the cells measured at once on several lanes share the machine,
    so each may load it only up to the strictest target among them (a long-link cell must not raise
    the load under a short-link cell's stragglers). Cells join while they run and leave when done."""

    def __init__(self):
        self._targets: dict[int, float] = {}
        self._lock = threading.Lock()

    def target(self, member: object, own: float) -> float:
        with self._lock:
            self._targets[id(member)] = own
            return min(self._targets.values())

    def leave(self, member: object) -> None:
        with self._lock:
            self._targets.pop(id(member), None)


def clean_ms(s: dict, metric: str) -> float | None:
    """A sample's time (ms) if no retransmission touched it: during the cell there is no wire record yet, so
    touched() judges what the client saw (TCP_INFO)."""
    t = (s.get("t_ns") or {}).get(metric)
    return t / 1e6 if s.get("ok") and t is not None and not transportmod.touched(s) else None


def late_handshakes(base_sorted: list[float], recent_sorted: list[float], rtt_ms: float,
                    max_bias: float) -> tuple[int, int]:
    """(late, judged) among the handshakes to judge (recent_sorted: their clean_ms, sorted): those that ended
    sooner than a loss recovery could make them (a retransmission costs at least a round trip over the clean
    time), and of those, the ones later than the clean time (p5 of base_sorted, every clean sample's time, sorted)
    by the detector's margin. Server retransmissions are invisible here, but they too cost a round trip or more."""
    if len(base_sorted) < CLEAN_MIN:
        return 0, 0
    clean, threshold = late.clean_and_threshold(base_sorted, max_bias)
    judged = bisect.bisect_left(recent_sorted, clean + max(rtt_ms, 1.0))
    return max(0, judged - bisect.bisect_right(recent_sorted, threshold)), judged


def connect_excess(s: dict, rtt_ms: float) -> float | None:
    """A sample's TCP connect time beyond the RTT if its SYN and SYN-ACK went through at once: the kernel answers
    the SYN, so the excess is the emulator's floor plus the time the client waited for a CPU after the SYN-ACK
    arrived, a direct probe of CPU queueing that loss does not touch."""
    t = (s.get("t_ns") or {}).get("tcp_connected")
    excess = t / 1e6 - rtt_ms if t is not None else None
    return excess if excess is not None and excess < SYN_RETRY_MS else None


class SampleReadings:
    """What Auto reads of each sample (its clean time, its connect excess), read once as samples arrive and kept
    sorted, whole and since the last step: a long cell holds tens of thousands, and reading them all again at
    every look would take the CPU from the handshakes measured beside it."""

    def __init__(self, metric: str, rtt_ms: float):
        self.metric, self.rtt_ms = metric, rtt_ms
        self.count = 0  # samples read
        self.latest: collections.deque = collections.deque(maxlen=LATEST_KEPT)  # the latest samples' excesses
        self.clean_sorted: list[float] = []
        self.clean_since: list[float] = []  # sorted, since mark()
        self.excess_since: list[float] = []  # sorted, since mark()

    def read(self, samples: list[dict]) -> None:
        for s in samples[self.count:]:  # a cell's samples only grow
            c, e = clean_ms(s, self.metric), connect_excess(s, self.rtt_ms)
            if c is not None:
                bisect.insort(self.clean_sorted, c)
                bisect.insort(self.clean_since, c)
            self.latest.append(e)
            if e is not None:
                bisect.insort(self.excess_since, e)
        self.count = max(self.count, len(samples))

    def latest_excesses(self, n: int) -> list[float]:
        """The connect excesses of the latest n samples read (at most LATEST_KEPT) that have one."""
        return [e for e in list(self.latest)[-n:] if e is not None] if n else []

    def mark(self) -> None:
        self.clean_since, self.excess_since = [], []


@dataclass
class Auto:
    """Adds workers while two things hold, up to `maximum`:
    - the modelled load stays under cpu_load_target(max_bias, clean, cpu) (and the run's Budget), where
      clean = network_ms (round trips × RTT) + the measured CPU time of a handshake, and
    - the measured CPU wait stays under max_bias of the clean time: WAITS × the rise of the mean TCP
      connect excess (connect_excess) over its lowest level in the cell (seen with few workers).
    - fewer than LATE_CONNECT_SHARE of the connects since the last step waited LATE_CONNECT_MS longer
      than the cell's first ones: a mean wait within bounds can hide a tail of handshakes delayed by
      milliseconds, which is what moves the clean mode's upper quantiles.
    - no more than LATE_HANDSHAKE_SHARE of the whole handshakes since the last step came late
      (late_handshakes): the server's wait and the client's after its connect, which connects miss.
    A step is taken only once as many samples finished since the last one as workers run, and at least
    EVIDENCE_MIN (LATE_CONNECT_MIN once a late connect was seen), so its effect is measured before the
    next and a small cell never widens on no evidence; a step adds at most half the workers running.

    What one worker costs is estimated over the last WINDOW_S seconds (busy time / worker-seconds):
    long enough that a moment of waiting for retransmissions does not look like an idle machine,
    short enough that a burst of someone else's load is forgotten."""

    max_bias: float
    maximum: int
    network_ms: float
    rtt_ms: float = 0.0
    start: int = 1
    meter: BusyMeter = field(default_factory=BusyMeter)
    budget: Budget | None = None
    cpu_loads: list = field(default_factory=list)
    targets: list = field(default_factory=list)
    peak: int = 0
    worker_s: float = 0.0
    held: int = 0  # looks at which the measured CPU wait stopped a step
    clean_ms: float | None = None
    wait_ms: float | None = None  # the latest estimate of the CPU wait per handshake
    late_share: float = 0.0  # connects since the last step that waited LATE_CONNECT_MS longer than the first
    metric: str = "handshake_done"  # the phase that ends a sample's time
    late_handshake_share: float = 0.0  # handshakes since the last step that came late (late_handshakes)
    connectless: bool = False  # the transport has no kernel connect to probe the CPU wait with (QUIC)
    _base_excess: float | None = None
    _stepped_at: int = 0  # samples finished when the last step was taken
    _last: tuple | None = None  # (monotonic time, workers running) at the previous look
    _history: collections.deque = field(default_factory=collections.deque)  # (time, busy s, done, worker s)
    _readings: SampleReadings = field(init=False)  # made in __post_init__: it reads metric and rtt_ms

    def __post_init__(self):
        self.peak = max(self.peak, self.start)
        self._readings = SampleReadings(self.metric, self.rtt_ms)

    def more(self, running: int, started: int, samples: list[dict]) -> int:
        now = time.monotonic()
        if self._last:
            self.worker_s += self._last[1] * (now - self._last[0])
        self._last = (now, running)
        self.peak = max(self.peak, running)
        cpu_load, busy_s = self.meter.look()
        if cpu_load is not None:
            self.cpu_loads.append(cpu_load)
        finished = started - running  # ≈ samples done
        self._history.append((now, busy_s, finished, self.worker_s))
        while len(self._history) > 2 and now - self._history[1][0] >= WINDOW_S:
            self._history.popleft()
        t0, busy0, finished0, worker_s0 = self._history[0]
        busy, done, worker_s = busy_s - busy0, finished - finished0, self.worker_s - worker_s0
        if done <= 0 or worker_s <= 0:
            return 0  # no handshake finished in the window yet: its CPU cost is unknown
        cpu_ms = max(busy, MIN_BUSY_S) * 1000 / done
        self.clean_ms = self.network_ms + cpu_ms
        target = cpu_load_target(self.max_bias, self.clean_ms, cpu_ms)
        if self.budget is not None:
            target = self.budget.target(self, target)
        self.targets.append(target)
        if self._cpu_wait_too_long(samples, running):
            self.held += 1
            return 0
        if finished - self._stepped_at < max(running, EVIDENCE_MIN):
            return 0  # the last step's effect (or, at the start, one worker's) is not measured yet
        per_worker = max(busy, MIN_BUSY_S) / (worker_s * CPUS)  # fraction of the machine
        add = math.floor(target / per_worker) - running
        add = max(0, min(add, math.ceil(running * STEP), self.maximum - running))
        if add:
            self._stepped_at = finished
            self._readings.mark()
        self.peak = max(self.peak, running + add)
        return add

    def _cpu_wait_too_long(self, samples: list[dict], running: int) -> bool:
        """The measured wait: the mean rise of the connect excess over its lowest level (× WAITS)
        against max_bias of the clean time, and the share of connects that waited clearly longer
        than the first ones (a mean can hide a few handshakes delayed by milliseconds) against
        LATE_CONNECT_SHARE, over the samples since the last step."""
        readings = self._readings
        readings.read(samples)
        recent = readings.latest_excesses(max(EXCESS_SAMPLES, 2 * running))
        late = 0
        since: list[float] = []
        # Over a transport without a kernel connect (QUIC) there is no connect probe: the late handshakes
        # below are then the only measured check, and they must have judged enough samples before a step.
        probed = len(recent) >= EXCESS_SAMPLES
        if probed:
            level = sum(recent) / len(recent)
            if self._base_excess is None:  # the first connects, made by one worker: the floor's spread
                self._base_excess = sorted(recent)[len(recent) // 2]
            self.wait_ms = WAITS * max(0.0, level - self._base_excess)
            since = readings.excess_since
            late = len(since) - bisect.bisect_right(since, self._base_excess + LATE_CONNECT_MS)
            self.late_share = late / len(since) if since else 0.0
        elif not self.connectless:
            return False
        late_hs, judged = late_handshakes(readings.clean_sorted, readings.clean_since, self.rtt_ms,
                                          self.max_bias)
        self.late_handshake_share = late_hs / judged if judged else 0.0
        # one late connect is judged only among LATE_CONNECT_MIN (a 1 % share needs them); none lets a step go
        return (probed and (self.wait_ms > self.max_bias * self.clean_ms or (
            late > 0 and (len(since) < LATE_CONNECT_MIN or self.late_share > LATE_CONNECT_SHARE)))) or (
            late_hs > 0 and (judged < LATE_HANDSHAKE_MIN or self.late_handshake_share > LATE_HANDSHAKE_SHARE)) or (
            self.connectless and judged < LATE_HANDSHAKE_MIN)

    def finish(self) -> None:
        if self.budget is not None:
            self.budget.leave(self)

    def summary(self) -> dict:
        mean = lambda xs: round(sum(xs) / len(xs), 3) if xs else None  # noqa: E731
        rnd = lambda x: round(x, 3) if x is not None else None  # noqa: E731
        return {"policy": "auto", "max_bias": self.max_bias, "maximum": self.maximum, "workers": self.peak,
                "load_mean": mean(self.cpu_loads), "load_max": round(max(self.cpu_loads), 3) if self.cpu_loads else None,
                "load_target": mean(self.targets), "clean_ms": rnd(self.clean_ms), "cpu_wait_ms": rnd(self.wait_ms),
                "late_connects": rnd(self.late_share), "late_handshakes": rnd(self.late_handshake_share),
                "held": self.held}


def policy(parallel: int | str, *, max_bias: float | None, maximum: int, rtt_ms: float, mode: str,
           requests: int | None, budget: Budget | None = None, transport: str | None = None):
    """The workers of one cell or measurement: Fixed(parallel), or for "auto" an Auto whose floor
    for the typical time is the connection's time on the wire (the transport's setup and TLS's handshake,
    plus a round trip per request), its load measured without the machine's idle-priority spinners."""
    if parallel != "auto":
        return Fixed(parallel)
    t = transportmod.get(transport)
    round_trips = t.setup_round_trips + 1 + {"page": 1, "requests": requests or 1}.get(mode, 0)
    return Auto(max_bias=max_bias, maximum=maximum, network_ms=rtt_ms * round_trips, rtt_ms=rtt_ms,
                meter=BusyMeter(idle_spinners()), budget=budget, metric=END_PHASE.get(mode, "handshake_done"),
                connectless=not t.kernel_tcp)
