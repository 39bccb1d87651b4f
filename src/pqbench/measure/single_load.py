"""`pqbench load`: one load cell from the command line, measured through a run's session on a testbed of its
own (as `pqbench handshake` is one handshake cell): the server stack serving the chain (SSH: host key) asked,
its protocol's load generator in the client namespace."""

from __future__ import annotations

import dataclasses

from pqbench import axis, endpoints
from pqbench.endpoints import ondemand
from pqbench.endpoints.base import DEFAULT_WORKERS
from pqbench.errors import BadInput, MissingCapability
from pqbench.experiment.cells import Cell
from pqbench.experiment.loadplan import LoadPlan
from pqbench.experiment.spec import Samples, Scenario, Spec
from pqbench.measure.session import Session
from pqbench.measure.single import new_run_dir
from pqbench.testbed import LinkSpec, TcpKnobs


@dataclasses.dataclass
class LoadConfig:
    kex: str
    sig: str
    server: str = "openssl"
    plan: LoadPlan = dataclasses.field(default_factory=LoadPlan)
    link: LinkSpec = dataclasses.field(default_factory=LinkSpec)
    tcp: TcpKnobs = dataclasses.field(default_factory=TcpKnobs)
    workers: int = DEFAULT_WORKERS
    timeout_ms: int = 10_000
    axes: dict = dataclasses.field(default_factory=dict)  # the other axes' values (pqbench.axis), by name


def run(cfg: LoadConfig, progress=None) -> dict:
    """Measures the load cell, through the same session as a run's load cells; the record's fields with its
    steps."""
    say = progress or (lambda msg: None)
    server = endpoints.get(cfg.server, "--server")
    client = endpoints.load_client(server.protocol)
    ondemand.ensure([server.name, client], say, algorithms=[cfg.kex, cfg.sig])
    values = {"mtu": cfg.link.mtu, "initcwnd": cfg.tcp.initcwnd, "congctl": cfg.tcp.congctl, **cfg.axes}
    refused = axis.refusal(cfg.axes, server.protocol, values)
    if refused:
        raise BadInput(refused[0].command_option, refused[1])
    why = endpoints.unsupported(server.name, client, cfg.kex, cfg.sig, "handshake", values)
    if why:
        raise MissingCapability(f"cannot load {cfg.kex} with {cfg.sig} here: {why}",
                                "pick another server stack or algorithm (`pqbench algorithms`)")
    run_dir = new_run_dir("load")
    cell = Cell(cfg.kex, cfg.sig, Scenario(None, cfg.link.rtt_ms, cfg.link.client_to_server.loss.mean),
                server=server.name, client=client, protocol=server.protocol, kind="load", axes=tuple(values.items()))
    spec = Spec(name="load", description="", seed=cfg.link.seed or 0, parallel=1, max_bias=None,
                timeout_ms=cfg.timeout_ms, warmup=0, samples=Samples(1, 1, None), kex=(cfg.kex,), sig=(cfg.sig,),
                scenarios=(cell.scenario,), page=(None,), requests=(None,), stacks=((server.name, client),),
                protocols=(server.protocol,), stacks_named=True, resume=False, backend="auto", workers=cfg.workers,
                lanes=1, calibration_samples=0, source="", axes={k: (v,) for k, v in values.items()}, load=cfg.plan)
    with Session(spec, [cell], run_dir, lanes=1, link=cfg.link, tcp=cfg.tcp) as session:
        say(f"testbed {session.path.name} up: {cfg.link.describe()}; {server.name} serving {cfg.kex} + {cfg.sig}")
        record, _, _ = session.measure_fields(session.lanes[0], cell)
    record["run_dir"] = str(run_dir)
    for when in ("started", "finished"):
        record[when] = record[when].isoformat(timespec="seconds")
    return record
