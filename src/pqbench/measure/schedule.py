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
    running: dict = {}  # future -> (lane, cell, tail event)
    tail_since: dict = {}  # future -> when its tail was first seen

    def in_long_tail(future, tail) -> bool:
        if not tail.is_set():
            return False
        since = tail_since.setdefault(future, time.monotonic())
        return time.monotonic() - since >= TAIL_GRACE_S

    stop = threading.Event()
    error: BaseException | None = None
    pool = concurrent.futures.ThreadPoolExecutor(len(lanes), thread_name_prefix="lane")
    with interrupts.deferred() as interrupt:
        try:
            while (pending and error is None and not interrupt.arrived) or running:
                if interrupt.arrived:
                    stop.set()  # the cells in progress end as Cancelled; what finished meanwhile is saved
                if pending and error is None and not interrupt.arrived and free and \
                        all(in_long_tail(f, tail) for f, (_, _, tail) in running.items()):
                    pos, cell = pending.popleft()
                    free.sort(key=lanes.index)
                    lane, tail = free.pop(0), threading.Event()
                    running[pool.submit(measure, lane, pos, cell, tail, stop)] = (lane, cell, tail)
                    continue
                finished, _ = concurrent.futures.wait(running, timeout=concurrency.LOOK_S,
                                                      return_when=concurrent.futures.FIRST_COMPLETED)
                for future in finished:
                    lane, cell, _ = running.pop(future)
                    tail_since.pop(future, None)
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
