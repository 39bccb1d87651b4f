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
from pqbench.endpoints.offer import parse_offer, parse_server_groups
from pqbench.errors import BadInput, MissingCapability
from pqbench.experiment.cells import Cell
from pqbench.experiment.spec import Samples, Scenario, Spec
from pqbench.measure.session import Session
from pqbench.sample import END_PHASE
from pqbench.remote.target import DEFAULT_RATE, Target, client_problem
from pqbench.testbed import EmulatorOptions, LinkSpec, TcpKnobs

MODE_OPTIONS = {"resume": "--resume", "page": "--page", "requests": "--requests", "resume_page": "--resume --page",
                "early": "--early-data"}  # the option that asks for a mode


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How a single-cell command measures its cell, beyond the cell (pqbench.experiment.cells.Cell, the record a
    spec's cells are): what a run's spec and link say of its cells, from the command line."""
    link: LinkSpec = dataclasses.field(default_factory=LinkSpec)
    tcp: TcpKnobs = dataclasses.field(default_factory=TcpKnobs)
    n: int = 100
    parallel: int | str = 1  # or "auto" (pqbench.measure.concurrency.Auto within max_bias, up to max_parallel)
    max_bias: float = 0.02
    max_parallel: int = 128
    warmup: int = 0
    timeout_ms: int = 10_000
    backend: str = "auto"
    emulator: EmulatorOptions = dataclasses.field(default_factory=EmulatorOptions)
    workers: int = DEFAULT_WORKERS  # server worker processes
    target: Target | None = None  # a server pqbench did not start, over the host's network (no emulated link)
    rate: float = DEFAULT_RATE  # a target's pace: connections per second at most, one at a time
    netns: str | None = None  # a target's client side in this existing namespace instead of the host's
    # The server compresses its chain for a client that offers an algorithm; None: as the cell's compress axis
    # (a spec's cells compress where their clients offer).
    compress_certs: bool | None = None

    def check(self) -> None:
        units.integer("-n", self.n, minimum=1)
        if self.parallel != "auto":
            units.integer("--parallel", self.parallel, minimum=1, maximum=256)


# The axes a single-cell command's cell holds a value of whether given or not (their defaults here), as its
# cells always have: the rest are left to the cell's defaults (pqbench.experiment.cells.Cell).
SINGLE_CELL_AXES = {"pad": 0, "offer": None, "server_groups": None, "compress": None, "transport": None,
                    "quic_retry": False, "initial_size": None, "chain": None, "chain_bytes": None}
# Those its JSON's "config" names with keys of their own, as `handshake --json` did before its options came
# from the registry (compress is its "cert_compression"); the others go under "axes".
CONFIG_AXES = {**{k: v for k, v in SINGLE_CELL_AXES.items() if k != "compress"}, "transport": transportmod.DEFAULT}


def config_json(cell: Cell, options: RunOptions) -> dict:
    """The `handshake --json` object's "config": the cell and the options it was measured with, in the keys
    it always had."""
    values = dict(cell.axes)
    named = {k: values.get(k) if values.get(k) is not None else default for k, default in CONFIG_AXES.items()}
    others = {k: v for k, v in values.items()
              if k not in CONFIG_AXES and k not in ("compress", "mtu", "initcwnd", "congctl") and v is not None}
    d = {"kex": cell.kex, "sig": cell.sig, "mode": cell.mode, "page": cell.page, "requests": cell.requests or 1,
         "server": cell.server, "client": cell.client, "protocol": cell.protocol, "stack": cell.stack, **named,
         "cert_compression": values.get("compress") or "none", "compress_certs": _compresses(cell, options),
         **{f.name: getattr(options, f.name) for f in dataclasses.fields(options)
            if f.name not in ("link", "target", "compress_certs")},
         "spec": options.link.to_dict(), "tcp": options.tcp.to_dict(), "emulator": dataclasses.asdict(options.emulator),
         "target": options.target.to_json() if options.target else None}
    if others:
        d["axes"] = others  # the JSON of a cell without them is as it was before they could be given
    return d


def _compresses(cell: Cell, options: RunOptions) -> bool:
    return options.compress_certs if options.compress_certs is not None else cell.compress is not None


def new_run_dir(prefix: str = "handshake") -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    d = paths.BUILD / "runs" / f"{prefix}-{stamp}-{os.getpid()}"
    d.mkdir(parents=True, exist_ok=False)
    return d


def _names(kex: str, sig: str, protocol: str, target: Target | None) -> tuple[str, str]:
    """The key exchange and signature (SSH: host key) by their canonical names, checked."""
    p = proto.get(protocol)
    kex = catalog.checked(kex, "kem", p.name, "--kex")
    if target:
        return kex, target.credentials.sig
    if not p.chains:
        return kex, sshkeys.check_hostkey(sig, p.sig_option)
    return kex, catalog.checked(sig, "sig", p.name, p.sig_option)


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
                **({"size_only": c.to_json()["size_only"]} if getattr(c, "size_only", False) else {}),
                **({"mtc": c.parts["mtc"]} if (getattr(c, "parts", None) or {}).get("mtc") else {}),
                **({"bytes_sent_by_client": c.parts["client"]["sent"]}
                   if (getattr(c, "parts", None) or {}).get("client") else {})}


def cell_of(kex: str, sig: str, options: RunOptions, *, protocol: str = proto.DEFAULT, server: str | None = None,
            client: str = endpoints.DEFAULT_STACK, mode: str = "handshake", page: str | None = None,
            requests: int | None = None, values: dict | None = None) -> Cell:
    """The Cell a spec would make of a single-cell command's options, checked (exit 2 naming the option).
    values: the registered axes' values as given (pqbench.commands.axis_options; offer and server_groups in their
    notations, compress the client's algorithms or None); the path's come from the options' link. With
    options.target, the target's stack serves and its chain is the signature."""
    if mode not in END_PHASE:
        raise BadInput("mode", f"{mode!r} is not one of {', '.join(END_PHASE)}")
    options.check()
    target = options.target
    if target:
        _check_target(options, protocol, client)
    server_st = endpoints.target_stack(protocol) if target else endpoints.get(server or endpoints.DEFAULT_STACK,
                                                                                "--server")
    client_st = endpoints.get(client, "--client")
    for role, st in (("--server", server_st), ("--client", client_st)):
        if st.protocol != protocol:
            raise BadInput(role, f"{st.name} speaks {st.protocol}, not {protocol} (stacks: "
                                 f"{', '.join(n for n in endpoints.names() if endpoints.get(n).protocol == protocol)})")
    given = {**SINGLE_CELL_AXES, **{a.name: a.default_of(protocol) for a in axis.registered() if a.default_for},
             **(values or {})}
    over = transportmod.check(protocol, given["transport"], "--transport")
    given["transport"] = None if over.is_default else over.name
    for name in ("quic_retry", "initial_size"):
        if axis.get(name).is_set(given[name]) and not axis.get(name).applies(given):  # the axis's own rule
            raise BadInput(axis.get(name).command_option, "applies with --transport quic")
    if given["initial_size"] is not None:
        axis.get("initial_size").parse("--initial-size", given["initial_size"])
    refused = axis.refusal({k: v for k, v in given.items() if k not in ("quic_retry", "initial_size")}, protocol, given)
    if refused:
        raise BadInput(refused[0].command_option, refused[1])
    kex, sig = _names(kex, sig, protocol, target)
    offer, server_groups = _offer(given, protocol, kex, target)
    given.update(offer=offer.notation() if offer else None,
                 server_groups=server_groups.openssl() if server_groups else None,
                 mtu=options.link.mtu, initcwnd=options.tcp.initcwnd, congctl=options.tcp.congctl)
    given = {name: axis.get(name).value_for(given, v) for name, v in given.items()}
    return Cell(kex, sig, Scenario(target.name if target else None, options.link.rtt_ms,
                                   options.link.client_to_server.loss.mean), mode, page,
                requests if mode == "requests" else None, server_st.name, client_st.name, protocol,
                target.name if target else None, axes=tuple(given.items()))


def one_cell(kex: str, sig: str, **given) -> tuple[Cell, RunOptions]:
    """(cell_of's cell, its options) from keyword arguments of either, the rest being axis values (library
    callers: `one_cell("X25519", "mldsa44", n=5, server="rustls", transport="quic", link=...)`)."""
    fields = {f.name for f in dataclasses.fields(RunOptions)}
    options = RunOptions(**{k: v for k, v in given.items() if k in fields})
    rest = {k: v for k, v in given.items() if k not in fields}
    cell_kw = {k: rest.pop(k) for k in ("protocol", "server", "client", "mode", "page", "requests") if k in rest}
    return cell_of(kex, sig, options, **cell_kw, values=rest), options


def measure(cell: Cell, options: RunOptions, run_dir: Path | None = None, progress=None) -> Measured:
    """Brings up a rig and measures options.n samples of the cell (cell_of's) as a one-cell run; the raw samples
    go to run_dir/samples.jsonl (analysis.single summarises them). A stack named the first time is built here."""
    server, client = endpoints.get(cell.server, "--server"), endpoints.get(cell.client, "--client")
    over = transportmod.get(cell.transport)
    ondemand.ensure([server.name, client.name], progress, transports=[over.name],
                    algorithms=ondemand.names_in([cell.kex, cell.sig, cell.offer, cell.server_groups]))
    for role, st in (("server", server), ("client", client)):
        if cell.mode not in st.capabilities().transport_modes.get(over.name, st.capabilities().modes):
            option = MODE_OPTIONS.get(cell.mode, cell.mode)
            can = [n for n in endpoints.names() if endpoints.get(n).protocol == cell.protocol
                   and cell.mode in endpoints.get(n).capabilities().modes]
            raise MissingCapability(f"{option}: the {st.name} {role} has no {cell.mode} mode",
                                    f"measure {option} with --{role} {' or '.join(can)}")
    compress_certs = _compresses(cell, options)
    why = endpoints.unsupported(server.name, client.name, cell.kex, cell.sig, cell.mode,
                                {**dict(cell.axes), "compress_certs": compress_certs})
    if why:
        raise MissingCapability(f"cannot measure {cell.kex} with {cell.sig} here: {why}",
                                "pick other stacks or algorithms (`pqbench algorithms` shows what each stack offers)")
    run_dir = run_dir or new_run_dir()
    say = progress or (lambda msg: None)
    say(f"{proto.get(cell.protocol).credentials_word}: {cell.sig}")
    # the one cell as a run's would be, on the command line's link (its options reach further than a spec's)
    with Session(_one_cell_spec(cell, options), [cell], run_dir, lanes=1, link=options.link, tcp=options.tcp,
                 emulator=options.emulator, site_fields={"compress_certs": compress_certs}) as session:
        tb = session.path
        say(f"target {cell.target}, over the host's network" if cell.target else
            f"testbed {tb.name} up ({tb.backend_name}): {options.link.describe()}")
        say(f"measuring {options.n} × {cell.mode} with {options.parallel} {client.name} worker(s)")
        record, samples, _ = session.measure_fields(session.lanes[0], cell)
        backend, chain = tb.backend_name, session.site_of(cell).chain
    (run_dir / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    return Measured(samples, record, chain, backend, run_dir)


def _one_cell_spec(cell: Cell, options: RunOptions) -> Spec:
    """The command line as a spec of one cell: what the session reads of a run's spec."""
    auto = options.parallel == "auto"
    return Spec(name=f"{cell.protocol}-handshake", description="", seed=options.link.seed or 0,
                parallel=options.max_parallel if auto else options.parallel,
                max_bias=options.max_bias if auto else None, timeout_ms=options.timeout_ms, warmup=options.warmup,
                samples=Samples(options.n, options.n, None), kex=(cell.kex,), sig=(cell.sig,),
                scenarios=(cell.scenario,), page=(cell.page,), requests=(cell.requests,),
                stacks=((cell.server, cell.client),), protocols=(cell.protocol,), stacks_named=True,
                resume=cell.mode == "resume", backend=options.backend, workers=options.workers, lanes=1,
                calibration_samples=0, source="", axes={k: (v,) for k, v in cell.axes},
                targets=(options.target,) if options.target else (), rate=options.rate, netns=options.netns)


def _offer(given: dict, protocol: str, kex: str, target: Target | None):
    """The given offer and server groups, parsed (None where not given); kex must be a group the offer
    lists. A target serves what it serves: server groups do not apply."""
    offer = parse_offer(given["offer"], "--offer") if given["offer"] is not None else None
    server_groups = parse_server_groups(given["server_groups"], "--server-groups") \
        if given["server_groups"] is not None else None
    if not proto.get(protocol).key_shares and (offer or server_groups):
        raise BadInput("--offer" if offer else "--server-groups",
                       f"applies to {' and '.join(p.label for p in proto.registered() if p.key_shares)} only")
    if offer and kex not in offer.groups:
        raise BadInput("--kex", f"{kex} is not among the offer's groups ({', '.join(offer.groups)})")
    if server_groups and target:
        raise BadInput("--server-groups", "a target serves its own groups")
    if server_groups and offer and not set(server_groups.groups) & set(offer.groups):
        raise BadInput("--server-groups", f"no group in common with the offer ({offer.notation()}): "
                                          "the handshake could not succeed")
    return offer, server_groups


def _check_target(options: RunOptions, protocol: str, client: str) -> None:
    """A target's link is the real path and its pace one connection at a time: the emulator's options
    and --parallel do not apply."""
    target = options.target
    if options.link != LinkSpec() or options.tcp != TcpKnobs():
        raise BadInput("--target", f"a target is reached over the host's network: the link options "
                                   f"({options.link.describe()}) apply to the emulated link only")
    if options.parallel != 1:
        raise BadInput("--parallel", "a target is measured one connection at a time (--rate sets the pace)")
    if target.protocol != protocol:
        raise BadInput("--target", f"{target.address} is an {proto.get(target.protocol).label} address")
    endpoints.target_stack(protocol)  # exit 3 for a protocol measured only against servers pqbench starts
    why = client_problem(target, client)
    if why:
        raise BadInput("--client", why)
