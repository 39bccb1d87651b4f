"""`pqbench run`: a spec's cells measured in a randomised order on a few lanes, each a rig (testbed
with a server per server stack of the run, and its client stacks).

A lane's link is reconfigured live between its cells; each server serves one port per certificate
chain with every key exchange of the run. A cell starts on a free lane only while the cells in
progress are in their tails (schedule.run_interleaved), and all cells draw their workers from one
CPU budget (concurrency.Budget). Each cell collects samples until its stopping rule says enough
(measure.cell) and is written to the store in one transaction when it finishes: a crash or Ctrl-C
loses at most the cells in progress, and `--resume` continues with the cells not yet done.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
from pathlib import Path

from pqbench import axis, interrupts, paths, stats, store
from pqbench.endpoints import ondemand
from pqbench.errors import BadInput
from pqbench.experiment import cells as cellmod
from pqbench.experiment import shard as shardmod
from pqbench.experiment.spec import Spec
from pqbench.measure import identity, provenance
from pqbench.measure.progress import Progress
from pqbench.measure.session import CRYPTO_ROUNDS, Session, record
from pqbench.testbed import LinkSpec

FLOOR_DRIFT_MS = 0.1  # floor changes larger than this and 20 % are reported


def find_resumable(con, spec: Spec, run: str | None) -> str:
    if run:
        return store.resolve_run(con, run)
    for run_id, toml in store.runs_named(con, spec.name):
        if toml == spec.source:
            return run_id
    raise BadInput("--resume", f"no earlier run of {spec.name!r} with this exact spec in the database")


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run: its finished cells are stored, `--resume` continues it."""

    def __init__(self, run_id: str):
        super().__init__(run_id)
        self.run_id = run_id


@dataclasses.dataclass(frozen=True)
class Here:
    """Where a run's cells are measured: a node (host name) and its segment of the run (pqbench.measure.identity)."""
    node: str
    segment: str

    @classmethod
    def this_machine(cls) -> "Here":
        return cls(identity.node_name(), identity.new_segment())


def shard_run_id(spec: Spec, n: int) -> str:
    """The run id every shard of a spec shares when none is given, so their stores merge into one run."""
    return f"{spec.name}-{hashlib.sha256(spec.source.encode()).hexdigest()[:8]}-shards{n}"


def run(spec: Spec, db_path: Path, *, resume: bool = False, resume_run: str | None = None,
        quiet: bool = False, keep_files: bool = True, shard: tuple[int, int] | None = None,
        run_id: str | None = None, engine=None) -> str:
    """Measures the spec's cells into the store; returns the run id. keep_files: keep the run folder
    (servers' configs and logs, the lanes' scratch files) after a finished run. shard (k, n): measure only
    part k of n (pqbench.experiment.shard), under a run id all shards share. engine: measures the cells
    elsewhere (pqbench.cluster.driver.Cluster: on a cluster's nodes) instead of on this machine's lanes."""
    con = store.connect(db_path)
    store.add_cell_columns(con, axis.columns())  # a registered axis younger than the numbered migrations
    all_cells = cellmod.order(cellmod.expand(spec), spec.seed)
    mine = {c.cell_id for c in (shardmod.part(all_cells, *shard) if shard else all_cells)}
    stacks = sorted({n for c in all_cells for n in (c.server, c.client)})
    # the optional stacks the spec names (and their QUIC servers) are built the first time
    ondemand.ensure(stacks, transports={c.transport_name for c in all_cells}, algorithms=ondemand.named_algorithms(all_cells))
    prov = provenance.of_run(spec, stacks)
    if spec.targets:
        prov["targets"] = [t.to_json() for t in spec.targets]  # what each name stood for, as resolved
    if shard:
        prov["shard"] = f"{shard[0]}/{shard[1]}"
    if resume:
        run_id = find_resumable(con, spec, resume_run)
        store.update_run(con, run_id, status="running")
    else:
        run_id = run_id or (shard_run_id(spec, shard[1]) if shard else identity.new_run_id(spec.name))
        if store.run_row(con, run_id):
            raise BadInput("--run-id", f"{run_id} is already in {db_path}: continue it with --resume {run_id}, "
                                       "or give another --run-id")
        store.create_run(con, run_id, name=spec.name, spec_toml=spec.source, seed=spec.seed,
                         provenance=prov, cell_order=[c.cell_id for c in all_cells])
    status = "interrupted"
    try:  # from here the run's row exists: a Ctrl-C ends it as interrupted, with the command that resumes it
        try:
            done = store.finished_cells(con, run_id) & mine
            progress = Progress(len(mine), len(done), quiet)
            part = f" (shard {prov['shard']}: {len(mine)} of {len(all_cells)})" if shard else ""
            progress.say(f"run {run_id}: {len(mine)} cells{part}, {len(done)} already done, database {db_path}")
            todo = _skip_unavailable(con, run_id, spec, [(pos, c) for pos, c in enumerate(all_cells)
                                                         if c.cell_id in mine and c.cell_id not in done], progress)
            if engine is not None:
                status = engine.measure_all(con, run_id, spec, todo, progress, keep_files)
            elif todo:
                here = Here.this_machine()
                store.join_node(con, run_id, here.segment, here.node, provenance.of_node(stacks))
                run_dir = paths.BUILD / "runs" / run_id
                if shard:  # shards of one run share its id: one shard's folder must not be another's
                    run_dir /= f"shard-{shard[0]}-of-{shard[1]}"
                try:
                    status = _measure_all(con, run_id, spec, todo, progress, prov, keep_files, here, run_dir)
                finally:
                    store.update_node(con, run_id, here.segment, status=status)
            else:
                status = "done"
        finally:
            # the run's row is written whole, and a Ctrl-C while it is ends the run as one a moment earlier would
            # (a Ctrl-C here, just after the end's crypto rounds, escaped as a bare KeyboardInterrupt: exit 130
            # without the command that resumes the run; stress seed 352970)
            with interrupts.deferred() as late:
                final = "interrupted" if late.arrived else status
                try:
                    store.finish_run(con, run_id, final)
                finally:
                    con.close()  # also when the disk is full
                if final == "done":
                    late.drop()  # it came once the run was stored as done: too late to stop it
    except KeyboardInterrupt:
        raise Interrupted(run_id) from None
    return run_id


