"""A session: one machine's part of a run, from its servers to its last cell. The local runner (`pqbench run`) and
a cluster's node both drive one; `pqbench serve` is the server half of the same thing.

    with Session(spec, cells, run_dir, lanes=4) as session:     # servers and lanes (rigs) come up
        start = session.calibrate(), session.crypto()           # the emulator's floor; crypto rounds
        session.run(todo, save)                                 # each cell measured, saved as it ends
        end = session.calibrate(), session.crypto()             # the same at the end
                                                                # leaving: every lane and server goes

A cell's kind picks its measurement from one table (MEASURES): handshake samples (measure.cell) or a server's
capacity (measure.capacity). Servers pqbench starts serve a port per certificate chain (SSH: host key set) and
per way of serving it that the cells ask for (pqbench.axis: Site fields), with every key exchange of the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
from pathlib import Path

from pqbench import axis, units
from pqbench import protocol as proto
from pqbench.algorithms import catalog, microbench
from pqbench.algorithms import chains as chainmod
from pqbench.algorithms.chain_axes import credential_key
from pqbench.endpoints.base import DEFAULT_PAGES, Serving, Site
from pqbench.endpoints.offer import parse_offer
from pqbench.endpoints.remote import UNKNOWN_SIG
from pqbench.experiment import cells as cellmod
from pqbench.experiment.spec import Spec
from pqbench.measure import cell as cellmeasure
from pqbench.measure import concurrency, wire
from pqbench.measure.capacity import measure_cell as measure_capacity
from pqbench.measure.rig import Rig, credentials
from pqbench.measure.schedule import run_interleaved
from pqbench.remote.target import pause_ms
from pqbench.testbed import EmulatorOptions, LinkSpec, TcpKnobs, cross
from pqbench.testbed.calibrate import measure_floor
from pqbench.testbed.realpath import RealPath

# Crypto microbenchmarks at the start and end of each segment: rounds seconds apart, each
# algorithm CRYPTO_SECONDS per round (a third per operation).
CRYPTO_ROUNDS = 3
# seconds per algorithm and round; PQBENCH_CRYPTO_SECONDS shortens them where the figures are not what is wanted
# (the test suite: 1.8 s of CPU per 2-algorithm run at its start and again at its end, at 0.3)
CRYPTO_SECONDS = float(os.environ.get("PQBENCH_CRYPTO_SECONDS", 0.3))
FIRST_PORT = 4433
DEFAULT_MAX_BIAS = 0.02  # the detector's margin for fixed-parallel specs


@dataclasses.dataclass
class Lane:
    """A rig that measures one cell at a time."""
    index: int
    rig: Rig
    scratch: Path


class Session:
    """Servers and lanes for a set of cells on this machine, and what is measured with them."""

    def __init__(self, spec: Spec, cells: list[cellmod.Cell], run_dir: Path, *, lanes: int,
                 chains: dict | None = None, link: LinkSpec | None = None, tcp: TcpKnobs | None = None,
                 emulator: EmulatorOptions | None = None, site_fields: dict | None = None):
        """cells: those this session may measure (their servers serve them all); chains: the credentials
        ((protocol, sig) -> chain) when made elsewhere (a cluster's driver ships its own), else made here.
        A one-cell spec from the command line (`pqbench handshake`, `pqbench ssh`) brings what its options say
        beyond a spec's axes: the link and TCP knobs (per direction, queue bytes …), the emulator's options and
        what its servers do beyond the cell (site_fields: Site fields, e.g. no compression for a client that
        offers it)."""
        self.spec, self.cells, self.run_dir, self.count = spec, list(cells), Path(run_dir), lanes
        self.link, self.tcp, self.emulator, self.site_fields = link, tcp, emulator, site_fields or {}
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.chains = chains if chains is not None else make_credentials(self.cells, self.run_dir)
        self.site_of, self._servings = servers(spec, self.cells, self.run_dir, self.chains, self.site_fields)
        self.algs = crypto_algorithms([n for c in self.cells for n in (c.kex, c.sig)])
        self.budget = concurrency.Budget()  # every lane's workers draw from one CPU budget
        self.lanes: list[Lane] = []
        self._opened = contextlib.ExitStack()

    def __enter__(self) -> "Session":
        try:
            self._open_lanes()
        except BaseException:
            self._opened.close()
            raise
        return self

    def __exit__(self, *exc) -> bool:
        self._opened.close()
        return False

    def _open_lanes(self) -> None:
        first = self.cells[0]
        clients = sorted({c.client for c in self.cells})
        for k in range(min(self.count, len(self.cells))):
            path = RealPath(netns={"client": self.spec.netns} if self.spec.netns else None) \
                if self.spec.targets else None
            rig = self._opened.enter_context(Rig.pairs(self._servings(k), clients, self._link(first), self._tcp(first),
                                                       backend=self.spec.backend, emulator=self.emulator, index=k,
                                                       path=path))
            scratch = self.run_dir / f"lane-{k}"
            scratch.mkdir(parents=True, exist_ok=True)
            self.lanes.append(Lane(k, rig, scratch))

    def _link(self, cell: cellmod.Cell) -> LinkSpec:
        return self.link or cell.link_spec(self.spec.seed)

    def _tcp(self, cell: cellmod.Cell) -> TcpKnobs:
        return self.tcp or cell.tcp()

    @property
    def path(self):
        """The first lane's path (a Testbed, or the real path to targets)."""
        return self.lanes[0].rig.tb

    def calibrate(self) -> dict | None:
        """The emulator's floor, the link at 0 ms (None on a real path)."""
        return calibrate_floor(self.path, self.spec)

    def crypto(self) -> list:
        """One start's or end's crypto microbenchmark rounds (input of the lower-bound model)."""
        return microbench.rounds(self.algs, CRYPTO_ROUNDS, CRYPTO_SECONDS)

    def measure(self, lane: Lane, pos: int, cell: cellmod.Cell, tail, stop):
        """One cell on one lane: (its store record, samples, why it stopped)."""
        fields, samples, why = self.measure_fields(lane, cell, tail, stop)
        if credential_key(cell.values()) and not cell.target:  # the chain's bytes by part (chain axes' column)
            fields["chain_parts"] = self.site_of(cell).chain.parts
        return record(cell, pos, fields), samples, why

    def measure_fields(self, lane: Lane, cell: cellmod.Cell, tail=None, stop=None):
        """What was measured of one cell on one lane, by its kind: (fields, samples, why); competing flows
        (the cross axis) run through it."""
        flows = cross.parse("cross", cell.scenario.cross) if cell.scenario.cross else None
        if flows:
            lane.rig.tb.reconfigure(cell.link_spec(self.spec.seed))  # the flows meet the cell's link from their start
        with cross.running(lane.rig.tb, flows) as moved:
            fields, samples, why = MEASURES[cell.kind](self, lane, cell, tail, stop)
        if flows:
            fields["cross_traffic"] = moved
        return fields, samples, why

    def run(self, todo: list, save) -> None:
        """The (position, cell) pairs in their order over the lanes (schedule.run_interleaved); save(cell,
        record, samples, why) as each ends."""
        run_interleaved(self.lanes, todo, self.measure, save)

    def plan(self, cell: cellmod.Cell, rig: Rig) -> cellmeasure.Plan:
        """What a cell asks of its lane: its link, TCP knobs, and the client's job at its site."""
        site = self.site_of(cell)
        spec = self.spec
        job = rig.job(site.port, cell.kex, site.chain, host=site.host, mode=cell.mode, path=f"/{cell.page or '1k'}",
                      requests=cell.requests or 1, warmup=spec.warmup, timeout_ms=spec.timeout_ms,
                      pause_ms=pause_ms(spec.rate) if cell.target else 0, **axis.job_fields(cell.values()))
        return cellmeasure.Plan(self._link(cell), self._tcp(cell), job, spec.samples,
                                spec.max_bias if spec.max_bias is not None else DEFAULT_MAX_BIAS,
                                client=cell.client, server=cell.server)


def _handshakes(session: Session, lane: Lane, cell: cellmod.Cell, tail, stop):
    """Handshake samples until the cell's stopping rule says enough (measure.cell)."""
    spec = session.spec
    control = concurrency.policy("auto" if spec.max_bias is not None else spec.parallel,
                                 max_bias=spec.max_bias, maximum=spec.parallel,
                                 rtt_ms=cell.scenario.rtt_ms, mode=cell.mode, requests=cell.requests,
                                 budget=session.budget, transport=cell.transport)
    fields, samples, why = cellmeasure.measure(lane.rig, session.plan(cell, lane.rig), control, lane.scratch,
                                               tail=tail, stop=stop)
    fields["concurrency"] = {**fields["concurrency"], "lane": lane.index}
    return fields, samples, why


def _capacity(session: Session, lane: Lane, cell: cellmod.Cell, tail, stop):
    """A server's capacity: offered rates in steps until it saturates (measure.capacity)."""
    plan = session.plan(cell, lane.rig)
    fields, why = measure_capacity(lane.rig, session.spec.load, plan.link, plan.tcp, plan.job, cell.server,
                                   cell.client, stop=stop)
    return fields, [], why


# A cell's kind (Cell.kind; None: handshake samples) -> its measurement: (session, lane, cell, tail, stop) ->
# (record fields, samples, why it stopped).
MEASURES = {None: _handshakes, "load": _capacity}


def make_credentials(cells: list[cellmod.Cell], run_dir: Path) -> dict:
    """(protocol, sig, *chain) -> what the servers prove themselves with, made once per run under run_dir (a
    cluster's driver ships these very files to its nodes); chain: the chain axes' part (chain_axes.credential_key,
    empty for today's chain). None for targets: they bring their own."""
    keys = sorted({(c.protocol, c.sig, *credential_key(c.values())) for c in cells if not c.target}, key=str)
    return {key: credentials(key[0], key[1], run_dir / proto.get(key[0]).credentials_dir
                             / chainmod.directory_name(key[1], *(key[2:] or (None, None))), key[2:])
            for key in keys}


def servers(spec: Spec, cells: list[cellmod.Cell], run_dir: Path, chains: dict, fields: dict | None = None):
    """(site_of(cell), servings(lane)): where each cell's server answers, and what each lane's servers
    serve. Servers pqbench starts serve a port per credentials (certificate chain, SSH host keys) with
    every key exchange of the run (fields: Site fields set for every site); a target is one site that is
    already there."""
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
        chain = chains[(protocol, sig, *credential_key(axis.site_fields(tuple(axes)).get("options", {})))]
        return Site(ports[srv, key], chain, early_data=early,
                    **{**axis.site_fields(tuple(axes)), **(fields or {})})

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
    """A cell's row for the store: its id, its place in the run's order, its parameters and what was measured."""
    return {"cell_id": cell.cell_id, "position": position, **cell.params(), **fields}


def calibrate_floor(tb, spec: Spec) -> dict | None:
    """TCP-connect RTT through the link configured to 0 ms: the emulator's floor. None on a real path:
    no emulator, and each cell measures its path instead."""
    if not tb.emulated:
        return None
    saved = tb.spec
    tb.reconfigure(LinkSpec())
    try:
        floor = measure_floor(tb, spec.calibration_samples)
        normal = measure_floor(tb, spec.calibration_samples, realtime=False)  # as a browser's process is scheduled
    finally:
        tb.reconfigure(saved)
    return {**floor_figures(floor), "when": datetime.datetime.now().isoformat(timespec="seconds"),
            "normal": floor_figures(normal)}


def floor_figures(floor: dict) -> dict:
    """A floor's percentiles (calibrate.measure_floor) as a run stores them, with what this machine lets the clock
    of a client scheduled as its probe was claim."""
    out = {**{f"{k}_ms": floor[k] for k in ("p5", "p25", "p50", "p75", "p95", "p99", "mean", "stall_p95")
              if k in floor}, "n": floor.get("n")}
    return {**out, "agreement_allowance_ms": wire.allowance_ms(out)}
