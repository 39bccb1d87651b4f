"""Progress of a run: one line per cell on stderr with the count, the elapsed time and an ETA."""

from __future__ import annotations

import sys
import time


class Progress:
    """The ETA is extrapolated from the cells measured since this start only: after `--resume`, the
    cells done earlier and the skipped ones (recorded at once) would make it look minutes away when it
    is hours."""

    def __init__(self, total: int, already_done: int = 0, quiet: bool = False):
        self.total, self.done, self.quiet = total, already_done, quiet
        self.start, self.measured = time.monotonic(), 0

    def say(self, msg: str) -> None:
        if not self.quiet:
            print(f"[run] {msg}", file=sys.stderr, flush=True)

    def cell_done(self, label: str, outcome: str, measured: bool = True) -> None:
        self.done += 1
        self.measured += measured
        elapsed = time.monotonic() - self.start
        eta = hms(elapsed / self.measured * (self.total - self.done)) if self.measured else "?"
        bar = "#" * int(20 * self.done / self.total)
        self.say(f"[{bar:<20}] {self.done}/{self.total} {hms(elapsed)} elapsed, ETA {eta} | {label} | {outcome}")


def hms(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