def _skip_unavailable(con, run_id: str, spec: Spec, cells: list, progress) -> list:
    """Records the cells this build cannot run as skipped with the reason; the (position, cell) to measure."""
    todo = []
    for pos, cell in cells:
        reason = cellmod.unavailable_reason(cell, spec)
        if reason:
            store.save_cell(con, run_id, record(cell, pos, {"status": "skipped", "reason": reason}))
            progress.cell_done(cell.label(), f"skipped: {reason}", measured=False)
        else:
            todo.append((pos, cell))
    return todo


def save_measured(con, run_id: str, cell: cellmod.Cell, record: dict, samples: list, why: str, progress,
                  node: str, where: str = "") -> None:
    """Stores a measured cell (with the node that measured it) and says how it went (where: " on NODE")."""
    record = {**record, "node": node}
    store.save_cell(con, run_id, record, samples, record["metric"], steps=record.pop("steps", []))
    if cell.kind == "load":
        progress.cell_done(cell.label() + where, why)
        return
    durations = sorted(s["t_ns"][record["metric"]] / 1e6 for s in samples if s.get("ok"))
    p50 = f"p50 {stats.percentile(durations, 50):.1f} ms" if durations else "no successful sample"
    late = record["detector"].get("late")
    progress.cell_done(cell.label() + where, f"n={len(samples)} {p50}, {record['failures']} failed"
                                     f"{f', {late} late' if late else ''} ({why})")


def _measure_all(con, run_id: str, spec: Spec, todo: list, progress, prov: dict, keep_files: bool,
                 here: Here, run_dir: Path) -> str:
    """Measures the cells in a session on this machine's lanes (their files under run_dir); the run's status."""
    session = Session(spec, [c for _, c in todo], run_dir, lanes=spec.lanes)
    save_crypto(con, run_id, here, progress, session, "start")
    with session:
        tb = session.path
        store.update_run(con, run_id, provenance={
            **prov, "backend": tb.backend_name, "testbed": tb.info(),
            "segments": provenance.segments(con, run_id, [lane.rig.tb.info()["name"] for lane in session.lanes])})
        calib_start = session.calibrate()
        store.update_run(con, run_id, calibration_start=calib_start)
        store.update_node(con, run_id, here.segment, calibration_start=calib_start)
        progress.say(f"emulator floor (TCP connect at 0 ms): p50 {calib_start['p50_ms']:.3f} ms; "
                     f"{len(session.lanes)} testbed(s)" if calib_start else
                     f"{len(spec.targets)} target(s) over the host's network: each cell measures its path (TCP "
                     "connect) before and after")

        def save(cell, record, samples, why):
            save_measured(con, run_id, cell, record, samples, why, progress, here.node)

        session.run(todo, save)
        tb.reconfigure(LinkSpec())
        calib_end = session.calibrate()
        warnings = floor_drift_warnings(calib_start or {}, calib_end or {})
        for w in warnings:
            progress.say(f"warning: {w}")
        store.update_run(con, run_id, calibration_end=calib_end, warnings=warnings)
        store.update_node(con, run_id, here.segment, calibration_end=calib_end)
        save_crypto(con, run_id, here, progress, session, "end")
    if not keep_files:
        shutil.rmtree(run_dir, ignore_errors=True)  # the results are in the store
    return "done"


def save_crypto(con, run_id: str, here: Here, progress, session: Session, when: str) -> None:
    progress.say(f"crypto microbenchmarks of {len(session.algs)} algorithms at the {when}, {CRYPTO_ROUNDS} rounds "
                 "(input of the lower-bound model)")
    store.save_crypto(con, run_id, session.crypto(), node=here.node, segment=here.segment)


def floor_drift_warnings(start: dict, end: dict) -> list[str]:
    a, b = start.get("p50_ms"), end.get("p50_ms")
    if a is None or b is None:
        return []
    if abs(b - a) > FLOOR_DRIFT_MS and abs(b - a) > 0.2 * a:
        return [f"the emulator floor drifted from {a:.3f} ms to {b:.3f} ms during the run: the machine's load "
                f"changed; compare cells with care or rerun on a quiet machine"]
    return []
