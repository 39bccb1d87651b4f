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

import contextlib
import dataclasses
import datetime
import hashlib
import shutil
from pathlib import Path

from pqbench import axis, paths, stats, store, units
from pqbench.algorithms import catalog, microbench
from pqbench.measure import concurrency
from pqbench.endpoints import ondemand
from pqbench.endpoints.base import DEFAULT_PAGES, Serving, Site
from pqbench.endpoints.offer import parse_offer
from pqbench.errors import BadInput
from pqbench.experiment import cells as cellmod
from pqbench.experiment import shard as shardmod
from pqbench.experiment.spec import Spec
from pqbench.measure import cell as cellmeasure
from pqbench.measure import identity, provenance
from pqbench.measure.progress import Progress
from pqbench.measure.rig import Rig, credentials
from pqbench.measure.schedule import run_interleaved
from pqbench.endpoints.remote import UNKNOWN_SIG
from pqbench.testbed.realpath import RealPath
from pqbench.remote.target import pause_ms
from pqbench.measure.capacity import measure_cell as measure_load
from pqbench.testbed import LinkSpec, cross
from pqbench.testbed.calibrate import measure_floor

# Crypto microbenchmarks at the start and end of each segment: rounds seconds apart, each
# algorithm CRYPTO_SECONDS per round (a third per operation).
CRYPTO_ROUNDS = 3
CRYPTO_SECONDS = 0.3
FLOOR_DRIFT_MS = 0.1  # floor changes larger than this and 20 % are reported
FIRST_PORT = 4433
DEFAULT_MAX_BIAS = 0.02  # the detector's margin for fixed-parallel specs


@dataclasses.dataclass
class Lane:
    """A rig that measures one cell at a time."""
    index: int
    rig: Rig
    scratch: Path


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
    ondemand.ensure(stacks, transports={c.transport_name for c in all_cells})
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
    done = store.finished_cells(con, run_id) & mine
    progress = Progress(len(mine), len(done), quiet)
    part = f" (shard {prov['shard']}: {len(mine)} of {len(all_cells)})" if shard else ""
    progress.say(f"run {run_id}: {len(mine)} cells{part}, {len(done)} already done, database {db_path}")

    status = "interrupted"
    try:
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
    except KeyboardInterrupt:
        raise Interrupted(run_id) from None
    finally:
        store.finish_run(con, run_id, status)
        con.close()
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


def open_lanes(opened: contextlib.ExitStack, spec: Spec, todo: list, servings, run_dir: Path, count: int) -> list:
    """count lanes (rigs) for the cells to measure, each with its scratch folder under run_dir."""
    first = todo[0][1]
    clients = sorted({c.client for _, c in todo})
    lanes = []
    for k in range(min(count, len(todo))):
        path = RealPath(netns={"client": spec.netns} if spec.netns else None) if spec.targets else None
        rig = opened.enter_context(Rig.pairs(servings(k), clients, first.link_spec(spec.seed), first.tcp(),
                                             backend=spec.backend, index=k, path=path))
        scratch = run_dir / f"lane-{k}"
        scratch.mkdir(parents=True, exist_ok=True)
        lanes.append(Lane(k, rig, scratch))
    return lanes


def measure_on_lane(spec: Spec, lane: Lane, pos: int, cell: cellmod.Cell, site: Site, budget, tail, stop):
    """One cell on one lane: (record, samples, why); competing flows (the cross axis) run through it."""
    flows = cross.parse("cross", cell.scenario.cross) if cell.scenario.cross else None
    if flows:
        lane.rig.tb.reconfigure(cell.link_spec(spec.seed))  # the flows meet the cell's link from their start
    with cross.running(lane.rig.tb, flows) as moved:
        record_, samples, why = _measure_on_lane(spec, lane, pos, cell, site, budget, tail, stop)
    if flows:
        record_["cross_traffic"] = moved
    return record_, samples, why


def _measure_on_lane(spec: Spec, lane: Lane, pos: int, cell: cellmod.Cell, site: Site, budget, tail, stop):
    plan = _plan(cell, spec, lane.rig, site)
    if cell.kind == "load":
        result, why = measure_load(lane.rig, spec.load, plan.link, plan.tcp, plan.job, cell.server, cell.client,
                                   stop=stop)
        return record(cell, pos, result), [], why
    control = concurrency.policy("auto" if spec.max_bias is not None else spec.parallel,
                                 max_bias=spec.max_bias, maximum=spec.parallel,
                                 rtt_ms=cell.scenario.rtt_ms, mode=cell.mode, requests=cell.requests,
                                 budget=budget, transport=cell.transport)
    result, samples, why = cellmeasure.measure(lane.rig, plan, control, lane.scratch, tail=tail, stop=stop)
    result["concurrency"] = {**result["concurrency"], "lane": lane.index}
    return record(cell, pos, result), samples, why


