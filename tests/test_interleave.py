"""schedule.run_interleaved: cells overlap only in their tails; errors stop the others, keep the finished."""

import threading
import time

import pytest

from pqbench.measure.sampler import Cancelled
from pqbench.measure.schedule import TAIL_GRACE_S, run_interleaved


class Script:
    """Fake cells: each waits for its own 'tail' and 'finish' gates; records what ran when."""

    def __init__(self, names, blind=()):
        self.blind = set(blind)  # cells that no longer look at `stop` once in their tail
        self.gates = {n: (threading.Event(), threading.Event()) for n in names}
        self.started, self.saved, self.lanes_used, self.stopped, self.tailed = [], [], {}, [], []
        self.lock = threading.Lock()

    def measure(self, lane, pos, cell, tail, stop):
        with self.lock:
            self.started.append(cell)
            self.lanes_used[cell] = lane
        to_tail, to_finish = self.gates[cell]
        while not to_tail.wait(0.01):
            if stop.is_set():
                self.stopped.append(cell)
                raise Cancelled("stopped")
        tail.set()
        self.tailed.append(cell)
        while not to_finish.wait(0.01):
            if stop.is_set() and cell not in self.blind:
                self.stopped.append(cell)
                raise Cancelled("stopped")
        if cell == "boom":
            raise ValueError("measurement failed")
        return {"cell": cell}, [], "fixed count"

    def save(self, cell, record, samples, why):
        self.saved.append(cell)


def until(condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def run_in_thread(script, lanes, cells):
    errors = []

    def body():
        try:
            run_interleaved(lanes, list(enumerate(cells)), script.measure, script.save)
        except Exception as e:  # noqa: BLE001 - the test looks at it
            errors.append(e)

    t = threading.Thread(target=body)
    t.start()
    return t, errors


def test_next_cell_waits_for_the_tail_and_overlaps_it():
    s = Script(["a", "b", "c"])
    t, errors = run_in_thread(s, ["lane0", "lane1"], ["a", "b", "c"])
    until(lambda: s.started == ["a"])
    time.sleep(0.6)  # a is in its body: nothing else may start
    assert s.started == ["a"]
    s.gates["a"][0].set()  # a reaches its tail
    time.sleep(TAIL_GRACE_S / 2)
    assert s.started == ["a"]  # a short tail (a clean cell's last handshake) is not overlapped
    until(lambda: s.started == ["a", "b"])
    assert s.lanes_used["b"] != s.lanes_used["a"]
    time.sleep(0.6)  # b in its body, both lanes busy: c waits
    assert s.started == ["a", "b"] and s.saved == []
    s.gates["b"][0].set()
    s.gates["b"][1].set()  # b finishes before a: saved first, its lane takes c
    until(lambda: s.saved == ["b"] and s.started == ["a", "b", "c"])
    assert s.lanes_used["c"] == s.lanes_used["b"]
    for name in ("a", "c"):
        s.gates[name][0].set()
        s.gates[name][1].set()
    t.join(5)
    assert not t.is_alive() and not errors
    assert sorted(s.saved) == ["a", "b", "c"]


def test_one_lane_runs_cells_one_after_another():
    s = Script(["a", "b"])
    t, errors = run_in_thread(s, ["lane0"], ["a", "b"])
    until(lambda: s.started == ["a"])
    s.gates["a"][0].set()
    time.sleep(0.6)
    assert s.started == ["a"]  # in its tail, but no free lane
    s.gates["a"][1].set()
    until(lambda: s.started == ["a", "b"])
    s.gates["b"][0].set()
    s.gates["b"][1].set()
    t.join(5)
    assert s.saved == ["a", "b"] and not errors


def test_a_failing_cell_stops_the_others_and_keeps_the_finished():
    s = Script(["done", "boom", "slow"])
    t, errors = run_in_thread(s, ["l0", "l1", "l2"], ["done", "boom", "slow"])
    s.gates["done"][0].set()
    s.gates["done"][1].set()
    until(lambda: s.saved == ["done"])
    s.gates["boom"][0].set()  # boom in its tail: slow starts
    until(lambda: "slow" in s.started)
    s.gates["boom"][1].set()  # boom raises
    t.join(5)
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], ValueError)
    assert s.saved == ["done"] and s.stopped == ["slow"]  # the running cell was stopped, not saved


@pytest.mark.parametrize("lanes", [1, 3])
def test_every_cell_is_measured_once(lanes):
    cells = [f"c{k}" for k in range(7)]
    s = Script(cells)
    for a, b in s.gates.values():
        a.set()
        b.set()
    run_interleaved([f"l{k}" for k in range(lanes)], list(enumerate(cells)), s.measure, s.save)
    assert sorted(s.saved) == sorted(cells) and s.started == cells  # started in the given order


