"""The sampler's shared counter (pqbench.measure.sampler): each sample takes the next index from an 8-byte
native-order counter in a file. Python workers (the browsers', strongSwan's) take it under an exclusive lock."""

from __future__ import annotations

import fcntl
import os
import sys


class Claims:
    def __init__(self, path: str | None, count: int):
        """path None: this worker takes indices 0..count-1 alone (a probe)."""
        self.path, self.count, self._next = path, count, 0

    def next(self) -> int | None:
        """The next sample index, or None when every sample is taken."""
        if self.path is None:
            i, self._next = self._next, self._next + 1
        else:
            fd = os.open(self.path, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                i = int.from_bytes(os.pread(fd, 8, 0), sys.byteorder)
                os.pwrite(fd, (i + 1).to_bytes(8, sys.byteorder), 0)
            finally:
                os.close(fd)
        return i if i < self.count else None
