"""`pqbench run`: a spec's cells measured in a randomised order on a few lanes, each a testbed
with its own nginx.

A lane's link is reconfigured live between its cells; its nginx serves one port per certificate
chain with every key exchange of the run. A cell starts on a free lane only while the cells in
progress are in their tails (see run_interleaved). Each cell collects samples in batches until the
p50 and p95 confidence intervals are narrow enough (within the spec's min/max), and is written to
the store in one transaction when it finishes: a crash or Ctrl-C loses at most the cells in
progress, and `--resume` continues with the cells not yet done.
"""

import collections
import concurrent.futures
import contextlib
import dataclasses
import datetime
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from pqbench import __version__, catalog, certs, concurrency, crypto, host, liboqs, paths, stack, stats, store
from pqbench.endpoints import pqtimer
from pqbench.endpoints.pqtimer import END_PHASE
from pqbench.endpoints.nginx import DEFAULT_PAGES, FIRST_PORT, NginxConfig, NginxServer, Site, tcp_probe
from pqbench.errors import BadInput
from pqbench.experiment import cells as cellmod
from pqbench.experiment.spec import Spec
from pqbench.testbed import LinkSpec, TcpKnobs, Testbed
from pqbench.testbed.calibrate import measure_floor

# Crypto microbenchmarks at the start and end of each segment: rounds seconds apart, each
# algorithm CRYPTO_SECONDS per round (a third per operation).
CRYPTO_ROUNDS = 3
CRYPTO_SECONDS = 0.3
FLOOR_DRIFT_MS = 0.1  # floor changes larger than this and 20 % are reported


