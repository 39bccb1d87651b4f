"""Nothing outlives its owner: a pqbench process killed with SIGKILL leaves no process, namespace or device."""

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT
from pqbench.testbed import lifeline, netns, registry

pytestmark = pytest.mark.root
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src"))


def descendants(pid: int) -> list[dict]:
    return [r for r in lifeline._descendants([registry.proc_ref(pid)]) if r["pid"] != pid]


def guardian_of(pid: int) -> list[int]:
    """The pids of the guardians watching pid (their command line names it)."""
    out = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"pqbench.testbed.lifeline" in args and str(pid).encode() in args:
            out.append(int(entry))
    return out


def guardian_log(owner_pid: int) -> list[str]:
    """What the owner's guardian, if it still runs, is doing: it writes its stack to its log on SIGUSR1."""
    for g in guardian_of(owner_pid):
        with contextlib.suppress(OSError):
            os.kill(g, signal.SIGUSR1)
    time.sleep(0.2)
    try:
        return [f"guardian log: {lifeline.log_path(owner_pid).read_text()[-4000:]}"]
    except OSError:
        return []


def why_alive(pid: int) -> str:
    """A process a test found still alive, for its failure message: what it runs, its state and parent, where it
    waits in the kernel and, for a guardian, what it is doing (guardian_log of its owner)."""
    try:
        args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        kernel = Path(f"/proc/{pid}/stack").read_text().replace("\n", " | ")
    except OSError:
        return f"{pid}: gone"
    out = f"{pid} {b' '.join(args).decode(errors='replace')} (state {stat[0]}, parent {stat[1]}; kernel: {kernel})"
    if b"pqbench.testbed.lifeline" in args:
        out += " " + " ".join(guardian_log(int(args[args.index(b"pqbench.testbed.lifeline") + 1])))
    return out


def owned_by(pid: int) -> dict:
    return {n: r for n, r in registry.all_records().items() if (r.get("owner") or {}).get("pid") == pid}


def wait_until_gone(victim: int, things: dict, processes: list[dict], timeout=10.0) -> list:
    """What is still there after timeout seconds: the victim's records, namespaces, devices, processes."""
    tags = {n.split("-", 1)[1] for n in things}
    deadline = time.monotonic() + timeout
    while True:
        left = [f"record {n}" for n in owned_by(victim)]
        left += [f"namespace {ns}" for r in things.values() for ns in r.get("namespaces", []) if netns.exists(ns)]
        left += [f"device {d}" for d in registry.host_devices() if any(t in d for t in tags)]
        left += [f"process {r['pid']}" for r in processes if registry.is_alive(r)]
        left += [f"guardian {g}" for g in guardian_of(victim)]
        if not left or time.monotonic() > deadline:
            return left + guardian_log(victim)
        time.sleep(0.1)


def test_the_guardian_shares_its_owner_s_session_in_a_process_group_of_its_own():
    """The kernel shares CPU time between sessions (autogroups) before tasks: a guardian in a session of its own
    (nice 0) starved beside pqbench's sessions at nice -20. In its owner's session, it has the owner's share; in
    a group of its own, a signal to the owner's group (Ctrl-C) does not reach it."""
    code = ("import os, time\n"
            "from pqbench.testbed import lifeline\n"
            "lifeline.ensure()\n"
            "g = lifeline._pipe['guardian']\n"
            "print(os.getsid(0), os.getpgid(0), g.pid, flush=True)\n"
            "time.sleep(600)\n")
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=ENV,
                             start_new_session=True)
    try:
        sid, pgid, guardian = map(int, owner.stdout.readline().split())
        # (the pid the owner started, not one found by its command line: once, in a parallel pass, none was found)
        assert guardian_of(owner.pid) == [guardian], \
            f"guardian {guardian}: {Path(f'/proc/{guardian}/stat').read_text() if Path(f'/proc/{guardian}').exists() else 'gone'}"
        assert os.getsid(guardian) == sid and os.getpgid(guardian) not in (pgid, sid)
        if Path(f"/proc/{guardian}/autogroup").exists():
            assert Path(f"/proc/{guardian}/autogroup").read_text().split()[0] == \
                Path(f"/proc/{owner.pid}/autogroup").read_text().split()[0]
    finally:
        owner.kill()
        owner.wait()


