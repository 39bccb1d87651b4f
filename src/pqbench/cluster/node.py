"""A measuring node: the state a `pqbench worker` holds for the runs it measures, and the tasks the driver
sends it.

A run opens on a node with its first task there: the node checks that its versions are the driver's,
reaps testbeds of dead processes, writes the run's credentials (the driver's very files), opens a session
(pqbench.measure.session: one lane per slot), and measures the emulator's floor and the crypto rounds of the
run's algorithms; the first task's result carries that start report to the driver. Each cell then takes a
free lane once the cells in progress on the node are in their tails (schedule.TailGate, as on a local run:
the slots share one CPU budget and overlap only in their tails). Closing the run
measures the floor and the crypto again, tears the lanes down and reaps again (a node killed mid-cell
leaves its testbeds to the others' reaper).

    open_task(ctx)             -> start report (None once delivered)
    measure_task(ctx, pos, cell) -> {"node", "segment", "record", "samples", "why", "start"}
    close_task(attempt, measure_end) -> end report (None when the run never opened here)
    abort(attempt)             (Client.run: stops the run's cells at once)
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import shutil
import threading
import time
from pathlib import Path

from distributed import WorkerPlugin, get_worker

from pqbench import paths
from pqbench.endpoints import ondemand
from pqbench.experiment.spec import Spec
from pqbench.measure import identity, provenance
from pqbench.measure.concurrency import LOOK_S
from pqbench.measure.sampler import Cancelled
from pqbench.measure.schedule import TailGate
from pqbench.measure.session import Session
from pqbench.testbed import LinkSpec, registry

PLUGIN_NAME = "pqbench-node"
RESOURCE = "pqbench_node"  # a node's slots: how many cells it may measure at once
CLOSE_WAIT_S = 120  # how long closing waits for a cell in progress to hand its lane back


@dataclasses.dataclass
class RunContext:
    """What the driver ships to every node for one run (broadcast once)."""
    run_id: str
    spec: Spec
    cells: list  # (position, cell) of every cell to measure, in the run's order: the servers serve them all
    chains: dict  # (protocol, sig) -> Chain / SshKeys, paths under driver_dir
    files: dict  # path relative to driver_dir -> (bytes, mode): the credentials' files, identical everywhere
    driver_dir: str
    versions: dict  # the driver's provenance.of_node: each node must match it (provenance.MATCHED)
    stacks: list
    keep_files: bool = False
    attempt: str = ""  # this start of the run (a resume is another): what a node's state and a stop are keyed by


class NodeRefused(Exception):
    """A node whose versions differ from the driver's (provenance.MATCHED)."""

    def __init__(self, node: str, field: str, driver, mine):
        super().__init__(f"node {node} has {field} {mine!r}, the driver {driver!r}")
        self.node, self.field, self.driver, self.mine = node, field, driver, mine

    def __reduce__(self):  # crosses the network pickled: rebuilt from its fields, not its message
        return NodeRefused, (self.node, self.field, self.driver, self.mine)


def pack_files(chains: dict, root: Path) -> dict:
    """The credentials' files under root as {relative path: (bytes, mode)} (private keys stay 0600)."""
    out = {}
    for chain in chains.values():
        for f in sorted(Path(chain.directory).rglob("*")):
            if f.is_file():
                out[str(f.relative_to(root))] = (f.read_bytes(), f.stat().st_mode & 0o777)
    return out


def unpack_files(files: dict, root: Path) -> None:
    for rel, (data, mode) in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)  # never readable by others, not even briefly
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(path, mode)


