"""`pqbench run --cluster`: the driver measures a run's cells on a Dask cluster's pqbench workers and stores
them here, through the same store code as a local run.

The driver makes the certificate chains once and ships their files (identical bytes on every node), opens
the run on every worker present (a node whose versions differ from the driver's is refused: exit 3), then
submits one task per cell in the run's order; a node measures no more cells at once than its slots (the
`pqbench_node` resource). A cell whose worker dies is rescheduled by the engine on another node and stored
once, when it finishes. At the end every node measures its floor and crypto again; Ctrl-C stops the cells
on every node and closes their testbeds.

A Ctrl-C must never land inside a call into the engine: its `sync()` then schedules a cancel that reads a
variable not yet set, and the engine's loop prints that NameError's traceback (CI, a cluster run interrupted
just after its first cell). The driver so takes Ctrl-C deferred (pqbench.interrupts) and acts on it between
two calls, where its waits look anyway.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from pathlib import Path

from pqbench import interrupts, paths, store
from pqbench.cluster import node as nodemod
from pqbench.cluster.security import engine
from pqbench.errors import BadInput, MeasurementFailed, MissingCapability
from pqbench.measure import identity, provenance, runner, session

CONNECT_TIMEOUT_S = 30
POLL_S = 0.1  # how often a wait for tasks looks whether the scheduler is still there
CLOSE_TIMEOUT_S = 600  # the end's crypto rounds and calibration, after the last cell finished
RESUBMIT_MAX = 5  # a cell lost this many times ends the run: its cause is not one node


class Cluster:
    """A connection to a scheduler whose workers are pqbench nodes; runner.run's engine."""

    def __init__(self, address: str, security=None):
        self.address, self.security = address, security
        self.client = None

    def __enter__(self) -> "Cluster":
        if self.address.startswith("tls://") and self.security is None:
            raise BadInput("--cluster", f"{self.address} speaks TLS: give --tls-ca-file, --tls-cert and --tls-key")
        distributed = engine()
        with interrupts.deferred() as interrupt:  # a Ctrl-C while connecting ends the command once the engine answered
            try:
                self.client = distributed.Client(self.address, security=self.security, timeout=CONNECT_TIMEOUT_S,
                                                 set_as_default=False)
            except (OSError, TimeoutError) as e:
                raise MissingCapability(f"no Dask scheduler answers at {self.address} ({e})", "start one (`dask "
                                        "scheduler`) and give its address, e.g. tcp://10.0.0.1:8786") from None
            if interrupt.arrived:
                self.client.close()  # no __exit__ follows an __enter__ that raises
        return self

    def __exit__(self, *exc) -> None:
        with interrupts.deferred():
            self.client.close()

    def measure_all(self, con, run_id: str, spec, todo: list, progress, keep_files: bool = True) -> str:
        if not todo:
            return "done"
        with interrupts.deferred() as interrupt:  # taken between engine calls (the module's docstring says why)
            workers = pqbench_workers(self.client)
            if not workers:
                raise MissingCapability(f"the scheduler at {self.address} has no pqbench worker",
                                        f"start `pqbench worker {self.address}` (as root) on each measuring node")
            ctx = self._context(run_id, spec, todo, keep_files)
            store.update_run(con, run_id, provenance={**store.provenance(con, run_id), "cluster": {
                "scheduler": self.address, "driver": ctx.versions["host"]}})
            progress.say(f"cluster {self.address}: {len(workers)} node(s): {', '.join(sorted(workers.values()))}")
            run = _ClusterRun(self.client, con, run_id, ctx.attempt, progress, interrupt)
            try:
                shipped = run.ship(ctx)
                run.open(shipped, workers)
                run.measure(ctx, shipped, todo)
                run.close(measure_end=True)
            except BaseException:
                run.stop()
                raise
            finally:
                if not keep_files:
                    shutil.rmtree(Path(ctx.driver_dir), ignore_errors=True)  # the nodes' copies went with their lanes
                    with contextlib.suppress(OSError):
                        Path(ctx.driver_dir).parent.rmdir()  # the run's folder, when no node of this machine keeps one
        return "done"

    def _context(self, run_id: str, spec, todo: list, keep_files: bool) -> nodemod.RunContext:
        run_dir = paths.BUILD / "runs" / run_id / "driver"
        cells = [c for _, c in todo]
        chains = session.make_credentials(cells, run_dir)
        stacks = sorted({n for c in cells for n in (c.server, c.client)})
        return nodemod.RunContext(run_id, spec, list(todo), chains, nodemod.pack_files(chains, run_dir), str(run_dir),
                                  provenance.of_node(stacks), stacks, keep_files, identity.new_segment())