def test_a_cell_finishing_after_another_failed_is_still_saved():
    """A cell past its last look at `stop` (the sampler collecting its samples) completes after the
    failure: it is saved, then the error is raised."""
    s = Script(["boom", "late"], blind=["late"])
    t, errors = run_in_thread(s, ["l0", "l1"], ["boom", "late"])
    s.gates["boom"][0].set()
    until(lambda: s.started == ["boom", "late"])
    s.gates["late"][0].set()
    until(lambda: "late" in s.tailed)  # else late may still see `stop` before its tail and cancel
    s.gates["boom"][1].set()  # boom fails while late is still running
    time.sleep(0.6)
    assert not s.saved and not errors
    s.gates["late"][1].set()
    t.join(5)
    assert not t.is_alive() and len(errors) == 1 and isinstance(errors[0], ValueError)
    assert s.saved == ["late"]


def test_cells_whose_tails_end_quickly_run_one_after_another_on_the_first_lane():
    """Loss-free cells have no stragglers: each next cell waits for the last and takes the first lane,
    so they share one testbed and never overlap."""
    s = Script(["a", "b", "c"])
    t, errors = run_in_thread(s, ["lane0", "lane1", "lane2"], ["a", "b", "c"])
    for name in ("a", "b", "c"):
        until(lambda: name in s.started)
        assert s.lanes_used[name] == "lane0"
        s.gates[name][0].set()
        time.sleep(TAIL_GRACE_S / 4)  # the tail ends well within the grace
        assert s.started[-1] == name
        s.gates[name][1].set()
    t.join(5)
    assert not t.is_alive() and not errors and s.saved == ["a", "b", "c"]


INTERRUPT_SCRIPT = r'''
import concurrent.futures._base as base, os, signal, sys, threading, time
from pqbench.measure.sampler import Cancelled
from pqbench.measure.schedule import run_interleaved

# Ctrl-C lands while the main thread holds the first of the futures' conditions inside
# concurrent.futures.wait (its _AcquireFutures loop): the moment that deadlocked interrupted runs.
enter, sent = base._AcquireFutures.__enter__, []
def enter_with_ctrl_c(self):
    if sent or not self.futures:
        return enter(self)
    self.futures[0]._condition.acquire()
    sent.append(1)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.01)  # the handler runs here, between two bytecodes
    for f in self.futures[1:]:
        f._condition.acquire()
base._AcquireFutures.__enter__ = enter_with_ctrl_c

saved = []
def measure(lane, pos, cell, tail, stop):
    if cell == "quick":
        return {}, [], "done"
    while not stop.wait(0.01):  # a cell in progress until stopped
        pass
    raise Cancelled("stopped")
try:
    run_interleaved(["l0", "l1"], [(0, "slow"), (1, "quick")], measure, lambda c, *a: saved.append(c))
except KeyboardInterrupt:
    print("interrupted", sent, saved, [t.name for t in threading.enumerate() if t.name.startswith("lane")])
'''


def test_ctrl_c_inside_the_futures_locks_ends_the_schedule():
    """The deadlock of an interrupted run: the signal's KeyboardInterrupt, raised while the main thread held
    a future's condition, left it held; the lane then blocked setting its result and the pool's shutdown on
    the lane. Now the signal is noted, the cells in progress stop, and KeyboardInterrupt comes after."""
    import subprocess
    import sys
    from conftest import ROOT
    try:
        cp = subprocess.run([sys.executable, "-c", INTERRUPT_SCRIPT], capture_output=True, text=True, timeout=30,
                            env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    except subprocess.TimeoutExpired:
        pytest.fail("run_interleaved deadlocked after Ctrl-C (no end within 30 s)")
    assert cp.stdout.strip() == "interrupted [1] [] []", cp.stdout + cp.stderr


def test_the_gate_lets_a_cell_start_beside_others_only_in_their_long_tails():
    """What the local schedule and a cluster node's slots ask before a cell starts beside others."""
    from pqbench.measure.schedule import TailGate
    gate, first, second = TailGate(), threading.Event(), threading.Event()
    assert gate.try_enter("a", first)  # nothing in progress
    assert not gate.try_enter("b", second)  # a is in its body
    first.set()
    assert not gate.try_enter("b", second)  # a's tail has only begun
    time.sleep(TAIL_GRACE_S + 0.05)
    assert gate.try_enter("b", second) and not gate.may_start()  # b in its body now holds the next back
    gate.leave("b")
    assert gate.may_start()