def test_a_watched_process_dies_with_its_owner():
    """A process told to the guardian, and what it started, end when its owner ends by SIGKILL."""
    code = ("import subprocess, sys, time\n"
            "from pqbench.testbed import lifeline\n"
            "p = lifeline.popen(['sh', '-c', 'sleep 600 & sleep 600'])\n"
            "print(p.pid, flush=True)\n"
            "time.sleep(600)\n")
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=ENV)
    child = int(owner.stdout.readline())
    time.sleep(0.2)  # sh has started its two sleeps
    family = [registry.proc_ref(child)] + descendants(child)
    assert len(family) == 3 and all(registry.is_alive(r) for r in family)
    owner.kill()
    owner.wait()
    assert wait_until_gone(owner.pid, {}, family) == []


def test_the_guardian_acts_when_its_owner_dies_though_a_forked_child_holds_the_pipe():
    """The guardian learns of its owner's death by the pipe's end, and by looking at the owner: a child the owner
    forked without exec holds the pipe's write end open (as one caught between fork and exec would), and the
    watched process must still end with the owner."""
    code = ("import os, sys, time\n"
            "from pqbench.testbed import lifeline\n"
            "p = lifeline.popen(['sleep', '600'])\n"
            "child = os.fork()\n"
            "if child == 0:\n"
            "    time.sleep(600)\n"
            "    os._exit(0)\n"
            "print(p.pid, child, flush=True)\n"
            "time.sleep(600)\n")
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=ENV)
    watched, forked = map(int, owner.stdout.readline().split())
    refs = [registry.proc_ref(watched)]
    try:
        owner.kill()
        owner.wait()
        assert wait_until_gone(owner.pid, {}, refs) == []
    finally:
        os.kill(forked, signal.SIGKILL)


@pytest.mark.parametrize("command", [
    ["handshake", "--kex", "X25519", "--sig", "ecdsap256", "--rtt", "5ms", "-n", "100000", "--parallel", "2"],
    ["net", "calibrate", "--rtt", "2ms"],
])
def test_sigkill_at_random_moments_leaves_nothing(built_stack, command):
    """Killed at random points (making the testbed, starting servers, measuring): within 10 s nothing of the
    killed process is left, without another pqbench command running."""
    rng = random.Random(os.getpid())
    for delay in sorted(rng.uniform(0.3, 4.0) for _ in range(3)):
        victim = subprocess.Popen([sys.executable, "-m", "pqbench", *command], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, env=ENV)
        time.sleep(delay)
        things = owned_by(victim.pid)
        processes = descendants(victim.pid)
        processes += [registry.proc_ref(p) for r in things.values() for ns in r["namespaces"] if netns.exists(ns)
                      for p in netns.pids(ns)]
        victim.kill()
        victim.wait()
        time.sleep(0.3)  # a namespace being made as the owner died shows up in its record now
        things.update(owned_by(victim.pid))
        assert wait_until_gone(victim.pid, things, processes) == [], f"killed after {delay:.1f} s"


def test_a_process_found_earlier_is_killed_only_if_its_pid_is_still_it():
    """A pid noted in a namespace or a record may name another process by the time it is killed (pid_max 32768:
    the suite reuses pids within minutes): kill leaves a process whose start time is not the one noted."""
    proc = subprocess.Popen(["sleep", "60"])
    try:
        ref = registry.proc_ref(proc.pid)
        assert registry.kill({"pid": proc.pid, "start": ref["start"] - 1})  # "gone": the process noted was another
        assert proc.poll() is None
        assert registry.kill_all([proc.pid]) == [proc.pid] and not registry.is_alive(ref)  # (kill reaped it)
    finally:
        proc.kill()
        proc.wait()
