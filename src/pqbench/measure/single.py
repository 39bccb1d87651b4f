"""`pqbench handshake` and `pqbench ssh`: one measurement point as a one-cell run, through the same session
as a run's cells (pqbench.measure.session): the stack's server serving the chain for the signature algorithm,
its client making n connections in total, on the link the command line describes. analysis.single
summarises it with the same cell statistics as a run's cells.
"""

import dataclasses
import datetime
import json
import os
from pathlib import Path

from pqbench import axis, endpoints, paths, units
from pqbench import protocol as proto
from pqbench import transport as transportmod
from pqbench.algorithms import catalog
from pqbench.endpoints import ondemand, sshkeys
from pqbench.endpoints.base import DEFAULT_WORKERS
from pqbench.endpoints.offer import parse_cert_compression, parse_offer, parse_server_groups
from pqbench.errors import BadInput, MissingCapability
from pqbench.experiment.cells import Cell
from pqbench.experiment.spec import Samples, Scenario, Spec
from pqbench.measure.session import Session
from pqbench.sample import END_PHASE
from pqbench.remote.target import DEFAULT_RATE, Target, client_problem
from pqbench.testbed import EmulatorOptions, LinkSpec, TcpKnobs

PORT = 4433
MODE_OPTIONS = {"resume": "--resume", "page": "--page", "requests": "--requests", "resume_page": "--resume --page",
                "early": "--early-data"}  # the option that asks for a mode


@dataclasses.dataclass
class HandshakeConfig:
    kex: str
    sig: str
    spec: LinkSpec = dataclasses.field(default_factory=LinkSpec)
    tcp: TcpKnobs = dataclasses.field(default_factory=TcpKnobs)
    n: int = 100
    parallel: int | str = 1  # or "auto" (pqbench.measure.concurrency.Auto within max_bias, up to max_parallel)
    max_bias: float = 0.02
    max_parallel: int = 128
    mode: str = "handshake"
    page: str | None = None  # page name served (1k, 10k, …) for page/requests modes
    requests: int = 1
    pad: int = 0
    warmup: int = 0
    timeout_ms: int = 10_000
    backend: str = "auto"
    emulator: EmulatorOptions = dataclasses.field(default_factory=EmulatorOptions)
    workers: int = DEFAULT_WORKERS  # server worker processes
    server: str = endpoints.DEFAULT_STACK  # server stack (pqbench.endpoints)
    client: str = endpoints.DEFAULT_STACK  # client stack
    protocol: str = proto.DEFAULT  # or "ssh" (`pqbench ssh`: kex and sig take SSH names, sig is the host key)
    target: Target | None = None  # a server pqbench did not start, over the host's network (no emulated link)
    rate: float = DEFAULT_RATE  # a target's pace: connections per second at most, one at a time
    netns: str | None = None  # a target's client side in this existing namespace instead of the host's
    # The client's groups and key shares (pqbench.endpoints.offer's notation; None: one share for kex) and
    # the server's groups in OpenSSL's tuple syntax with its preference order (None: the offer's groups, or
    # kex, as one tuple).
    offer: str | None = None
    server_groups: str | None = None
    cert_compression: str = "none"  # what the client offers: none, all, or zlib/brotli/zstd (comma-separated)
    compress_certs: bool = False  # the server compresses its chain for a client that offers an algorithm
    transport: str = "tcp"  # pqbench.transport.TRANSPORTS
    quic_retry: bool = False  # QUIC: the server validates the client's address with Retry first
    initial_size: int | None = None  # QUIC: the client's Initial datagram size (None: the client's default)
    chain: str | None = None  # the chain's shape (pqbench.algorithms.chain_axes; None: root -> leaf)
    chain_bytes: int | None = None  # a padded, size-only chain of this many bytes
    # The other axes' values (pqbench.axis: the command line's generated options), by name.
    axes: dict = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        if not self.axes:
            del d["axes"]  # the JSON of a cell without them is as it was before they could be given
        d["stack"] = self.server if self.server == self.client else f"{self.server}/{self.client}"
        d["spec"] = self.spec.to_dict()
        d["tcp"] = self.tcp.to_dict()
        d["emulator"] = dataclasses.asdict(self.emulator)
        d["target"] = self.target.to_json() if self.target else None
        return d


def new_run_dir(prefix: str = "handshake") -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    d = paths.BUILD / "runs" / f"{prefix}-{stamp}-{os.getpid()}"
    d.mkdir(parents=True, exist_ok=False)
    return d