def _measure_all(con, run_id: str, spec: Spec, todo: list, progress, prov: dict, keep_files: bool,
                 here: Here, run_dir: Path) -> str:
    """Measures the cells over this machine's lanes (their files under run_dir); the run's final status."""
    run_dir.mkdir(parents=True, exist_ok=True)
    algs = crypto_algorithms([n for _, c in todo for n in (c.kex, c.sig)])
    save_crypto(con, run_id, here, progress, algs, "start")
    sites, servings = servers(spec, [c for _, c in todo], run_dir, make_credentials([c for _, c in todo], run_dir))
    budget = concurrency.Budget()
    with contextlib.ExitStack() as opened:
        lanes = open_lanes(opened, spec, todo, servings, run_dir, spec.lanes)
        tb = lanes[0].rig.tb
        store.update_run(con, run_id, provenance={
            **prov, "backend": tb.backend_name, "testbed": tb.info(),
            "segments": provenance.segments(con, run_id, [lane.rig.tb.info()["name"] for lane in lanes])})
        calib_start = calibrate_floor(tb, spec)
        store.update_run(con, run_id, calibration_start=calib_start)
        store.update_node(con, run_id, here.segment, calibration_start=calib_start)
        progress.say(f"emulator floor (TCP connect at 0 ms): p50 {calib_start['p50_ms']:.3f} ms; {len(lanes)} testbed(s)"
                     if calib_start else f"{len(spec.targets)} target(s) over the host's network: each cell measures "
                                         "its path (TCP connect) before and after")

        def measure(lane: Lane, pos: int, cell: cellmod.Cell, tail, stop):
            return measure_on_lane(spec, lane, pos, cell, sites(cell), budget, tail, stop)

        def save(cell, record, samples, why):
            save_measured(con, run_id, cell, record, samples, why, progress, here.node)

        run_interleaved(lanes, todo, measure, save)
        tb.reconfigure(LinkSpec())
        calib_end = calibrate_floor(tb, spec)
        warnings = floor_drift_warnings(calib_start or {}, calib_end or {})
        for w in warnings:
            progress.say(f"warning: {w}")
        store.update_run(con, run_id, calibration_end=calib_end, warnings=warnings)
        store.update_node(con, run_id, here.segment, calibration_end=calib_end)
        save_crypto(con, run_id, here, progress, algs, "end")
    if not keep_files:
        shutil.rmtree(run_dir, ignore_errors=True)  # the results are in the store
    return "done"


def make_credentials(cells: list[cellmod.Cell], run_dir: Path) -> dict:
    """(protocol, sig) -> what the servers prove themselves with, made once per run under run_dir (a
    cluster's driver ships these very files to its nodes). None for targets: they bring their own."""
    return {(p, s): credentials(p, s, run_dir / ("keys" if p == "ssh" else "certs") / s)
            for p, s in sorted({(c.protocol, c.sig) for c in cells if not c.target})}


def servers(spec: Spec, cells: list[cellmod.Cell], run_dir: Path, chains: dict):
    """(site_of(cell), servings(lane)): where each cell's server answers, and what each lane's servers
    serve. Servers pqbench starts serve a port per credentials (certificate chain, SSH host keys) with
    every key exchange of the run; a target is one site that is already there."""
    if spec.targets:
        targets = {t.name: t for t in spec.targets}
        by_server = {srv: [targets[n].site() for n in dict.fromkeys(c.target for c in cells if c.server == srv)]
                     for srv in {c.server for c in cells}}
        return (lambda cell: targets[cell.target].site(),
                lambda k: {srv: Serving(run_dir / f"server-{k}" / srv, sites, [], {}, 0)
                           for srv, sites in by_server.items()})
    servers = sorted({c.server for c in cells})
    # each server serves the credentials of its own cells only: one it cannot load (an ML-DSA host key in
    # sshd) would stop it from starting, and its cells were skipped with the reason already; a port per
    # chain and per way of serving it (preference order, compressed, accepting 0-RTT) its cells ask for
    serves = {srv: sorted({_site_key(c) for c in cells if c.server == srv}, key=str) for srv in servers}
    ports = {(srv, key): FIRST_PORT + i for i, (srv, key) in
             enumerate((srv, key) for srv in servers for key in serves[srv])}

    def site(srv: str, key: tuple) -> Site:
        protocol, sig, early, *axes = key
        return Site(ports[srv, key], chains[protocol, sig], early_data=early, **axis.site_fields(tuple(axes)))

    pages = {**DEFAULT_PAGES, **{c.page: units.size_bytes("page", c.page) for c in cells if c.page}}
    groups = {srv: list(dict.fromkeys(g for c in cells if c.server == srv for g in _groups(c))) for srv in servers}
    return (lambda cell: site(cell.server, _site_key(cell)),
            lambda k: {srv: Serving(run_dir / f"server-{k}" / srv, [site(srv, key) for key in serves[srv]],
                                    groups[srv], pages, spec.workers) for srv in servers})


