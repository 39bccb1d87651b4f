"""CPU time of a process tree from the kernel's own accounting, and CPU pinning.

A server's tree is the processes the rig started on its side and all their descendants. A process's
own time comes from its CPU clock (clock_gettime on the process's clock id: nanoseconds, all its
threads, living and ended), because stat's utime + stime count whole ticks (10 ms), coarser than a
short step of fast handshakes. Children it has reaped are only in stat's cutime + cstime (ticks), so
a server that forks per connection (sshd) keeps its exited sessions' CPU in its listener's count."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pqbench.testbed import registry

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # after "pid (comm) ": state is field 0 here


def tree(roots: list[int]) -> list[int]:
    """The live processes among roots and their descendants."""
    kids, seen, todo = registry.children(), set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen or _stat(pid) is None:
            continue
        seen.add(pid)
        todo += kids.get(pid, [])
    return sorted(seen)


def _process_clock(pid: int) -> int:
    """The clock id of a process's CPU time (the kernel's MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED))."""
    return ((~pid) << 3) | 2


def own_seconds(pid: int) -> float | None:
    """CPU seconds so far of one process, all its threads, to the nanosecond; None once it is gone."""
    try:
        return time.clock_gettime_ns(_process_clock(pid)) / 1e9
    except OSError:
        return None


def seconds(roots: list[int]) -> float:
    """CPU seconds so far of the tree under roots: its processes' own time and their reaped children's."""
    total = 0.0
    for pid in tree(roots):
        f, own = _stat(pid), own_seconds(pid)
        if f is None or own is None:  # ended meanwhile: its time reaches its parent's reaped count
            continue
        total += own + sum(int(v) for v in f[13:15]) * TICK_S  # cutime, cstime: fields 16-17 of stat
    return total


def pin(roots: list[int], cpus: set[int]) -> None:
    """Every thread of every process of the tree onto cpus; what they start later inherits it."""
    for pid in tree(roots):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:  # a process that ended meanwhile
            continue
        for tid in tids:
            try:
                os.sched_setaffinity(int(tid), cpus)
            except OSError:  # a thread that ended meanwhile
                pass


def split() -> tuple[set[int], set[int]] | None:
    """(server CPUs, client CPUs): the machine's CPUs in two halves, the server's first; None with one."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    half = len(cpus) // 2
    return set(cpus[half:]), set(cpus[:half])