def relocate(obj, old: Path, new: Path):
    """obj with every path under old moved under new (through dataclasses, dicts, lists and tuples)."""
    if isinstance(obj, Path):
        return new / obj.relative_to(old) if obj.is_relative_to(old) else obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.replace(obj, **{f.name: relocate(getattr(obj, f.name), old, new)
                                           for f in dataclasses.fields(obj) if f.init})
    if isinstance(obj, dict):
        return {k: relocate(v, old, new) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(relocate(v, old, new) for v in obj)
    return obj


class IdleMeter:
    """The CPU the worker process uses while it measures nothing: the engine's own cost (heartbeats,
    bookkeeping), which runs beside every cell. Sampled every PERIOD_S while no task runs."""
    PERIOD_S = 2.0

    def __init__(self):
        self.busy, self.touched = 0, False
        self.cpu_s = self.wall_s = 0.0
        self.lock = threading.Lock()
        self._stop = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._loop, name="pqbench-idle-meter", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def enter(self) -> None:
        with self.lock:
            self.busy += 1
            self.touched = True

    def leave(self) -> None:
        with self.lock:
            self.busy -= 1

    def fraction(self) -> float | None:
        """CPU seconds per idle second (1.0: one CPU), None before a full idle period."""
        with self.lock:
            return round(self.cpu_s / self.wall_s, 5) if self.wall_s else None

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self.lock:
                self.touched = False
            t0, c0 = time.monotonic(), _process_cpu()
            if self._stop.wait(self.PERIOD_S):
                return
            with self.lock:
                if not self.touched and self.busy == 0:
                    self.cpu_s += _process_cpu() - c0
                    self.wall_s += time.monotonic() - t0


def _process_cpu() -> float:
    t = os.times()
    return t.user + t.system


@dataclasses.dataclass
class OpenRun:
    ctx: RunContext
    segment: str
    directory: Path
    session: Session  # its servers and lanes (one per slot), open
    free: queue.Queue
    start: dict | None  # the start report, until a task delivers it
    gate: TailGate = dataclasses.field(default_factory=TailGate)  # cells start beside others only in their tails
    stop: threading.Event = dataclasses.field(default_factory=threading.Event)
    measured: int = 0


class NodeState:
    """One worker's node: its open runs and its lanes."""

    def __init__(self, slots: int, node: str | None = None):
        self.node = node or identity.node_name()
        self.slots = slots
        self.runs: dict[str, OpenRun] = {}
        self.aborted: set[str] = set()
        self.lock = threading.Lock()
        self.idle = IdleMeter()

    def open(self, ctx: RunContext) -> dict | None:
        """Opens the run here unless it is open; its start report the first time it is asked for."""
        if ctx.attempt in self.aborted:
            raise Cancelled("the run was stopped")
        with self.lock:
            run = self.runs.get(ctx.attempt)
            if run is None:
                run = self.runs[ctx.attempt] = self._open(ctx)
            report, run.start = run.start, None
            return report

    def _open(self, ctx: RunContext) -> OpenRun:
        # optional stacks (and their QUIC servers) are built on a node's first use, as on a local run
        ondemand.ensure(ctx.stacks, transports={c.transport_name for _, c in ctx.cells},
                        algorithms=ondemand.named_algorithms(c for _, c in ctx.cells))
        mine = provenance.of_node(ctx.stacks)
        differs = provenance.mismatch(ctx.versions, mine)
        if differs:
            raise NodeRefused(self.node, *differs)
        registry.reap_stale()
        segment = identity.new_segment()
        directory = paths.BUILD / "runs" / ctx.run_id / f"node-{segment}"
        unpack_files(ctx.files, directory)
        chains = relocate(ctx.chains, Path(ctx.driver_dir), directory)
        session = Session(ctx.spec, [c for _, c in ctx.cells], directory, lanes=self.slots, chains=chains)
        with contextlib.ExitStack() as opening:
            opening.enter_context(session)
            calibration, crypto = session.calibrate(), session.crypto()
            opening.pop_all()  # open: closed by close()
        free: queue.Queue = queue.Queue()
        for lane in session.lanes:
            free.put(lane)
        start = {"node": self.node, "segment": segment, "calibration_start": calibration, "crypto": crypto,
                 "provenance": {**mine, "slots": self.slots, "engine_idle_cpu": self.idle.fraction(),
                                "backend": session.path.backend_name,
                                "testbeds": [lane.rig.tb.info()["name"] for lane in session.lanes]}}
        return OpenRun(ctx, segment, directory, session, free, start)

    def measure(self, ctx: RunContext, pos: int, cell) -> dict:
        self.idle.enter()
        try:
            start = self.open(ctx)
            run = self.runs[ctx.attempt]
            lane = run.free.get()
            tail = threading.Event()
            try:
                # as on a local run: a cell starts beside others only once each is in its tail
                while not run.gate.try_enter(lane.index, tail):
                    if run.stop.wait(LOOK_S):
                        break
                if run.stop.is_set():
                    raise Cancelled("the run was stopped")
                record, samples, why = run.session.measure(lane, pos, cell, tail, run.stop)
            finally:
                run.gate.leave(lane.index)
                run.free.put(lane)
            run.measured += 1
            return {"node": self.node, "segment": run.segment, "record": record, "samples": samples, "why": why,
                    "start": start}
        finally:
            self.idle.leave()

    def close(self, attempt: str, measure_end: bool = True) -> dict | None:
        """Ends the run's attempt here: the end's calibration and crypto rounds (measure_end), then the lanes go."""
        with self.lock:
            run = self.runs.pop(attempt, None)
        if run is None:
            return None
        report = {"node": self.node, "segment": run.segment, "cells": run.measured}
        try:
            for _ in run.session.lanes:  # a cell still running hands its lane back
                run.free.get(timeout=CLOSE_WAIT_S)
            if measure_end:
                run.session.path.reconfigure(LinkSpec())
                report.update(calibration_end=run.session.calibrate(), crypto=run.session.crypto(),
                              engine_idle_cpu=self.idle.fraction())
        finally:
            run.session.__exit__(None, None, None)
            if not run.ctx.keep_files:
                shutil.rmtree(run.directory, ignore_errors=True)
            registry.reap_stale()
        return report

    def abort(self, attempt: str) -> None:
        self.aborted.add(attempt)
        run = self.runs.get(attempt)
        if run is not None:
            run.stop.set()

    def close_all(self) -> None:
        for attempt in list(self.runs):
            self.abort(attempt)
            self.close(attempt, measure_end=False)


class NodePlugin(WorkerPlugin):
    """Holds the node's state in its worker; reaps stale testbeds when the worker starts."""
    name = PLUGIN_NAME

    def __init__(self, slots: int, node: str | None = None):
        self.state = NodeState(slots, node)

    def setup(self, worker) -> None:
        registry.reap_stale()
        self.state.idle.start()

    def teardown(self, worker) -> None:
        self.state.idle.stop()
        self.state.close_all()


def state() -> NodeState:
    return get_worker().plugins[PLUGIN_NAME].state


def open_task(ctx: RunContext) -> dict | None:
    return state().open(ctx)


def measure_task(ctx: RunContext, pos: int, cell) -> dict:
    return state().measure(ctx, pos, cell)


def close_task(attempt: str, measure_end: bool) -> dict | None:
    return state().close(attempt, measure_end)


def abort(attempt: str, dask_worker=None) -> str:
    """Run on every worker by Client.run (not a task: it must not wait for a slot)."""
    node = dask_worker.plugins[PLUGIN_NAME].state
    node.abort(attempt)
    return node.node