def _site_key(c: cellmod.Cell) -> tuple:
    """What a cell asks of the port it connects to: (protocol, sig, 0-RTT, and the values of the registered
    axes that make a port of their own: server groups, compression, transport, QUIC Retry …)."""
    return (c.protocol, c.sig, c.mode == "early", *axis.site_key(c.values()))


def _groups(c: cellmod.Cell) -> list[str]:
    """The groups a cell's server must accept: its key exchange and every group its client's offer lists."""
    return [c.kex, *(parse_offer(c.offer).groups if c.offer else ())]


def _plan(cell: cellmod.Cell, spec: Spec, rig: Rig, site: Site) -> cellmeasure.Plan:
    job = rig.job(site.port, cell.kex, site.chain, host=site.host, mode=cell.mode, path=f"/{cell.page or '1k'}",
                  requests=cell.requests or 1, warmup=spec.warmup, timeout_ms=spec.timeout_ms,
                  pause_ms=pause_ms(spec.rate) if cell.target else 0, **axis.job_fields(cell.values()))
    return cellmeasure.Plan(cell.link_spec(spec.seed), cell.tcp(), job, spec.samples,
                            spec.max_bias if spec.max_bias is not None else DEFAULT_MAX_BIAS,
                            client=cell.client, server=cell.server)


def crypto_algorithms(names: list[str]) -> list:
    """The catalog algorithms behind a run's names that this build can benchmark (not SSH's own
    groups, not a size-only host key's stand-in: its cells never compute that algorithm)."""
    algs = {}
    for name in dict.fromkeys(names):
        if catalog.is_size_only(name) or name == UNKNOWN_SIG:  # a target's chain: its algorithm is the server's
            continue
        alg = catalog.find(name)
        if catalog.availability(alg).available:
            algs.setdefault(alg.name, alg)
    return sorted(algs.values(), key=lambda a: (a.kind, a.name))


def record(cell: cellmod.Cell, position: int, fields: dict) -> dict:
    return {"cell_id": cell.cell_id, "position": position, **cell.params(), **fields}


def crypto_rounds(algs: list) -> list:
    """The crypto microbenchmark rounds of one start or end of a segment (input of the lower-bound model)."""
    return microbench.rounds(algs, CRYPTO_ROUNDS, CRYPTO_SECONDS)


def save_crypto(con, run_id: str, here: Here, progress, algs: list, when: str) -> None:
    progress.say(f"crypto microbenchmarks of {len(algs)} algorithms at the {when}, {CRYPTO_ROUNDS} rounds "
                 "(input of the lower-bound model)")
    store.save_crypto(con, run_id, crypto_rounds(algs), node=here.node, segment=here.segment)


def calibrate_floor(tb, spec: Spec) -> dict | None:
    """TCP-connect RTT through the link configured to 0 ms: the emulator's floor. None on a real path:
    no emulator, and each cell measures its path instead."""
    if not tb.emulated:
        return None
    saved = tb.spec
    tb.reconfigure(LinkSpec())
    try:
        floor = measure_floor(tb, spec.calibration_samples)
    finally:
        tb.reconfigure(saved)
    return {**{f"{k}_ms": floor.get(k) for k in ("p5", "p25", "p50", "p75", "p95", "p99", "mean")},
            "n": floor.get("n"), "when": datetime.datetime.now().isoformat(timespec="seconds")}


def floor_drift_warnings(start: dict, end: dict) -> list[str]:
    a, b = start.get("p50_ms"), end.get("p50_ms")
    if a is None or b is None:
        return []
    if abs(b - a) > FLOOR_DRIFT_MS and abs(b - a) > 0.2 * a:
        return [f"the emulator floor drifted from {a:.3f} ms to {b:.3f} ms during the run: the machine's load "
                f"changed; compare cells with care or rerun on a quiet machine"]
    return []
