"""Nothing outlives its owner: a guardian process per pqbench process removes what it made once it is gone.

A pqbench process killed with SIGKILL runs no teardown: its namespaces, its emulator, its servers and clients
would stay until the next pqbench command reaped them (registry.reap_stale). So the first time a pqbench
process makes something that must not outlive it, it starts a guardian (`python -m pqbench.testbed.lifeline`)
in a process group of its own, holding the read end of a pipe whose write end only the owner has. The owner's
death, however it comes, closes the pipe; the guardian then ends the processes the owner asked it to watch
(with their descendants) and removes the owner's testbeds from the registry, namespaces and devices too.

A process to watch is told to the guardian by its pid and start time (so a reused pid is never signalled); a
command to run once the owner is gone (after), by its argv: what undoes a change outside the owner's things. An
owner that ends normally has torn everything down already: its guardian then finds nothing to do. Testbeds
started `detached` (`pqbench net up`) outlive their owner on purpose and are left alone (registry.stale).
"""

from __future__ import annotations

import faulthandler
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

from pqbench.testbed import registry

_lock = threading.Lock()
_pipe: dict = {}  # {"pid": owner pid, "fd": write end, "guardian": Popen}: per process (a fork starts anew)
GRACE_S = 1.0  # SIGTERM first: a server may remove its own files; then SIGKILL
LOOK_S = 0.2  # how often a guardian waiting for input looks whether its owner is still there
AFTER = "after "  # a line of the pipe that names a command to run at the end, not a process to watch
AFTER_TIMEOUT_S = 30.0
REPORT_S = 5.0  # a guardian still at work this long after its owner died writes its stack to its log (log_path)


def ensure() -> None:
    """Starts this process's guardian unless it runs already."""
    with _lock:
        _ensure()


def _ensure() -> int:
    if _pipe.get("pid") == os.getpid() and _pipe["guardian"].poll() is None:
        return _pipe["fd"]
    if _pipe.get("pid") == os.getpid():  # the guardian died (killed by hand): a new one takes over
        os.close(_pipe["fd"])
    read, write = os.pipe()  # both ends non-inheritable: no child of ours holds the pipe open
    # A process group of its own: a signal to the owner's group (a terminal's Ctrl-C) does not reach it. Not a
    # session of its own: the kernel shares the CPUs between sessions (autogroups) first, and pqbench's session
    # runs at nice -20 (testbed.sched), so a guardian in a session at nice 0 beside busy pqbench sessions got so
    # little CPU that, on a CI machine, it had not started 30 s after its owner was killed.
    owner = registry.proc_ref(os.getpid())
    try:
        guardian = subprocess.Popen([sys.executable, "-m", "pqbench.testbed.lifeline", str(owner["pid"]),
                                     str(owner["start"])], stdin=read, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, process_group=0,
                                    env={**os.environ, "PYTHONPATH": _src_path()})
    finally:
        os.close(read)
    _pipe.update(pid=os.getpid(), fd=write, guardian=guardian, afters=set())
    return write


