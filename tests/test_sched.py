"""CPU priority of measured processes: what a process spawned for a testbed gets, and that pqbench's
own thread and session get their settings back."""

import os
import subprocess
import sys
import time

import pytest

from pqbench.testbed import sched

pytestmark = pytest.mark.root  # raising priority needs CAP_SYS_NICE

SHOW = ("import os; print(os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0), "
        "os.sched_getparam(0).sched_priority); print(open('/proc/self/sched').read())")


def _child(env=None) -> tuple[int, int, int, int | None]:
    """(nice, policy, real-time priority, slice) of a process spawned now."""
    out = subprocess.run([sys.executable, "-c", SHOW], capture_output=True, text=True, check=True, env=env).stdout
    nice, policy, prio = map(int, out.split("\n", 1)[0].split())
    slice_ns = next((int(line.split(":")[1]) for line in out.splitlines() if line.startswith("se.slice")), None)
    return nice, policy, prio, slice_ns


def test_a_process_spawned_for_a_testbed_runs_at_real_time_priority_and_the_spawning_thread_is_restored():
    before = sched.thread_sched()
    plain = _child()
    with sched.measured():
        boosted = _child()
        assert sched.thread_sched()["policy"] == "fifo"
    assert sched.thread_sched() == before and before["policy"] == "other"
    assert plain[1:3] == (os.SCHED_OTHER, 0)
    assert boosted[1:3] == (os.SCHED_FIFO, sched.MEASURED_FIFO), "a child inherits SCHED_FIFO across fork and exec"
    assert 0 < sched.MEASURED_FIFO < 50  # below pqlink's forwarding threads: the link stays on time


def test_without_real_time_a_spawned_process_gets_the_short_slice_and_nice(monkeypatch):
    monkeypatch.setattr(sched, "MEASURED_FIFO", 0)
    before = sched.thread_sched()
    plain = _child()
    with sched.measured():
        boosted = _child()
    assert sched.thread_sched() == before
    assert plain[0] == before["nice"] and boosted[:2] == (sched.MEASURED_NICE, os.SCHED_OTHER)
    if plain[3] is not None and plain[3] != sched.SLICE_NS:  # a kernel that reports slices (>= 6.6)
        assert boosted[3] == sched.SLICE_NS, "the kernel took the short slice (Linux >= 6.12)"


def test_the_session_is_boosted_while_a_testbed_is_up_and_restored_after_the_last():
    before = sched._session_nice()
    if before is None:
        pytest.skip("no autogroups here (kernel without them, or pqbench in a cgroup)")
    sched.boost_session()
    sched.boost_session()  # a second testbed (lanes)
    assert sched._session_nice() == sched.SESSION_NICE
    sched.release_session()
    assert sched._session_nice() == sched.SESSION_NICE  # one testbed still up
    sched.release_session()
    assert sched._session_nice() == before


GO_SLEEPER = 'package main\nimport "time"\nfunc main() { time.Sleep(30 * time.Second) }\n'


@pytest.fixture(scope="module")
def go_program(tmp_path_factory):
    """A real Go binary (any Go program carries the runtime whose threads spin for each other)."""
    d = tmp_path_factory.mktemp("gosleeper")
    (d / "main.go").write_text(GO_SLEEPER)
    (d / "go.mod").write_text("module sleeper\n\ngo 1.22\n")
    env = {**os.environ, "GOTOOLCHAIN": "local"}  # the Go the stacks are built with (scripts/go-env.sh)
    subprocess.run(["go", "build", "-o", str(d / "sleeper"), "."], cwd=d, env=env, check=True, capture_output=True,
                   timeout=300)
    return d / "sleeper"


def test_a_go_program_is_spawned_with_the_nice_and_slice_not_real_time(go_program):
    """At SCHED_FIFO a Go program's runtime livelocks on a busy machine (sched's note): Testbed.popen asks
    realtime_safe, which finds Go's build-info magic in the binary, and a C program still runs real-time."""
    assert not sched.realtime_safe(go_program)
    assert sched.realtime_safe("/bin/sleep") and sched.realtime_safe("/usr/sbin/nginx")
    assert sched.realtime_safe(sys.executable)  # a browser's worker: its browser leaves real-time (leave_realtime)
    assert sched.realtime_safe("no-such-program-anywhere")  # the spawn, not this, says it is missing
    before = sched.thread_sched()
    procs = []
    try:
        for program in (go_program, "/bin/sleep"):
            with sched.measured(realtime=sched.realtime_safe(program)):
                procs.append(subprocess.Popen([str(program), *(["30"] if program == "/bin/sleep" else [])]))
        go, c = procs
        assert os.sched_getscheduler(go.pid) == os.SCHED_OTHER
        assert os.getpriority(os.PRIO_PROCESS, go.pid) == sched.MEASURED_NICE
        assert (os.sched_getscheduler(c.pid), os.sched_getparam(c.pid).sched_priority) == (os.SCHED_FIFO,
                                                                                            sched.MEASURED_FIFO)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert sched.thread_sched() == before
    assert sched.settings()["go_programs"]["policy"] == "other"


def test_a_program_a_measured_one_spawns_can_leave_real_time():
    """A browser started by its measured worker (endpoints/chromium) leaves SCHED_FIFO in the child, before exec."""
    before = sched.thread_sched()
    with sched.measured():
        child = subprocess.Popen(["/bin/sleep", "30"], preexec_fn=sched.leave_realtime)
    try:
        assert os.sched_getscheduler(child.pid) == os.SCHED_OTHER
        assert os.getpriority(os.PRIO_PROCESS, child.pid) == sched.MEASURED_NICE
    finally:
        child.kill()
        child.wait()
    assert sched.thread_sched() == before


def test_the_cpu_stall_probe_reports_the_cpu_real_time_work_takes_from_a_normal_priority_thread():
    """probe.cpu_stalls, as a run's calibration measures a browser's floor: a real-time loop that takes 5 ms of
    every 10 on the probe's CPU keeps the probe's normal-priority thread off it for up to 5 ms at a time, about one
    1-ms chunk in six (more load elsewhere only adds)."""
    from pqbench.testbed import probe
    from pqbench.testbed.calibrate import percentiles
    cpu = min(os.sched_getaffinity(0))
    steal = subprocess.Popen([sys.executable, "-c", f"""
import os, time
os.sched_setaffinity(0, {{{cpu}}})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
t = time.monotonic()
while True:
    while time.monotonic() < t + 0.005:
        pass
    t += 0.01
    time.sleep(max(0.0, t - time.monotonic()))
"""])
    saved = os.sched_getaffinity(0)
    try:
        time.sleep(0.2)
        os.sched_setaffinity(0, {cpu})  # the probe's thread inherits the CPU of the thread that starts it
        stalls = percentiles(probe.cpu_stalls(100))
    finally:
        os.sched_setaffinity(0, saved)
        steal.kill()
        steal.wait()
    assert stalls["n"] == 100 and stalls["p95"] > 2.5, stalls
