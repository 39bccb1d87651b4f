"""`pqbench load`: one load cell from the command line, on a testbed of its own (as `pqbench handshake`
is one handshake cell): the server stack serving the chain (SSH: host key) asked, its protocol's load
generator in the client namespace."""

from __future__ import annotations

import dataclasses

from pqbench import endpoints
from pqbench.endpoints import ondemand
from pqbench.endpoints.base import DEFAULT_PAGES, DEFAULT_WORKERS, Serving, Site
from pqbench.errors import MissingCapability
from pqbench.experiment.loadplan import LoadPlan
from pqbench.measure.capacity import measure_cell
from pqbench.measure.rig import Rig, credentials
from pqbench.measure.single import new_run_dir
from pqbench.testbed import LinkSpec, TcpKnobs

PORT = 4433


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


def run(cfg: LoadConfig, progress=None) -> dict:
    """Measures the load cell; the record's fields with its steps."""
    say = progress or (lambda msg: None)
    server = endpoints.get(cfg.server, "--server")
    client = endpoints.load_client(server.protocol)
    ondemand.ensure([server.name, client], say)
    why = endpoints.unsupported(server.name, client, cfg.kex, cfg.sig, "handshake")
    if why:
        raise MissingCapability(f"cannot load {cfg.kex} with {cfg.sig} here: {why}",
                                "pick another server stack or algorithm (`pqbench algorithms`)")
    run_dir = new_run_dir("load")
    chain = credentials(server.protocol, cfg.sig, run_dir / "credentials")
    serving = Serving(run_dir / "server", [Site(PORT, chain)], [cfg.kex], dict(DEFAULT_PAGES), cfg.workers)
    with Rig.pairs({server.name: serving}, [client], cfg.link, cfg.tcp) as rig:
        say(f"testbed {rig.tb.name} up: {cfg.link.describe()}; {server.name} serving {cfg.kex} + {cfg.sig}")
        job = rig.job(PORT, cfg.kex, chain, timeout_ms=cfg.timeout_ms)
        record, _ = measure_cell(rig, cfg.plan, cfg.link, cfg.tcp, job, server.name, client)
    record["run_dir"] = str(run_dir)
    for when in ("started", "finished"):
        record[when] = record[when].isoformat(timespec="seconds")
    return record