def git_commit() -> str | None:
    try:
        rev = subprocess.run(["git", "-C", str(paths.PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(paths.PROJECT_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{rev}{'+dirty' if dirty else ''}" if rev else None


def provenance(spec: Spec) -> dict:
    return {"pqbench": __version__, "git_commit": git_commit(), "host": host.facts(),
            "openssl": {"version": stack.openssl_version(), **stack.openssl_provenance()},
            "liboqs": {"version": liboqs.version(), **stack.liboqs_provenance()},
            "pqprov": stack.pqprov_path().exists(), "synthetic_work": stack.SYNTHETIC_WORK, "nginx": host.nginx_version(),
            "congestion_control": host.congestion_control(), "seed": spec.seed,
            "parallel": spec.parallel, "samples": {"min": spec.samples.min, "max": spec.samples.max,
                                                   "ci": spec.samples.ci}}


class Progress:
    """One line per cell on stderr with the count, the elapsed time and an ETA.

    The ETA is extrapolated from the cells measured since this start only: after `--resume`, the cells
    done earlier and the skipped ones (recorded at once) would make it look minutes away when it is hours.
    """

    def __init__(self, total: int, already_done: int = 0, quiet: bool = False):
        self.total, self.done, self.quiet = total, already_done, quiet
        self.start, self.measured = time.monotonic(), 0

    def say(self, msg: str) -> None:
        if not self.quiet:
            print(f"[run] {msg}", file=sys.stderr, flush=True)

    def cell_done(self, label: str, outcome: str, measured: bool = True) -> None:
        self.done += 1
        self.measured += measured
        elapsed = time.monotonic() - self.start
        eta = _hms(elapsed / self.measured * (self.total - self.done)) if self.measured else "?"
        bar = "#" * int(20 * self.done / self.total)
        self.say(f"[{bar:<20}] {self.done}/{self.total} {_hms(elapsed)} elapsed, ETA {eta} | {label} | {outcome}")


def _hms(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


def ci_narrow(durations: list[float], target: float) -> bool:
    """True when the p50 and p95 bootstrap CIs' half-widths are within target × the estimate."""
    if len(durations) < 5:
        return False
    v = sorted(durations)
    for q in (50, 95):
        lo, hi = stats.bootstrap_ci(v, q, resamples=400)
        est = stats.percentile(v, q)
        if est <= 0 or (hi - lo) / 2 > target * est:
            return False
    return True


def measure_cell(cell: cellmod.Cell, spec: Spec, job: pqtimer.TimerJob, popen, scratch: Path,
                 control, *, tail: threading.Event | None = None,
                 stop: threading.Event | None = None) -> tuple[list, str]:
    """Samples for one cell: batches until the CIs are narrow enough, or min/max says stop.
    control: how many workers (a pqbench.concurrency policy). tail: set when the cell's last
    possible batch has only stragglers left (pqtimer.run). stop: cancels the cell."""
    metric = END_PHASE[cell.mode]
    samples: list[dict] = []
    batch = spec.samples.min
    while True:
        last = spec.samples.ci is None or len(samples) + batch >= spec.samples.max
        new = pqtimer.run(job, batch, control, popen, scratch, tail=tail if last else None, stop=stop)
        for s in new:
            s["i"] = s.get("i", 0) + len(samples)  # indices unique across the cell's batches
        samples += new
        if not any(s.get("ok") for s in samples):
            return samples, "every sample failed"
        if spec.samples.ci is None:
            return samples, "fixed count"
        durations = [s["t_ns"][metric] / 1e6 for s in samples if s.get("ok") and s["t_ns"].get(metric) is not None]
        if ci_narrow(durations, spec.samples.ci):
            return samples, "confidence intervals narrow enough"
        if len(samples) >= spec.samples.max:
            return samples, "reached samples.max"
        control.start = control.peak  # the next batch starts where this one got to
        batch = min(max(control.peak * 5, len(samples) // 2, 10), spec.samples.max - len(samples))


def _cell_record(cell: cellmod.Cell, position: int, status: str, reason: str | None = None, **extra) -> dict:
    return {"cell_id": cell.cell_id, "position": position, "status": status, "reason": reason,
            **cell.params(), **extra}


def find_resumable(con, spec: Spec, run: str | None) -> str:
    if run:
        return store.resolve_run(con, run)
    rows = con.execute("SELECT run_id, spec_toml FROM runs WHERE name = ? ORDER BY created DESC", [spec.name]).fetchall()
    for run_id, toml in rows:
        if toml == spec.source:
            return run_id
    raise BadInput("--resume", f"no earlier run of {spec.name!r} with this exact spec in the database")


def run(spec: Spec, db_path: Path, *, resume: bool = False, resume_run: str | None = None,
        quiet: bool = False) -> str:
    con = store.connect(db_path)
    all_cells = cellmod.order(cellmod.expand(spec), spec.seed)
    if resume:
        run_id = find_resumable(con, spec, resume_run)
        store.update_run(con, run_id, status="running")
    else:
        run_id = f"{spec.name}-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}"
        store.create_run(con, run_id, name=spec.name, spec_toml=spec.source, seed=spec.seed,
                         provenance=provenance(spec), cell_order=[c.cell_id for c in all_cells])
    done = store.finished_cells(con, run_id)
    progress = Progress(len(all_cells), len(done), quiet)
    progress.say(f"run {run_id}: {len(all_cells)} cells, {len(done)} already done, database {db_path}")

    todo = []
    for pos, cell in enumerate(all_cells):
        if cell.cell_id in done:
            continue
        reason = cellmod.unavailable_reason(cell)
        if reason:
            store.save_cell(con, run_id, _cell_record(cell, pos, "skipped", reason))
            progress.cell_done(cell.label(), f"skipped: {reason}", measured=False)
        else:
            todo.append((pos, cell))
    if not todo:
        store.finish_run(con, run_id, "done")
        return run_id

    run_dir = paths.BUILD / "runs" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    used = sorted({c.kex for _, c in todo}) + sorted({c.sig for _, c in todo})
    algs = [catalog.find(n) for n in used]
    _measure_crypto(con, run_id, progress, algs, "start")
    sigs = sorted({c.sig for _, c in todo})
    chains = {s: certs.make_chain(s, run_dir / "certs" / s) for s in sigs}
    ports = {s: FIRST_PORT + i for i, s in enumerate(sigs)}
    groups = list(dict.fromkeys(c.kex for _, c in todo))
    pages = {**DEFAULT_PAGES, **{c.page: _page_bytes(c.page) for _, c in todo if c.page}}
    status = "interrupted"
    try:
        with contextlib.ExitStack() as opened:
            lanes = _open_lanes(opened, min(spec.lanes, len(todo)), todo[0][1], spec, run_dir,
                                [Site(ports[s], chains[s]) for s in sigs], groups, pages)
            store.update_run(con, run_id, provenance={**provenance(spec), "backend": lanes[0].tb.backend_name,
                                                      "testbed": lanes[0].tb.info(),
                                                      "segments": _segments(con, run_id, lanes)})
            calib_start = calibrate_floor(lanes[0].tb, spec)
            store.update_run(con, run_id, calibration_start=calib_start)
            progress.say(f"emulator floor (TCP connect at 0 ms): p50 {calib_start['p50_ms']:.3f} ms; "
                         f"{len(lanes)} testbed(s)")

            def save(cell: cellmod.Cell, record: dict, samples: list, why: str) -> None:
                store.save_cell(con, run_id, record, samples, record["metric"])
                durations = sorted(s["t_ns"][record["metric"]] / 1e6 for s in samples if s.get("ok"))
                p50 = f"p50 {stats.percentile(durations, 50):.1f} ms" if durations else "no successful sample"
                progress.cell_done(cell.label(), f"n={len(samples)} {p50}, {record['failures']} failed ({why})")

            measure = lambda lane, pos, cell, tail, stop: _measure_on_lane(  # noqa: E731
                lane, pos, cell, spec, chains[cell.sig], ports[cell.sig], tail, stop)
            run_interleaved(lanes, todo, measure, save)
            tb = lanes[0].tb
            tb.reconfigure(LinkSpec())
            calib_end = calibrate_floor(tb, spec)
            warnings = floor_drift_warnings(calib_start, calib_end)
            for w in warnings:
                progress.say(f"warning: {w}")
            store.update_run(con, run_id, calibration_end=calib_end, warnings=warnings)
            _measure_crypto(con, run_id, progress, algs, "end")
        status = "done"
    finally:
        store.finish_run(con, run_id, status)
        con.close()
    return run_id


def _measure_crypto(con, run_id: str, progress, algs: list, when: str) -> None:
    progress.say(f"crypto microbenchmarks of {len(algs)} algorithms at the {when}, {CRYPTO_ROUNDS} rounds "
                 "(input of the lower-bound model)")
    store.save_crypto(con, run_id, crypto.rounds(algs, CRYPTO_ROUNDS, CRYPTO_SECONDS))


def _segments(con, run_id: str, lanes: list) -> list[dict]:
    """What each start or resume of the run ran on: a resumed run keeps its earlier segments."""
    (earlier,) = con.execute("SELECT provenance FROM runs WHERE run_id = ?", [run_id]).fetchone()
    segments = json.loads(earlier).get("segments", []) if earlier else []
    return segments + [{"started": datetime.datetime.now().isoformat(timespec="seconds"), "git_commit": git_commit(),
                        "pqbench": __version__, "testbeds": [lane.tb.info()["name"] for lane in lanes]}]


@dataclasses.dataclass
class Lane:
    """A testbed with its own nginx; it measures one cell at a time."""
    index: int
    tb: Testbed
    scratch: Path
    tcp: TcpKnobs  # what its routes are set to


def _open_lanes(opened: contextlib.ExitStack, count: int, first: cellmod.Cell, spec: Spec, run_dir: Path,
                sites: list, groups: list, pages: dict) -> list[Lane]:
    lanes = []
    for k in range(count):
        tb = opened.enter_context(Testbed(first.link_spec(spec.seed), tcp=first.tcp(), backend=spec.backend))
        server = opened.enter_context(NginxServer(NginxConfig(run_dir / f"nginx-{k}", tb.server_addr, sites,
                                                              groups=groups, workers=spec.workers, pages=pages)))
        server.start(lambda argv, tb=tb, **kw: _noted(tb, tb.popen("server", argv, **kw)),
                     lambda port, tb=tb: tcp_probe(lambda: tb.socket("client"), tb.server_addr, port))
        scratch = run_dir / f"lane-{k}"
        scratch.mkdir(exist_ok=True)
        lanes.append(Lane(k, tb, scratch, first.tcp()))
    return lanes


def run_interleaved(lanes: list, todo: list, measure, save) -> None:
    """Measures the cells in their order, one per lane, and saves each as it finishes.

    A cell starts while others are still running only when each of those is in its tail (all
    samples claimed, a few stragglers waiting for retransmission timers): their CPU then cannot bias
    the new cell, and a lossy cell's last slow handshakes no longer hold up the whole run. When a
    cell fails, the others are stopped (pqtimer.Cancelled, not saved), any that finished meanwhile
    are saved, and the error is raised; on Ctrl-C the cells in progress are dropped.
    measure(lane, pos, cell, tail, stop) -> (record, samples, why); save(cell, record, samples, why)."""
    pending = collections.deque(todo)
    free = list(lanes)
    running: dict = {}  # future -> (lane, cell, tail event)
    stop = threading.Event()
    error: BaseException | None = None
    pool = concurrent.futures.ThreadPoolExecutor(len(lanes), thread_name_prefix="lane")
    try:
        while (pending and error is None) or running:
            if pending and error is None and free and all(tail.is_set() for _, _, tail in running.values()):
                pos, cell = pending.popleft()
                lane, tail = free.pop(0), threading.Event()
                running[pool.submit(measure, lane, pos, cell, tail, stop)] = (lane, cell, tail)
                continue
            finished, _ = concurrent.futures.wait(running, timeout=concurrency.LOOK_S,
                                                  return_when=concurrent.futures.FIRST_COMPLETED)
            for future in finished:
                lane, cell, _ = running.pop(future)
                free.append(lane)
                failure = future.exception()
                if failure is None:
                    save(cell, *future.result())
                elif not isinstance(failure, pqtimer.Cancelled) and error is None:
                    error = failure
                    stop.set()
    finally:
        stop.set()
        pool.shutdown(wait=True)
    if error is not None:
        raise error


def _measure_on_lane(lane: Lane, pos: int, cell: cellmod.Cell, spec: Spec, chain, port: int,
                     tail: threading.Event, stop: threading.Event) -> tuple[dict, list, str]:
    tb = lane.tb
    tb.reconfigure(cell.link_spec(spec.seed))
    if cell.tcp() != lane.tcp:
        tb.set_tcp(cell.tcp())
        lane.tcp = cell.tcp()
    job = _job(cell, spec, tb, chain, port)
    started = datetime.datetime.now()
    tb.reset_counters()
    control = concurrency.policy("auto" if spec.max_bias is not None else spec.parallel,
                                 max_bias=spec.max_bias, maximum=spec.parallel,
                                 rtt_ms=cell.scenario.rtt_ms, mode=cell.mode, requests=cell.requests)
    popen = lambda argv, **kw: _noted(tb, tb.popen("client", argv, **kw))  # noqa: E731
    samples, why = measure_cell(cell, spec, job, popen, lane.scratch, control, tail=tail, stop=stop)
    ok = sum(1 for s in samples if s.get("ok"))
    record = _cell_record(cell, pos, "done" if ok else "failed", None if ok else why,
                          link=cell.link_spec(spec.seed).to_dict(), metric=END_PHASE[cell.mode],
                          n=len(samples), ok=ok, failures=len(samples) - ok,
                          failure_classes=pqtimer.failure_classes(samples), link_counters=tb.counters(),
                          concurrency={**control.summary(), "lane": lane.index},
                          started=started, finished=datetime.datetime.now(), stop_reason=why)
    return record, samples, why


def _page_bytes(name: str) -> int:
    from pqbench import units
    return units.size_bytes("page", name)


def _noted(tb, proc):
    tb.note_process(proc.pid)
    return proc


def _job(cell: cellmod.Cell, spec: Spec, tb, chain, port: int) -> pqtimer.TimerJob:
    return pqtimer.TimerJob(host=tb.server_addr, port=port, groups=[cell.kex], cafile=str(chain.root_cert),
                            servername=chain.server_name, mode=cell.mode, path=f"/{cell.page or '1k'}",
                            requests=cell.requests or 1, warmup=spec.warmup, timeout_ms=spec.timeout_ms,
                            pad=cell.pad)


def calibrate_floor(tb, spec: Spec) -> dict:
    """TCP-connect RTT through the link configured to 0 ms: the emulator's floor."""
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
