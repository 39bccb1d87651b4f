"""How many pqtimer workers a cell runs at once.

A fixed count (`Fixed`) or `Auto`: start with one and add workers while the machine's CPU load
stays low enough that waiting for the CPU cannot delay a handshake by more than a set fraction of
its time. Handshakes on a long or lossy link spend nearly all their time waiting, so many can run at
once; on a short clean link one already loads the machine, and more would queue the crypto behind
each other and bias the times upwards (5 workers at 5.4 ms RTT added 14 % to the median). Load and
CPU per handshake are measured, not predicted: busy time from /proc/stat minus pqlink's
idle-priority spinners (they only fill time nothing else wanted).
"""

from __future__ import annotations

import collections
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from pqbench import stats

SCHED_IDLE = 5
TICKS_PER_S = os.sysconf("SC_CLK_TCK")
CPUS = os.cpu_count() or 1
MIN_BUSY_S = 2 / TICKS_PER_S  # below two ticks the busy time is mostly rounding
LOOK_S = 0.25  # how often Auto looks: /proc/stat counts 10 ms ticks, so a look covers ~50 of them
WINDOW_S = 5.0  # Auto's estimates look this far back
MEDIAN_AFTER = 10  # samples before their median stands for the cell's typical time


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
        load = None if total <= 0 else min(1.0, max(0.0, busy / total))
        return load, max(0, now[0] - self.first[0]) / TICKS_PER_S


class Fixed:
    """Always `parallel` workers."""

    def __init__(self, parallel: int):
        self.start = parallel
        self.peak = parallel

    def more(self, running: int, started: int, durations: list[float]) -> int:
        return 0

    def summary(self) -> dict:
        return {"policy": "fixed", "workers": self.peak}


def load_target(max_bias: float, typical_ms: float, cpu_ms: float) -> float:
    """The CPU load at which queueing for the CPU delays a handshake by about max_bias of its
    typical time. Waiting grows like cpu × load / (1 - load) (one queue; measured: 5 workers at
    load 0.45 added 1.9 ms to a 12.9 ms handshake costing 2.2 ms of CPU), so the load may reach x / (1 + x)
    with x = max_bias × typical / cpu: long or lossy links tolerate a busy machine, short clean ones not."""
    x = max_bias * typical_ms / cpu_ms
    return x / (1 + x)


@dataclass
class Auto:
    """Adds workers while the load they would make stays under load_target(max_bias, ...), up to
    `maximum`. The typical time is the median of the cell's samples so far (retransmissions
    included), never less than network_ms, the time on the wire without compute (round trips × RTT).

    What one worker costs is estimated over the last WINDOW_S seconds (busy time / worker-seconds):
    long enough that a moment of waiting for retransmissions does not look like an idle machine,
    short enough that a burst of someone else's load is forgotten."""

    max_bias: float
    maximum: int
    network_ms: float
    start: int = 1
    meter: BusyMeter = field(default_factory=BusyMeter)
    loads: list = field(default_factory=list)
    targets: list = field(default_factory=list)
    peak: int = 0
    worker_s: float = 0.0
    _last: tuple | None = None  # (monotonic time, workers running) at the previous look
    _history: collections.deque = field(default_factory=collections.deque)  # (time, busy s, done, worker s)

    def __post_init__(self):
        self.peak = max(self.peak, self.start)

    def more(self, running: int, started: int, durations: list[float]) -> int:
        now = time.monotonic()
        if self._last:
            self.worker_s += self._last[1] * (now - self._last[0])
        self._last = (now, running)
        self.peak = max(self.peak, running)
        load, busy_s = self.meter.look()
        if load is not None:
            self.loads.append(load)
        finished = started - running  # ≈ samples done
        self._history.append((now, busy_s, finished, self.worker_s))
        while len(self._history) > 2 and now - self._history[1][0] >= WINDOW_S:
            self._history.popleft()
        t0, busy0, finished0, worker_s0 = self._history[0]
        busy, done, worker_s = busy_s - busy0, finished - finished0, self.worker_s - worker_s0
        if done <= 0 or worker_s <= 0:
            return 0  # no handshake finished in the window yet: its CPU cost is unknown
        cpu_ms = max(busy, MIN_BUSY_S) * 1000 / done
        typical = max(self.network_ms + cpu_ms, stats.median(durations) if len(durations) >= MEDIAN_AFTER else 0)
        target = load_target(self.max_bias, typical, cpu_ms)
        self.targets.append(target)
        per_worker = max(busy, MIN_BUSY_S) / (worker_s * CPUS)  # fraction of the machine
        add = math.floor(target / per_worker) - running
        # at most double per look, so the next look corrects an estimate made from few ticks
        add = max(0, min(add, running, self.maximum - running))
        self.peak = max(self.peak, running + add)
        return add

    def summary(self) -> dict:
        mean = lambda xs: round(sum(xs) / len(xs), 3) if xs else None  # noqa: E731
        return {"policy": "auto", "max_bias": self.max_bias, "maximum": self.maximum, "workers": self.peak,
                "load_mean": mean(self.loads), "load_max": round(max(self.loads), 3) if self.loads else None,
                "load_target": mean(self.targets)}


def policy(parallel: int | str, *, max_bias: float | None, maximum: int, rtt_ms: float, mode: str,
           requests: int | None):
    """The workers of one cell or measurement: Fixed(parallel), or for "auto" an Auto whose floor
    for the typical time is the connection's time on the wire (TCP and TLS handshakes, plus a round
    trip per request), its load measured without the machine's idle-priority spinners."""
    if parallel != "auto":
        return Fixed(parallel)
    round_trips = 2 + {"page": 1, "requests": requests or 1}.get(mode, 0)
    return Auto(max_bias=max_bias, maximum=maximum, network_ms=rtt_ms * round_trips, meter=BusyMeter(idle_spinners()))