def _names(cfg: HandshakeConfig) -> tuple[str, str]:
    """The key exchange and signature (SSH: host key) by their canonical names, checked."""
    p = proto.get(cfg.protocol)
    kex = catalog.checked(cfg.kex, "kem", p.name, "--kex")
    if cfg.target:
        return kex, cfg.target.credentials.sig
    if not p.chains:
        return kex, sshkeys.check_hostkey(cfg.sig, p.sig_option)
    return kex, catalog.checked(cfg.sig, "sig", p.name, p.sig_option)


@dataclasses.dataclass
class Measured:
    """One cell measured from the CLI: its samples, the cell's record (detector, wire, link counters …),
    the credentials the server used, the link backend and the folder holding it all."""
    samples: list[dict]
    record: dict
    chain: object
    backend: str
    run_dir: Path

    def chain_json(self) -> dict:
        c = self.chain
        return {"sig": c.sig, "bytes_sent_by_server": c.sent_bytes,
                **({"der_sizes": c.der_sizes} if hasattr(c, "der_sizes") else {}),
                **({"size_only": c.to_json()["size_only"]} if getattr(c, "size_only", False) else {})}


def measure(cfg: HandshakeConfig, run_dir: Path | None = None, progress=None) -> Measured:
    """Checks the configuration, brings up a rig and measures cfg.n samples as one cell; the raw
    samples go to run_dir/samples.jsonl (analysis.single summarises them)."""
    if cfg.mode not in END_PHASE:
        raise BadInput("mode", f"{cfg.mode!r} is not one of {', '.join(END_PHASE)}")
    units.integer("-n", cfg.n, minimum=1)
    if cfg.parallel != "auto":
        units.integer("--parallel", cfg.parallel, minimum=1, maximum=256)
    if cfg.target:
        _check_target(cfg)
    server = endpoints.target_stack(cfg.protocol) if cfg.target else endpoints.get(cfg.server, "--server")
    client = endpoints.get(cfg.client, "--client")
    for role, st in (("--server", server), ("--client", client)):
        if st.protocol != cfg.protocol:
            raise BadInput(role, f"{st.name} speaks {st.protocol}, not {cfg.protocol} (stacks: "
                                 f"{', '.join(n for n in endpoints.names() if endpoints.get(n).protocol == cfg.protocol)})")
    over = transportmod.check(cfg.protocol, cfg.transport, "--transport")
    for name, option, given in (("quic_retry", "--quic-retry", cfg.quic_retry),
                                ("initial_size", "--initial-size", cfg.initial_size is not None)):
        if given and not axis.get(name).applies({"transport": over.name}):  # the axis's own rule
            raise BadInput(option, "applies with --transport quic")
    if cfg.initial_size is not None:
        axis.get("initial_size").parse("--initial-size", cfg.initial_size)
    refused = axis.refusal(cfg.axes, cfg.protocol, _axis_values(cfg, over, None, None))
    if refused:
        raise BadInput(refused[0].command_option, refused[1])
    # built the first time they are named
    ondemand.ensure([server.name, client.name], progress, transports=[over.name],
                    algorithms=ondemand.names_in([cfg.kex, cfg.sig, cfg.offer, cfg.server_groups]))
    for role, st in (("server", server), ("client", client)):
        if cfg.mode not in st.capabilities().transport_modes.get(over.name, st.capabilities().modes):
            option = MODE_OPTIONS.get(cfg.mode, cfg.mode)
            can = [n for n in endpoints.names() if endpoints.get(n).protocol == cfg.protocol
                   and cfg.mode in endpoints.get(n).capabilities().modes]
            raise MissingCapability(f"{option}: the {st.name} {role} has no {cfg.mode} mode",
                                    f"measure {option} with --{role} {' or '.join(can)}")
    kex, sig = _names(cfg)
    offer, server_groups = _offer(cfg, kex)
    values = _axis_values(cfg, over, offer, server_groups)
    why = endpoints.unsupported(server.name, client.name, kex, sig, cfg.mode,
                                {**values, "compress_certs": cfg.compress_certs})
    if why:
        raise MissingCapability(f"cannot measure {kex} with {sig} here: {why}",
                                "pick other stacks or algorithms (`pqbench algorithms` shows what each stack offers)")
    run_dir = run_dir or new_run_dir()
    say = progress or (lambda msg: None)
    say(f"{proto.get(cfg.protocol).credentials_word}: {sig}")
    cell = Cell(kex, sig, Scenario(cfg.target.name if cfg.target else None, cfg.spec.rtt_ms,
                                   cfg.spec.client_to_server.loss.mean), cfg.mode, cfg.page,
                cfg.requests if cfg.mode == "requests" else None, server.name, client.name, cfg.protocol,
                cfg.target.name if cfg.target else None, axes=tuple(values.items()))
    # the one cell as a run's would be, on the command line's link (its options reach further than a spec's)
    with Session(_one_cell_spec(cfg, cell), [cell], run_dir, lanes=1, link=cfg.spec, tcp=cfg.tcp,
                 emulator=cfg.emulator, site_fields={"compress_certs": cfg.compress_certs}) as session:
        tb = session.path
        say(f"target {cfg.target.name}, over the host's network" if cfg.target else
            f"testbed {tb.name} up ({tb.backend_name}): {cfg.spec.describe()}")
        say(f"measuring {cfg.n} × {cfg.mode} with {cfg.parallel} {client.name} worker(s)")
        record, samples, _ = session.measure_fields(session.lanes[0], cell)
        backend, chain = tb.backend_name, session.site_of(cell).chain
    (run_dir / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    return Measured(samples, record, chain, backend, run_dir)


def _axis_values(cfg: HandshakeConfig, over, offer, server_groups) -> dict:
    """The registered axes' values of the command line's one cell (pqbench.axis)."""
    return {"offer": offer.notation() if offer else None,
            "server_groups": server_groups.openssl() if server_groups else None,
            "compress": None if cfg.cert_compression == "none" else cfg.cert_compression,
            "transport": None if over.is_default else over.name,
            "quic_retry": axis.get("quic_retry").value_for({"transport": over.name}, cfg.quic_retry),
            "initial_size": cfg.initial_size, "pad": cfg.pad, "mtu": cfg.spec.mtu,
            "initcwnd": cfg.tcp.initcwnd, "congctl": cfg.tcp.congctl,
            "chain": cfg.chain, "chain_bytes": cfg.chain_bytes, **cfg.axes}


def _one_cell_spec(cfg: HandshakeConfig, cell: Cell) -> Spec:
    """The configuration as a spec of one cell: what the session reads of a run's spec."""
    auto = cfg.parallel == "auto"
    return Spec(name=f"{cfg.protocol}-handshake", description="", seed=cfg.spec.seed or 0,
                parallel=cfg.max_parallel if auto else cfg.parallel, max_bias=cfg.max_bias if auto else None,
                timeout_ms=cfg.timeout_ms, warmup=cfg.warmup, samples=Samples(cfg.n, cfg.n, None),
                kex=(cell.kex,), sig=(cell.sig,), scenarios=(cell.scenario,), page=(cell.page,),
                requests=(cell.requests,), stacks=((cell.server, cell.client),), protocols=(cfg.protocol,),
                stacks_named=True, resume=cfg.mode == "resume", backend=cfg.backend, workers=cfg.workers, lanes=1,
                calibration_samples=0, source="", axes={k: (v,) for k, v in cell.axes},
                targets=(cfg.target,) if cfg.target else (), rate=cfg.rate, netns=cfg.netns)


def _offer(cfg: HandshakeConfig, kex: str):
    """The configuration's offer and server groups, parsed (None where not given); kex must be a group the
    offer lists. A target serves what it serves: server groups do not apply."""
    offer = parse_offer(cfg.offer, "--offer") if cfg.offer is not None else None
    server_groups = parse_server_groups(cfg.server_groups, "--server-groups") if cfg.server_groups is not None else None
    if not proto.get(cfg.protocol).key_shares and (offer or server_groups):
        raise BadInput("--offer" if offer else "--server-groups",
                       f"applies to {' and '.join(p.label for p in proto.registered() if p.key_shares)} only")
    if offer and kex not in offer.groups:
        raise BadInput("--kex", f"{kex} is not among the offer's groups ({', '.join(offer.groups)})")
    if server_groups and cfg.target:
        raise BadInput("--server-groups", "a target serves its own groups")
    if server_groups and offer and not set(server_groups.groups) & set(offer.groups):
        raise BadInput("--server-groups", f"no group in common with the offer ({offer.notation()}): "
                                          "the handshake could not succeed")
    cfg.cert_compression = parse_cert_compression(cfg.cert_compression, "--cert-compression")
    return offer, server_groups


def _check_target(cfg: HandshakeConfig) -> None:
    """A target's link is the real path and its pace one connection at a time: the emulator's options
    and --parallel do not apply."""
    if cfg.spec != LinkSpec() or cfg.tcp != TcpKnobs():
        raise BadInput("--target", f"a target is reached over the host's network: the link options "
                                   f"({cfg.spec.describe()}) apply to the emulated link only")
    if cfg.parallel != 1:
        raise BadInput("--parallel", "a target is measured one connection at a time (--rate sets the pace)")
    if cfg.target.protocol != cfg.protocol:
        raise BadInput("--target", f"{cfg.target.address} is an {cfg.target.protocol.upper()} address")
    why = client_problem(cfg.target, cfg.client)
    if why:
        raise BadInput("--client", why)