def _src_path() -> str:
    """Where this pqbench is imported from, first on the guardian's path (a checkout run with PYTHONPATH)."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)


def after(argv: list[str]) -> None:
    """argv runs once this process is gone (after its watched processes have ended), however it ends: what undoes a
    change outside its own things (a machine-wide file) when no teardown of its own will run."""
    with _lock:
        fd = _ensure()
        if tuple(argv) in _pipe["afters"]:
            return  # once per guardian: it runs each command once
        os.write(fd, f"{AFTER}{json.dumps(argv)}\n".encode())  # one short write: atomic on a pipe (< PIPE_BUF)
        _pipe["afters"].add(tuple(argv))


def watch(pid: int) -> None:
    """The process pid (a child of ours) ends when this process does, whatever ends it."""
    ref = registry.proc_ref(pid)
    if ref["start"] is None:
        return  # already ended
    with _lock:
        fd = _ensure()
        os.write(fd, f"{ref['pid']} {ref['start']}\n".encode())  # one short write: atomic on a pipe


def popen(argv: list[str], **kwargs) -> subprocess.Popen:
    """subprocess.Popen, and the process is watched: it dies with this process."""
    proc = subprocess.Popen(argv, **kwargs)
    watch(proc.pid)
    return proc


# --- the guardian ------------------------------------------------------------------------------------

def _descendants(roots: list[dict]) -> list[dict]:
    """The watched processes still alive and everything they started, deepest first."""
    # each process's start time read with its parent: a child that ends meanwhile may see its pid taken by another
    table = registry.processes()
    tree, out = registry.children(table), []

    def visit(ref: dict) -> None:
        for child in tree.get(ref["pid"], []):
            visit({"pid": child, "start": table[child][1]})
        out.append(ref)
    for ref in roots:
        if registry.is_alive(ref):
            visit(ref)
    return [r for r in out if r["start"] is not None]


def end_processes(refs: list[dict], grace: float = GRACE_S) -> None:
    """SIGTERM to each process (checked by start time), SIGKILL to those left after grace seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for ref in refs:
            if registry.is_alive(ref):
                try:
                    os.kill(ref["pid"], sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        while any(registry.is_alive(r) for r in refs) and time.monotonic() < deadline:
            time.sleep(0.02)


def lines_until_gone(owner: dict, fd: int = 0):
    """The lines the owner writes on the pipe (fd), until the pipe closes or the owner is gone: a process that
    inherited the pipe's write end (a child forked but not yet exec'd when the owner died) would otherwise keep
    the guardian waiting for an end of input that never comes."""
    pending = b""
    while True:
        ready, _, _ = select.select([fd], [], [], LOOK_S)
        if ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            pending += chunk
            *done, pending = pending.split(b"\n")
            yield from (line.decode() for line in done if line.strip())
        elif not registry.is_alive(owner):
            break
    if pending.strip():
        yield pending.decode()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def log_path(owner_pid: int) -> Path:
    """What the guardian of owner_pid is doing, while it runs (removed when its work is done): where it waits,
    its stack every REPORT_S once its owner died, and on SIGUSR1 (a test that finds it alive asks)."""
    return registry.RUN_ROOT / "guardians" / f"{owner_pid}.log"


def guard(owner: dict, lines, log) -> None:
    """Reads the processes to watch until the owner is gone (end of input), then ends them and removes
    the owner's testbeds."""
    watched, afterwards = [], []
    for line in lines:
        if line.startswith(AFTER):
            afterwards.append(json.loads(line[len(AFTER):]))
            continue
        pid, start = line.split()
        watched.append({"pid": int(pid), "start": int(start)})
    faulthandler.dump_traceback_later(REPORT_S, repeat=True, file=log)  # a guardian at work is never silent
    try:
        log.write(f"input ended; owner {owner['pid']}: {_state(owner['pid'])}\n")
        log.flush()
        while registry.is_alive(owner):  # the pipe closes as the owner exits; it is gone a moment later
            time.sleep(0.01)
        log.write(f"owner {owner['pid']} gone; ending {len(watched)} watched process trees\n")
        log.flush()
        end_processes(_descendants(watched))
        log.write("reaping the owner's testbeds\n")
        log.flush()
        registry.reap_stale()
        for argv in afterwards:
            log.write(f"running {argv}\n")
            log.flush()
            try:
                subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, timeout=AFTER_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired) as e:
                log.write(f"{argv[0]}: {e}\n")
    except BaseException:
        traceback.print_exc(file=log)
        raise
    finally:
        faulthandler.cancel_dump_traceback_later()


def main(argv: list[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # a Ctrl-C meant for the owner, or its terminal closing
    owner = {"pid": int(argv[0]), "start": int(argv[1])}
    path = log_path(owner["pid"])
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as log:
        faulthandler.register(signal.SIGUSR1, file=log)
        log.write(f"guardian {os.getpid()} of {owner['pid']}: reading what to watch\n")
        log.flush()
        guard(owner, lines_until_gone(owner), log)
        log.write("done\n")
    path.unlink()  # done: nothing to tell
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
