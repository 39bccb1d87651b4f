"""CPU priority for what is measured: the servers and clients get a CPU as soon as they wake, ahead
of pqbench's own work (the runner, its store) and of anything else on the machine.

Why: a handshake that waits for a CPU is timed longer than the protocol makes it. Linux's EEVDF
scheduler lets a running task finish its slice (1.4 ms on 2 CPUs) before a task that just woke, and
shares the CPU between sessions ("autogroups") before it shares it between tasks. On this project's
2-core VM, with other sessions compiling, a secp256r1 handshake at 30.9 ms RTT (8 workers) took a
median 68-88 ms instead of 63.4 (p95 96-368 ms); with the session's autogroup at nice -20 the
median was 63.8-63.9 (p95 66), measured in alternating runs (bench/bench_grids.py's note).

So, while a testbed is up:
- the measured processes run at real-time priority MEASURED_FIFO (SCHED_FIFO, below pqlink's
  forwarding threads at 50): a waking server or client takes a CPU from any normal task at once,
  where a normal task had to wait for the running one's slice or for the load balancer to move it
  (pqtimer's own run-queue wait, from the kernel's schedstat, was the late samples' excess: 1.5-5 ms).
  Paired on the issue's lossy grid (bench/bench_grids.py fifo4 vs lanes4, three times, 1000 samples
  per cell, the reference at parallel 1 had 0.5 % and 0.3 % of its samples out of the clean mode):
  0.8 / 2.5 / 1.3 % against 2.5 / 5.1 / 5.0 % at 10 % loss, 1.1 / 2.0 / 0.6 % against 1.9 / 2.1 / 2.8 %
  at 15 %. Where real-time priority is refused they run with a 0.1 ms slice (Linux >= 6.12 lets a
  waking task with a shorter slice preempt) and at nice MEASURED_NICE instead; either way ahead of the
  runner inside pqbench's session. The kernel keeps 5 % of each CPU for normal tasks (RT throttling),
  and Auto keeps the measured load far below that; and
- pqbench's session (its autogroup, where the kernel groups by session) runs at nice SESSION_NICE
  against other sessions; the old value is restored when the last testbed of the process closes.
Both need root (CAP_SYS_NICE); where the kernel or the policy refuses, things stay as they were and
`settings()` says so (it is part of a run's provenance).

A process inherits its parent thread's slice and nice across fork and exec, so `measured()` sets the
calling thread's only around spawning a process.

Go programs (quic-go, Go's crypto/tls and SSH) never run real-time: Go's runtime makes its threads wait for
each other by spinning (its locks, the background sweeper's yield loop), which assumes the kernel shares a
CPU between them. At SCHED_FIFO a spinning thread keeps the CPU from its own sibling of equal priority that
holds what it waits for; with two such programs on 2 CPUs both spun at 95 % for minutes (every sample a
timeout, their signals undelivered; perf: runtime.lock2 under bgsweep's Gosched). Browsers are the same
(Firefox at FIFO spun at 95 % for 7 minutes). These get the nice and slice instead, which still take a CPU
from normal tasks at once on Linux >= 6.12 (realtime_safe; a browser's worker stays real-time, as the
probes' Python sink must: read late, a backlog read in one go made the calibration's goodput 1.07 x the
link's rate).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import mmap
import os
import struct
import threading
from pathlib import Path

# The shortest slice Linux accepts. PQBENCH_MEASURED_SLICE_NS=0, PQBENCH_SESSION_NICE=0 or PQBENCH_PRIORITY=0 turn
# priorities off (for A/B benchmarks).
SLICE_NS = int(os.environ.get("PQBENCH_MEASURED_SLICE_NS", 100_000))
PRIORITY = os.environ.get("PQBENCH_PRIORITY", "1") != "0"
MEASURED_NICE = -10
SESSION_NICE = int(os.environ.get("PQBENCH_SESSION_NICE", -20))
# Real-time (SCHED_FIFO) priority of measured processes; PQBENCH_MEASURED_FIFO=0: nice and slice instead.
MEASURED_FIFO = int(os.environ.get("PQBENCH_MEASURED_FIFO", 10))
_SYS_SCHED_SETATTR, _SYS_SCHED_GETATTR = 314, 315  # x86_64
_ATTR = "IIQiIQQQII"  # struct sched_attr up to util_max (56 bytes)
_ATTR_SIZE = struct.calcsize(_ATTR)
_AUTOGROUP = Path("/proc/self/autogroup")
_libc = ctypes.CDLL(None, use_errno=True)
_lock = threading.Lock()
_boosts = 0  # testbeds of this process that are up
_saved_session_nice: int | None = None


def _getattr() -> tuple:
    buf = ctypes.create_string_buffer(_ATTR_SIZE)
    if _libc.syscall(_SYS_SCHED_GETATTR, 0, buf, _ATTR_SIZE, 0) != 0:
        raise OSError(ctypes.get_errno(), "sched_getattr")
    return struct.unpack(_ATTR, buf.raw)


def _setattr(policy: int, flags: int, nice: int, priority: int, runtime: int) -> None:
    buf = ctypes.create_string_buffer(struct.pack(_ATTR, _ATTR_SIZE, policy, flags, nice, priority, runtime,
                                                  0, 0, 0, 0))
    if _libc.syscall(_SYS_SCHED_SETATTR, 0, buf, 0) != 0:
        raise OSError(ctypes.get_errno(), "sched_setattr")


def thread_sched() -> dict:
    """The calling thread's policy, real-time priority, slice (ns) and nice as the kernel reports them."""
    tid = threading.get_native_id()
    out = {"policy": {os.SCHED_OTHER: "other", os.SCHED_FIFO: "fifo"}.get(os.sched_getscheduler(tid), "other"),
           "rt_priority": os.sched_getparam(tid).sched_priority, "nice": os.getpriority(os.PRIO_PROCESS, tid)}
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/sched") as f:
            for line in f:
                if line.startswith("se.slice"):
                    out["slice_ns"] = int(line.split(":")[1])
    except (OSError, ValueError):
        pass
    return out