class _ClusterRun:
    """One run's tasks on the cluster, and the node segments they report."""

    def __init__(self, client, con, run_id: str, attempt: str, progress, interrupt: interrupts.Pending):
        self.client, self.con, self.run_id, self.attempt, self.progress = client, con, run_id, attempt, progress
        self.interrupt = interrupt
        self.stopping = False  # once stop() began, a second Ctrl-C waits for its cleaning (raised at the end)
        self.futures: dict = {}
        self.segments: dict[str, dict] = {}  # segment -> its start report, of the nodes that opened the run
        self.closed: set[str] = set()

    def _submit(self, fn, *args, key: str, **kw):
        return self.client.submit(fn, *args, key=f"{key}-{self.attempt}", pure=False,
                                  resources={nodemod.RESOURCE: 1}, **kw)

    def open(self, shipped, workers: dict) -> None:
        """Opens the run on every worker present, so a node with other versions is refused before any cell."""
        opens = [self._submit(nodemod.open_task, shipped, key=f"open-{name}", workers=[addr], allow_other_workers=False)
                 for addr, name in workers.items()]
        self.futures.update(dict.fromkeys(opens))
        for f in opens:
            self._ready([f])
            if f.cancelled():  # only the engine cancels an open: it lost the scheduler
                self._connected()
            self._joined(_result(f))

    def _joined(self, report: dict | None) -> None:
        if not report:
            return
        store.join_node(self.con, self.run_id, report["segment"], report["node"], report["provenance"])
        store.update_node(self.con, self.run_id, report["segment"], calibration_start=report["calibration_start"])
        store.save_crypto(self.con, self.run_id, report["crypto"], node=report["node"], segment=report["segment"])
        self.segments[report["segment"]] = report
        floor = (report["calibration_start"] or {}).get("p50_ms")
        self.progress.say(f"node {report['node']} joined" + (f": emulator floor p50 {floor:.3f} ms" if floor else ""))

    def ship(self, ctx):
        """The run's context on every node (its chains' files, the spec): one copy each, sent once."""
        return self.client.scatter(ctx, broadcast=True, hash=False)

    def measure(self, ctx, shipped, todo: list) -> None:
        cells = {self._submit(nodemod.measure_task, shipped, pos, cell, key=f"cell-{cell.cell_id}",
                              priority=len(todo) - k): (pos, cell) for k, (pos, cell) in enumerate(todo)}
        self.futures.update(cells)
        sent: dict[str, int] = {}  # cell id -> times it went out again
        pending = engine().as_completed(list(cells), loop=self.client.loop)
        for future in self._completed(pending):
            if future.cancelled():  # the scheduler forgot a killed worker's task, or was lost: the cell goes out again
                self._connected()
                pos, cell = cells[future]
                sent[cell.cell_id] = sent.get(cell.cell_id, 0) + 1
                if sent[cell.cell_id] > RESUBMIT_MAX:
                    raise MeasurementFailed(f"cell {cell.cell_id} was lost {RESUBMIT_MAX} times on the cluster")
                if shipped.status != "finished":
                    # the engine keeps one copy of scattered data (its memory manager drops the others): when that
                    # node died, every cell sent again was cancelled at once for want of it, for ever (CI: a hang)
                    shipped = self.ship(ctx)
                again = self._submit(nodemod.measure_task, shipped, pos, cell,
                                     key=f"cell-{cell.cell_id}-again{len(cells)}", priority=len(todo))
                cells[again] = (pos, cell)
                self.futures[again] = (pos, cell)
                pending.add(again)
                continue
            result = self._fetched(future)
            self._joined(result["start"])
            runner.save_measured(self.con, self.run_id, cells[future][1], result["record"], result["samples"],
                                 result["why"], self.progress, result["node"], where=f" on {result['node']}")

    def _fetched(self, future):
        """A finished cell's result. The scheduler lost while the result came back (its connection reset: CI) is
        waited out as anywhere else: gone for good is the error that says so, back again and it is asked again."""
        deadline = time.monotonic() + CONNECT_TIMEOUT_S + 30
        while True:
            try:
                return _result(future)
            except OSError:  # the engine's CommClosedError: the connection to the scheduler closed mid-answer
                if time.monotonic() > deadline:
                    raise MeasurementFailed(f"the cluster's scheduler went away (a result not fetched in "
                                            f"{CONNECT_TIMEOUT_S + 30} s); its unfinished cells were not measured") \
                        from None
                time.sleep(POLL_S)
                self._connected()

    def _interrupted(self) -> None:
        """A Ctrl-C noted since the last look ends the run here, between two engine calls."""
        if self.interrupt.arrived and not self.stopping:
            self.interrupt.drop()
            raise KeyboardInterrupt

    def _gone(self) -> None:
        """The scheduler is gone (the engine gave up reconnecting and closed the client): an error, not a wait
        for tasks nobody will report on. Every wait looks here, so a Ctrl-C is taken here too."""
        self._interrupted()
        if self.client.status in ("closing", "closed"):
            raise MeasurementFailed(f"the cluster's scheduler went away (no answer for {CONNECT_TIMEOUT_S} s); "
                                    "its unfinished cells were not measured")

    def _connected(self) -> None:
        """Until the engine is connected to the scheduler (again); gone for good is an error."""
        while self.client.status != "running":
            self._gone()
            time.sleep(POLL_S)

    def _ready(self, futures: list) -> None:
        while not all(f.done() for f in futures):
            self._gone()
            time.sleep(POLL_S)

    def _completed(self, pending):
        """pending's futures as they finish (futures added meanwhile included), watching the scheduler."""
        while not pending.is_empty():
            batch = pending.next_batch(block=False)
            if not batch:
                self._gone()
                time.sleep(POLL_S)
            yield from batch

    def close(self, measure_end: bool) -> None:
        """Every node ends the run (measure_end: its floor and crypto once more); segments that never reported
        their end are marked lost (their worker died)."""
        closes = [self._submit(nodemod.close_task, self.attempt, measure_end, key=f"close-{name}", workers=[addr],
                               allow_other_workers=False) for addr, name in pqbench_workers(self.client).items()]
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        while not all(f.done() for f in closes) and time.monotonic() < deadline:
            self._interrupted()  # (not _gone: a scheduler lost now leaves the segments that did not report lost)
            time.sleep(POLL_S)
        for f in closes:
            if not f.done() or f.cancelled():  # a node that died meanwhile, or still at it: marked lost below
                self.progress.say("warning: a node did not close the run" +
                                  ("" if f.done() else f" in {CLOSE_TIMEOUT_S} s"))
                continue
            try:
                report = f.result()
            except Exception as e:
                self.progress.say(f"warning: a node did not close the run: {e}")
                continue
            if not report:
                continue
            self.closed.add(report["segment"])
            end = {"calibration_end": report["calibration_end"],
                   "provenance": {**self.segments[report["segment"]]["provenance"],
                                  "engine_idle_cpu_end": report["engine_idle_cpu"]}} if measure_end else {}
            store.update_node(self.con, self.run_id, report["segment"], status="done" if measure_end else "interrupted",
                              **end)
            if report.get("crypto"):
                store.save_crypto(self.con, self.run_id, report["crypto"], node=report["node"], segment=report["segment"])
        for segment, start in self.segments.items():
            if segment not in self.closed:
                store.update_node(self.con, self.run_id, segment, status="lost")
                self.progress.say(f"warning: node {start['node']} left during the run (its cells were measured again "
                                  "elsewhere)")

    def stop(self) -> None:
        """Ctrl-C or a failure: the queued cells are cancelled, the running ones stopped, every node's lanes closed."""
        self.stopping = True
        if self.client.status in ("closing", "closed"):
            self.progress.say("warning: the scheduler is gone; each node stops its cells as its worker loses it")
            return
        try:
            self.client.cancel(list(self.futures), force=True)
            self.client.run(nodemod.abort, self.attempt)
            self.close(measure_end=False)
        except Exception as e:  # the original error matters more; say what could not be cleaned
            self.progress.say(f"warning: stopping the cluster's cells: {e}")


def pqbench_workers(client) -> dict[str, str]:
    """address -> name of the scheduler's workers that are pqbench nodes (they have the pqbench_node resource)."""
    info = client.scheduler_info(n_workers=-1)["workers"]
    return {addr: w.get("name") or addr for addr, w in info.items() if w.get("resources", {}).get(nodemod.RESOURCE)}


def _result(future):
    """A task's result; a node refused for its versions becomes exit 3 naming the node and the field."""
    try:
        return future.result()
    except nodemod.NodeRefused as e:
        raise MissingCapability(f"node {e.node} differs from the driver in {e.field}: {e.mine!r} there, "
                                f"{e.driver!r} here", f"build the same pqbench, OpenSSL, liboqs, pqprov and nginx on "
                                                      f"{e.node} (same commit, `make`) or stop its worker") from None
