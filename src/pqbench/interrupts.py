"""Ctrl-C and SIGTERM taken at a point of our choosing while threads work for the main thread.

Python runs a signal's handler in the main thread between two bytecodes, wherever that thread is. A handler
that raises (KeyboardInterrupt, the testbed's TestbedInterrupted) can so leave a lock of the threading
module acquired and never released: `concurrent.futures.wait` takes every future's condition in a Python
loop, and an exception raised between two of those acquisitions skips their release. A lane thread then
blocks forever setting its future's result, and the pool's shutdown waits forever for it: that was the
deadlock of an interrupted `pqbench run` (every thread in a futex wait, its servers still up hours later).

`deferred()` replaces the handlers by ones that only note the signal; the caller looks at `arrived` when it
is safe, winds its threads down, and when the block ends the signal is raised again with the handlers that
were there before, so it ends the command as it always did.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Pending:
    """The first signal that arrived in a deferred() block (None: none yet)."""

    def __init__(self):
        self.signum: int | None = None

    @property
    def arrived(self) -> bool:
        return self.signum is not None

    def drop(self) -> None:
        """The signal came too late to stop anything: it is not raised again when the block ends."""
        self.signum = None

    def _note(self, signum, _frame) -> None:
        # Only an assignment: the handler may run while this very thread holds any lock.
        if self.signum is None:
            self.signum = signum


@contextmanager
def deferred():
    """Within the block, SIGINT and SIGTERM are noted (Pending.arrived), not raised; the first of them is
    raised again when the block ends. Outside the main thread (no handlers there) nothing changes."""
    pending = Pending()
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return
    old = {sig: signal.signal(sig, pending._note) for sig in SIGNALS}
    try:
        yield pending
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        if pending.signum is not None:
            signal.raise_signal(pending.signum)  # handled now, by the handler it would have met
