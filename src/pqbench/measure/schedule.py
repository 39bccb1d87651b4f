"""The schedule of a run: its cells in their order over a few lanes, overlapping only in their tails."""

from __future__ import annotations

import collections
import concurrent.futures
import threading
import time

from pqbench import interrupts
from pqbench.measure import concurrency
from pqbench.measure.sampler import Cancelled

# A cell's tail lets the next cell start on another lane only once it has lasted this long (the first
# SYN retransmission comes after 1 s): a clean cell's last handshake ends sooner, and the next cell then
# starts on the same lane after it, so loss-free cells never overlap and always share one testbed.
# Overlapping the last handshake of a 20-sample cell with the next cell's first, on alternating testbeds,
# shifted a clean cell's median by 0.1-0.4 ms (X25519 vs X25519MLKEM768 at 31.1 ms, lanes 2 vs 1).
TAIL_GRACE_S = 1.0


class TailGate:
    """Which cells are in progress, and whether another may start beside them: only once each of them has
    been in its tail (its `tail` event set) for TAIL_GRACE_S. The local schedule below and a cluster node's
    slots (pqbench.cluster.node) ask the same gate. Thread-safe."""

    def __init__(self):
        self._lock = threading.Lock()
        self._running: dict = {}  # key -> [tail event, when its tail was first seen]

    def _open(self) -> bool:
        now = time.monotonic()
        for entry in self._running.values():
            if not entry[0].is_set():
                return False
            entry[1] = entry[1] or now
            if now - entry[1] < TAIL_GRACE_S:
                return False
        return True

    def may_start(self) -> bool:
        with self._lock:
            return self._open()

    def enter(self, key, tail: threading.Event) -> None:
        with self._lock:
            self._running[key] = [tail, None]

    def try_enter(self, key, tail: threading.Event) -> bool:
        """Enters if a cell may start now (checked and entered at once, for callers in several threads)."""
        with self._lock:
            if not self._open():
                return False
            self._running[key] = [tail, None]
            return True

    def leave(self, key) -> None:
        with self._lock:
            self._running.pop(key, None)


def run_interleaved(lanes: list, todo: list, measure, save) -> None:
    """Measures the cells in their order, one per lane, and saves each as it finishes.

    A cell starts while others are still running only when each of those is in its tail (all
    samples claimed, a few stragglers waiting for retransmission timers): their CPU then cannot bias
    the new cell, and a lossy cell's last slow handshakes no longer hold up the whole run. When a
    cell fails, the others are stopped (Cancelled, not saved), any that finished meanwhile are
    saved, and the error is raised; on Ctrl-C the cells in progress are dropped. A tail counts once it
    has lasted TAIL_GRACE_S, and a cell takes the first free lane in the order given, so cells without
    stragglers run one after another on the first lane.
    measure(lane, pos, cell, tail, stop) -> (record, samples, why); save(cell, record, samples, why)."""
    pending = collections.deque(todo)
    free = list(lanes)
    running: dict = {}  # future -> (lane, cell)
    gate = TailGate()
    stop = threading.Event()
    error: BaseException | None = None
    pool = concurrent.futures.ThreadPoolExecutor(len(lanes), thread_name_prefix="lane")
    with interrupts.deferred() as interrupt:
        try:
            while (pending and error is None and not interrupt.arrived) or running:
                if interrupt.arrived:
                    stop.set()  # the cells in progress end as Cancelled; what finished meanwhile is saved
                if pending and error is None and not interrupt.arrived and free and gate.may_start():
                    pos, cell = pending.popleft()
                    free.sort(key=lanes.index)
                    lane, tail = free.pop(0), threading.Event()
                    future = pool.submit(measure, lane, pos, cell, tail, stop)
                    running[future] = (lane, cell)
                    gate.enter(future, tail)
                    continue
                finished, _ = concurrent.futures.wait(running, timeout=concurrency.LOOK_S,
                                                      return_when=concurrent.futures.FIRST_COMPLETED)
                for future in finished:
                    lane, cell = running.pop(future)
                    gate.leave(future)
                    free.append(lane)
                    failure = future.exception()
                    if failure is None:
                        save(cell, *future.result())
                    elif not isinstance(failure, Cancelled) and error is None:
                        error = failure
                        stop.set()
        finally:
            stop.set()
            pool.shutdown(wait=True)
    if error is not None:
        raise error
