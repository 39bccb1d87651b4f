"""How a population scan stays polite: one global rate of new connections (every connection of every
target takes a slot, slots 1/rate apart), one target at a time per host address (a target's connections
are sequential, so one connection at a time per host), and a backoff before the next target of a host
after its refusals (doubling per refusal in a row, capped)."""

from __future__ import annotations

import threading
import time

from pqbench.scan.tls import Stopped

BACKOFF_CAP_S = 30.0
LOOK_S = 0.1


class Pace:
    """Slots for new connections, 1/rate seconds apart, across all threads."""

    def __init__(self, rate: float, stop: threading.Event | None = None):
        self.interval = 1.0 / rate
        self.stop = stop
        self.lock = threading.Lock()
        self.next = time.monotonic()
        self.taken = 0

    def reserve(self, k: int = 1) -> None:
        """k consecutive slots; returns at the first (the caller spaces the others by at least interval)."""
        with self.lock:
            start = max(self.next, time.monotonic())
            self.next = start + k * self.interval
            self.taken += k
        wait(start, self.stop)


def wait(until: float, stop: threading.Event | None) -> None:
    while True:
        left = until - time.monotonic()
        if stop is not None and stop.is_set():
            raise Stopped("the scan was stopped")
        if left <= 0:
            return
        time.sleep(min(LOOK_S, left))


class Hosts:
    """One target at a time per host address, and the refusals in a row of each."""

    def __init__(self, backoff_s: float, stop: threading.Event | None = None):
        self.backoff_s, self.stop = backoff_s, stop
        self.refusals: dict[str, int] = {}

    def before(self, ip: str) -> float:
        """Waits out the host's backoff; returns how long it waited."""
        n = self.refusals.get(ip, 0)
        if not n or not self.backoff_s:
            return 0.0
        pause = min(BACKOFF_CAP_S, self.backoff_s * 2 ** (n - 1))
        wait(time.monotonic() + pause, self.stop)
        return pause

    def after(self, ip: str, refused: bool) -> None:
        self.refusals[ip] = self.refusals.get(ip, 0) + 1 if refused else 0