_GO_BUILDINFO = b"\xff Go buildinf:"  # the magic that opens a Go binary's .go.buildinfo section


def realtime_safe(program: str | os.PathLike) -> bool:
    """Whether program may run at real-time priority: not a Go program (see the module's note; a browser is
    started by its measured worker, and leaves real-time itself: leave_realtime)."""
    try:
        st = os.stat(program)
    except OSError:
        return True  # a name found on PATH, or missing: the spawn says what is wrong
    return not _is_go_binary(os.fspath(program), st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _is_go_binary(path: str, mtime_ns: int) -> bool:
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m.find(_GO_BUILDINFO) >= 0
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def measured(realtime: bool = True):
    """The calling thread (and what it spawns meanwhile) runs as measured processes do: real-time (unless
    not realtime), else with their slice and nice; a kernel or policy that refuses all of it leaves the thread
    as it was."""
    try:
        policy, flags, nice, prio, runtime = _getattr()[1:6]
    except OSError:
        yield
        return
    if policy != os.SCHED_OTHER or not PRIORITY:
        yield
        return
    tries = ([(os.SCHED_FIFO, 0, MEASURED_FIFO, 0)] if MEASURED_FIFO and realtime else []) + [
        (policy, MEASURED_NICE, prio, SLICE_NS), (policy, nice, prio, SLICE_NS)]  # last: the slice alone
    for t_policy, t_nice, t_prio, t_runtime in tries:
        try:
            _setattr(t_policy, flags, t_nice, t_prio, t_runtime)
            break
        except OSError:
            continue
    else:
        yield
        return
    try:
        yield
    finally:
        _setattr(policy, flags, nice, prio, runtime)


def leave_realtime() -> None:
    """The calling thread (and what it spawns after) leaves real-time priority for the nice and slice Go
    programs get: for a program spawned by a measured one that must not run real-time either (a browser,
    whose many threads wait for each other; see the module's note). Safe in a forked child before exec."""
    try:
        policy, flags, nice, _, _ = _getattr()[1:6]
    except OSError:
        return
    if policy != os.SCHED_FIFO:
        return
    for t_nice in (MEASURED_NICE, 0):
        try:
            _setattr(os.SCHED_OTHER, flags, t_nice, 0, SLICE_NS)
            return
        except OSError:
            continue


def _session_nice() -> int | None:
    try:
        return int(_AUTOGROUP.read_text().split("nice")[1])
    except (OSError, IndexError, ValueError):
        return None  # no autogroups (a kernel without them, or a task in a cgroup)


def boost_session() -> None:
    """pqbench's session ahead of other sessions, while a testbed is up (counted; see release)."""
    global _boosts, _saved_session_nice
    with _lock:
        _boosts += 1
        if _boosts > 1 or not PRIORITY:
            return
        _saved_session_nice = _session_nice()
        if _saved_session_nice is not None and _saved_session_nice > SESSION_NICE:
            try:
                _AUTOGROUP.write_text(str(SESSION_NICE))
            except OSError:
                _saved_session_nice = None  # not allowed: nothing to restore


def release_session() -> None:
    global _boosts, _saved_session_nice
    with _lock:
        _boosts = max(0, _boosts - 1)
        if _boosts or _saved_session_nice is None:
            return
        try:
            _AUTOGROUP.write_text(str(_saved_session_nice))
        except OSError:
            pass
        _saved_session_nice = None


def settings() -> dict:
    """What measured processes get on this machine (provenance)."""
    with measured():
        got = thread_sched()
    with measured(realtime=False):
        go = thread_sched()
    return {**got, "go_programs": go, "session_nice": _session_nice() if _boosts else None, "enabled": PRIORITY}
