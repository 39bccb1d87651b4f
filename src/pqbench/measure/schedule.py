"""The schedule of a run: its cells in their order over a few lanes, overlapping only in their tails."""

from __future__ import annotations

import collections
import concurrent.futures
import threading

from pqbench.measure import concurrency
from pqbench.endpoints.sampler import Cancelled


def run_interleaved(lanes: list, todo: list, measure, save) -> None:
    """Measures the cells in their order, one per lane, and saves each as it finishes.

    A cell starts while others are still running only when each of those is in its tail (all
    samples claimed, a few stragglers waiting for retransmission timers): their CPU then cannot bias
    the new cell, and a lossy cell's last slow handshakes no longer hold up the whole run. When a
    cell fails, the others are stopped (Cancelled, not saved), any that finished meanwhile are
    saved, and the error is raised; on Ctrl-C the cells in progress are dropped.
    measure(lane, pos, cell, tail, stop) -> (record, samples, why); save(cell, record, samples, why)."""
    pending = collections.deque(todo)
    free = list(lanes)
    running: dict = {}  # future -> (lane, cell, tail event)
    stop = threading.Event()
    error: BaseException | None = None
    pool = concurrent.futures.ThreadPoolExecutor(len(lanes), thread_name_prefix="lane")
    try:
        while (pending and error is None) or running:
            if pending and error is None and free and all(tail.is_set() for _, _, tail in running.values()):
                pos, cell = pending.popleft()
                lane, tail = free.pop(0), threading.Event()
                running[pool.submit(measure, lane, pos, cell, tail, stop)] = (lane, cell, tail)
                continue
            finished, _ = concurrent.futures.wait(running, timeout=concurrency.LOOK_S,
                                                  return_when=concurrent.futures.FIRST_COMPLETED)
            for future in finished:
                lane, cell, _ = running.pop(future)
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
