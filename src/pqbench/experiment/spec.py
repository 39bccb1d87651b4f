"""Experiment specs: TOML files naming the axes of a sweep, validated with errors that name the field.

    name = "quick"
    seed = 1
    parallel = 4                       # pqtimer workers per cell, or "auto": add workers (up to
    max_parallel = 128                 #   max_parallel) while waiting for the CPU cannot delay a
    max_bias = 0.02                    #   handshake by more than max_bias of its time
    timeout = "10s"                    # per sample
    lanes = 4                          # testbeds: a cell starts while earlier ones only wait for stragglers
    workers = 32                       # nginx worker processes per testbed
    [samples]                          # or: samples = 200 (fixed count)
    min = 50                           # adaptive: stop when the p50 and p95 confidence intervals
    max = 400                          # are narrower than ci (relative half-width), within min..max
    ci = 0.05
    [axes]
    kex = ["X25519", "X25519MLKEM768"]
    sig = ["ecdsap256"]
    rtt = ["5.6ms", "31.1ms"]          # or named link conditions in [[scenario]] tables
    loss = ["0%", "1%", "3%"]
    rate = ["1000mbit"]                # optional: unlimited when absent
    mtu = [1500]
    initcwnd = [10]
    congctl = ["cubic"]                # optional: TCP congestion control of both ends (per route);
                                       #   absent: the host's default (recorded per cell either way)
    page = ["1k", "100k"]              # optional: fetch a page after the handshake
    requests = [1, 10]                 # optional: N GETs on the connection (page 1k unless page set)
    pad = [0, 1100]                    # optional: ClientHello padding bytes
    server = ["openssl", "rustls"]     # optional: server stacks (pqbench.endpoints) × client stacks,
    client = ["openssl", "gotls"]      #   each default openssl; or instead: stack = ["rustls",
                                       #   "rustls/openssl"] (a stack against itself, server/client pairs)
    resume = false                     # optional: TLS 1.3 resumption instead of full handshakes
    protocol = "ssh"                   # optional: "tls" (default), "ssh" or both; kex and sig take
                                       #   either protocol's names (the catalog links them: X25519 is
                                       #   curve25519-sha256 in SSH; a signature SSH has no name for is
                                       #   a size-only host key, sizeonly-NAME); SSH's default stacks:
                                       #   OpenSSH's sshd measured by sshtimer, gossh for ML-DSA host keys
    [[scenario]]
    name = "5G-like"
    rtt = "44ms"
    loss = "4%"
    rate = "880mbit"

Targets (servers pqbench did not start, over the host's own network) replace the link axes:

    rate = 5                           # connections per second at most, one at a time (the default)
    [[target]]
    name = "lab"
    address = "192.0.2.10:443"         # HOST:PORT, or ssh://HOST:PORT
    ca = "lab-root.pem"                # optional: without, verification is recorded, not enforced
    server_name = "lab.example"        # optional: default the host
    [[target]]
    name = "served"
    manifest = "serve.json"            # a `pqbench serve` manifest: one target per axes.sig it serves
    host = "192.0.2.11"                # where to reach it, when it listens on every address
"""

import dataclasses
import itertools
import difflib
import tomllib
from pathlib import Path

from pqbench import units
from pqbench import protocol as proto
from pqbench.endpoints.base import DEFAULT_WORKERS
from pqbench.errors import BadInput
from pqbench.experiment.loadplan import plan_from
from pqbench.remote.target import DEFAULT_RATE, MAX_RATE, from_manifest
from pqbench.remote.target import make as make_target
from pqbench.testbed import cross as crossmod, traces
from pqbench.endpoints.offer import parse_offer
from pqbench.experiment import axes as registry
from pqbench.testbed.linkspec import Aqm

# The experiment's own axes, which shape a cell's whole meaning; every other axis is a registered one
# (pqbench.axis, filled by pqbench.experiment.axes).
CORE_AXES = ("kex", "sig", "rtt", "loss", "rate", "page", "requests", "stack", "server", "client", "protocol", "trace",
             "trace_up", "trace_down", "queue", "cross", "resumption")
# Full / resumed / 0-RTT connections, each asking a page: what deployed clients do (-> the cell's mode).
RESUMPTIONS = {"full": "page", "resumed": "resume_page", "0rtt": "early"}
# Link axes beside rtt/loss/rate (users' links: cellular traces, queue management, competing traffic).
LINK_EXTRA_AXES = ("trace", "trace_up", "trace_down", "queue", "cross")
TOP_KEYS = ("name", "description", "seed", "parallel", "max_parallel", "max_bias", "timeout", "samples", "axes", "scenario", "warmup",
            "backend", "workers", "gemodel", "queue", "calibration_samples", "lanes", "protocol", "target", "rate", "netns",
            "kind", "load")
KINDS = ("handshake", "load")
LOAD_KEYS = ("rates", "start", "max_rate", "step", "time_bound", "max_inflight")
TARGET_KEYS = ("name", "address", "ca", "server_name", "sig", "manifest", "host")
SCENARIO_KEYS = ("name", "rtt", "loss", "rate", "gemodel", "jitter", "queue", "trace", "trace_up", "trace_down", "aqm",
                 "cross")  # mtu, initcwnd: axes for every scenario
DEFAULT_LANES = 4  # enough to hide the 30-60 s tails of lossy cells behind the next cells' work


def axes_allowed() -> tuple[str, ...]:
    """Every key [axes] takes: the experiment's own and the registered ones."""
    return CORE_AXES + tuple(a.name for a in registry.registered() if a.name not in CORE_AXES)


def link_keys() -> tuple[str, ...]:
    """What a target replaces: the emulated link's axes (a target's path is measured instead)."""
    return ("rtt", "loss", "rate") + tuple(a.name for a in registry.registered() if a.path) + LINK_EXTRA_AXES


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A named link condition (published studies' scenarios) or one point of rtt × loss × rate."""
    name: str | None
    rtt_ms: float
    loss: float
    rate_mbit: float | None = None
    gemodel: tuple | None = None  # Gilbert–Elliott (p, r, 1-h, 1-k) instead of Bernoulli loss
    jitter_ms: float = 0.0
    queue: int | None = None
    # Users' links (left out of the link's key when unset, so earlier specs keep their seeds):
    trace_up: str | None = None  # a trace's name (traces/) or file: the rate client -> server follows it
    trace_down: str | None = None  # … server -> client
    aqm: str | None = None  # the queue's management: "codel", "pie target=20ms" (None: drop-tail)
    cross: str | None = None  # competing bulk flows server -> client during the cell: "1 cubic" (None: none)

    def extras(self) -> dict:
        """The users'-link fields that are set."""
        return {k: v for k, v in (("trace_up", self.trace_up), ("trace_down", self.trace_down), ("aqm", self.aqm),
                                  ("cross", self.cross)) if v is not None}


@dataclasses.dataclass(frozen=True)
class Samples:
    min: int
    max: int
    ci: float | None  # None: fixed count (min == max)


@dataclasses.dataclass(frozen=True)
class Spec:
    name: str
    description: str
    seed: int
    parallel: int               # workers per cell; with max_bias, the most "auto" may start
    max_bias: float | None      # None: always `parallel` workers
    timeout_ms: int
    warmup: int
    samples: Samples
    kex: tuple[str, ...]
    sig: tuple[str, ...]
    scenarios: tuple[Scenario, ...]
    page: tuple[str | None, ...]
    requests: tuple[int | None, ...]
    stacks: tuple[tuple[str, str], ...]  # (server, client) stack pairs (pqbench.endpoints); default openssl's
    protocols: tuple[str, ...]  # "tls", "ssh": the protocols of the stack pairs
    stacks_named: bool  # False: each protocol's default pair (pqbench.endpoints.default_pair)
    resume: bool
    backend: str
    workers: int
    lanes: int                  # testbeds with their nginx; cells overlap only in their tails
    calibration_samples: int
    source: str  # the TOML text, stored with the run
    # The registered axes' values (pqbench.axis): name -> the values cells take ((default,) where not named).
    axes: dict = dataclasses.field(default_factory=dict)
    resumption: tuple[str | None, ...] = (None,)  # full / resumed / 0rtt: each connection asks a page
    targets: tuple = ()  # pqbench.remote.target.Target: when given, cells are algorithms × targets (no link axes)
    rate: float = DEFAULT_RATE  # a target's pace: connections per second at most, one at a time
    netns: str | None = None  # targets' clients run in this existing namespace instead of the host's
    load: object = None  # kind = "load": a pqbench.experiment.loadplan.LoadPlan per cell (server capacity), else None

    def __getattr__(self, name: str):
        """A registered axis's values by its name (spec.congctl, spec.mtu)."""
        if name.startswith("__") or name == "axes" or name not in self.axes:
            raise AttributeError(name)
        return self.axes[name]


def _list(field: str, value, allowed: str) -> list:
    if isinstance(value, list):
        if not value:
            raise BadInput(field, f"must not be empty ({allowed})")
        return value
    return [value]


def _unknown(field: str, table: dict, allowed) -> None:
    extra = sorted(set(table) - set(allowed))
    if extra:
        close = difflib.get_close_matches(extra[0], allowed, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise BadInput(f"{field}{extra[0]}", f"unknown key ({hint}allowed: {', '.join(allowed)}; see docs/spec.md)")


def _gemodel(field: str, value) -> tuple:
    from pqbench.testbed.linkspec import parse_gemodel
    loss = parse_gemodel(field, ",".join(str(v) for v in value) if isinstance(value, list) else value)
    return (loss.p, loss.r, loss.one_minus_h, loss.one_minus_k)


def _scenario(field: str, t: dict) -> Scenario:
    _unknown(f"{field}.", t, SCENARIO_KEYS)
    if "name" not in t:
        raise BadInput(f"{field}.name", "every [[scenario]] needs a name")
    return Scenario(
        name=str(t["name"]), rtt_ms=units.duration_ms(f"{field}.rtt", t.get("rtt", 0)),
        loss=units.probability(f"{field}.loss", t.get("loss", 0)),
        rate_mbit=units.rate_mbit(f"{field}.rate", t["rate"]) if "rate" in t else None,
        gemodel=_gemodel(f"{field}.gemodel", t["gemodel"]) if "gemodel" in t else None,
        jitter_ms=units.duration_ms(f"{field}.jitter", t.get("jitter", 0)),
        queue=units.integer(f"{field}.queue", t["queue"], minimum=1) if "queue" in t else None,
        **_users_link(field, t.get("trace"), t.get("trace_up"), t.get("trace_down"), t.get("aqm"), t.get("cross"),
                      "rate" in t, keys=("trace", "trace_up", "trace_down", "aqm", "cross")))


def _users_link(field: str, trace, trace_up, trace_down, aqm, cross, has_rate: bool, keys=LINK_EXTRA_AXES) -> dict:
    """One point of the users'-link axes as Scenario fields: traces resolved to files (checked line by line),
    the queue discipline and the competing flows parsed (bad values: BadInput naming the field)."""
    k_trace, k_up, k_down, k_aqm, k_cross = (f"{field}.{k}" if field else k for k in keys)
    if trace is not None and (trace_up is not None or trace_down is not None):
        raise BadInput(k_trace, "names both directions' traces: give trace, or trace_up/trace_down, not both")
    up = traces.canonical(trace, "up", field_name=k_trace) if trace is not None else \
        traces.canonical(trace_up, field_name=k_up) if trace_up is not None else None
    down = traces.canonical(trace, "down", field_name=k_trace) if trace is not None else \
        traces.canonical(trace_down, field_name=k_down) if trace_down is not None else None
    for key, name in ((k_up, up), (k_down, down)):
        if name is not None:
            traces.info(name, field_name=key)  # checked line by line now, not when the cell starts
    if (up or down) and has_rate:
        raise BadInput(k_trace, "a trace sets the link's rate: leave out rate where a trace is given")
    out = {"trace_up": up, "trace_down": down}
    if aqm is not None and str(aqm) != "droptail":
        out["aqm"] = Aqm.parse(str(aqm), k_aqm).to_text()
    found = crossmod.parse(k_cross, cross)
    if found is not None:
        out["cross"] = found.label()
    return {k: v for k, v in out.items() if v is not None}


def _users_link_axes(axes: dict, has_rate: bool) -> list[dict]:
    """Every combination of the trace, queue and cross axes, as Scenario fields ([{}] without them)."""
    lists = {k: list(enumerate(_list(f"axes.{k}", axes[k], "values"))) if k in axes else [(None, None)]
             for k in LINK_EXTRA_AXES}
    return [_users_link("", *(v for _, v in combo), has_rate,
                        keys=tuple(k if i is None else f"axes.{k}[{i}]" for k, (i, _) in zip(LINK_EXTRA_AXES, combo)))
            for combo in itertools.product(*lists.values())]


def _samples(value) -> Samples:
    if isinstance(value, int) and not isinstance(value, bool):
        n = units.integer("samples", value, minimum=1, maximum=1_000_000)
        return Samples(n, n, None)
    if not isinstance(value, dict):
        raise BadInput("samples", "must be a whole number or a table with min, max and ci")
    _unknown("samples.", value, ("min", "max", "ci"))
    lo = units.integer("samples.min", value.get("min", 30), minimum=5, maximum=1_000_000)
    hi = units.integer("samples.max", value.get("max", max(lo, 200)), minimum=lo, maximum=1_000_000)
    ci = value.get("ci", 0.05)
    if not isinstance(ci, (int, float)) or not 0 < ci < 1:
        raise BadInput("samples.ci", f"{ci!r} must be a relative half-width between 0 and 1 (e.g. 0.05)")
    return Samples(lo, hi, float(ci))


def parse(text: str, origin: str = "spec") -> Spec:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadInput(origin, f"not valid TOML: {e}") from None
    _unknown("", data, TOP_KEYS)
    axes = data.get("axes", {})
    if not isinstance(axes, dict):
        raise BadInput("axes", "must be a table")
    _unknown("axes.", axes, axes_allowed() + ("resume",))
    if "offer" in axes and "kex" in axes:
        raise BadInput("axes.offer", "names the key exchanges (each offer's first key share): leave out kex")
    for required in ("kex",) if "target" in data else ("kex", "sig"):
        if required not in axes and not (required == "kex" and "offer" in axes):
            raise BadInput(f"axes.{required}", "is required (a list of algorithm names)")

    if "target" in data:
        return _with_targets(text, data, axes, Path(origin))
    stacks, protocols = _stacks(axes, _protocols(data, axes))
    values = registered_values(axes, protocols)
    kex = _kex(axes, values, protocols)
    sig = tuple(_algorithm(f"axes.sig[{i}]", s, "sig", protocols)
                for i, s in enumerate(_list("axes.sig", axes["sig"], "signature names")))

    raw_scenarios = data.get("scenario", [])
    link_axes = [a for a in ("rtt", "loss", "rate") if a in axes]
    if raw_scenarios and link_axes:
        raise BadInput(f"axes.{link_axes[0]}", "use either [[scenario]] tables or rtt/loss/rate axes, not both")
    for key in ("gemodel", "queue"):
        if raw_scenarios and key in data:
            raise BadInput(key, "applies to the rtt/loss/rate axes; with [[scenario]] tables set it in each scenario")
    if raw_scenarios:
        scenarios = tuple(_scenario(f"scenario[{i}]", t) for i, t in enumerate(raw_scenarios))
        names = [s.name for s in scenarios]
        if len(set(names)) != len(names):
            raise BadInput("scenario", f"names must be unique (got {names})")
    else:
        rtts = [units.duration_ms(f"axes.rtt[{i}]", v) for i, v in enumerate(_list("axes.rtt", axes.get("rtt", 0), "durations"))]
        losses = [units.probability(f"axes.loss[{i}]", v) for i, v in enumerate(_list("axes.loss", axes.get("loss", 0), "percentages"))]
        rates = [units.rate_mbit(f"axes.rate[{i}]", v) for i, v in enumerate(_list("axes.rate", axes["rate"], "rates"))] \
            if "rate" in axes else [None]
        gem = _gemodel("gemodel", data["gemodel"]) if "gemodel" in data else None
        queue = units.integer("queue", data["queue"], minimum=1) if "queue" in data else None
        extras = _users_link_axes(axes, "rate" in axes)
        scenarios = tuple(Scenario(None, r, l, b, gem, queue=queue, **x)
                          for r in rtts for l in losses for b in rates for x in extras)

    backend = data.get("backend", "auto")
    if backend not in ("auto", "pqlink", "netem"):
        raise BadInput("backend", f"{backend!r} is not one of auto, pqlink, netem")
    for key in ("rate", "netns"):
        if key in data:
            raise BadInput(key, "applies to [[target]] specs only (the link's rate is axes.rate)")
    parallel = _parallel(data)
    if any(s.trace_up or s.trace_down for s in scenarios) and (parallel["max_bias"] is not None or parallel["parallel"] > 1):
        raise BadInput("parallel", "a trace restarts at the next offset with each connection: cells with a trace "
                                   "need parallel = 1 (one handshake at a time, each at its own offset)")
    load = _load(data, axes)
    if load is not None:  # the protocol's load generator is the client; one lane, so cells never share CPUs
        from pqbench import endpoints
        stacks = tuple(dict.fromkeys((srv, endpoints.load_client(endpoints.get(srv).protocol)) for srv, _ in stacks))
    return Spec(**_common(text, data, Path(origin)), kex=kex, sig=sig, scenarios=scenarios, **_workload(axes),
                resumption=_resumption(axes), axes=values, stacks=stacks, protocols=protocols,
                stacks_named=any(a in axes for a in ("stack", "server", "client")), backend=backend,
                lanes=1 if load else units.integer("lanes", data.get("lanes", DEFAULT_LANES), minimum=1, maximum=16),
                **parallel, load=load)


def _load(data: dict, axes: dict):
    """kind = "load": the [load] table as a LoadPlan (refused when its steps cannot fit its time bound)."""
    kind = data.get("kind", "handshake")
    if kind not in KINDS:
        raise BadInput("kind", f"{kind!r} is not one of {', '.join(KINDS)}")
    table = data.get("load")
    if kind != "load":
        if table is not None:
            raise BadInput("load", 'applies with kind = "load"')
        return None
    table = table or {}
    if not isinstance(table, dict):
        raise BadInput("load", "must be a table (rates, step, time_bound …)")
    _unknown("load.", table, LOAD_KEYS)
    if "client" in axes:
        raise BadInput("axes.client", "load cells use their protocol's load generator (pqload, sshload) as the client")
    for a in registry.registered():
        if a.name in axes and not a.path and not a.for_load_generator:
            raise BadInput(f"axes.{a.name}", "asks something of the client, and load cells' client is their "
                                            "protocol's load generator (pqload, sshload), which takes none of it")
    return plan_from(lambda key: f"load.{key}", table.get("rates", "ramp"), table.get("start", 25),
                     table.get("max_rate", 20000), table.get("step", "2s"), table.get("time_bound", "300s"),
                     max_inflight=units.integer("load.max_inflight", table.get("max_inflight", 4096), minimum=1,
                                                maximum=1_000_000),
                     seed=units.integer("seed", data.get("seed", 1), minimum=0, maximum=2**31 - 1))


def registered_values(axes: dict, protocols: tuple[str, ...]) -> dict:
    """The registered axes' values (pqbench.axis), each checked: a value no protocol of the spec can take, and
    an axis named where no cell could take it (QUIC's Retry without QUIC), are refused naming the field."""
    values = {a.name: a.values(axes) for a in registry.registered()}
    for a in registry.registered():
        if a.name in axes and not any(a.for_protocol(p) for p in protocols):
            raise BadInput(f"axes.{a.name}", a.protocol_text())
        if a.admits and a.name in axes:
            for i, v in enumerate(values[a.name]):
                if all(a.admits(v, p) for p in protocols):
                    raise BadInput(f"axes.{a.name}[{i}]", a.admits(v, protocols[0]))
        if a.applies and a.name in axes:
            others = [[(b, v) for v in values[b]] for b in values if b != a.name]
            if not any(a.applies(dict(combo)) for combo in itertools.product(*others)):
                raise BadInput(f"axes.{a.name}", a.needs_text or "applies to no cell of this spec")
    return values


def _kex(axes: dict, values: dict, protocols: tuple[str, ...]) -> tuple[str, ...]:
    """The key exchanges: axes.kex, or each offer's first key share."""
    if values["offer"] != (None,):
        return tuple(dict.fromkeys(parse_offer(o).shares[0] for o in values["offer"]))
    return tuple(_algorithm(f"axes.kex[{i}]", k, "kem", protocols)
                 for i, k in enumerate(_list("axes.kex", axes["kex"], "key exchange names")))


def _resumption(axes: dict) -> tuple:
    """Full / resumed / 0-RTT connections, each asking a page ((None,) where not given)."""
    if "resumption" not in axes:
        return (None,)
    if "requests" in axes or axes.get("resume"):
        raise BadInput("axes.resumption", "asks a page on each connection: not with requests or resume")
    out = []
    for i, v in enumerate(_list("axes.resumption", axes["resumption"], "connection kinds")):
        if v not in RESUMPTIONS:
            raise BadInput(f"axes.resumption[{i}]", f"{v!r} is not one of {', '.join(RESUMPTIONS)}")
        out.append(v)
    return tuple(out)


def _workload(axes: dict) -> dict:
    """What each connection does, whatever the servers and the path: page, requests, resume."""
    page = tuple(units.page(f"axes.page[{i}]", v) for i, v in enumerate(_list("axes.page", axes["page"], "sizes"))) \
        if "page" in axes else (None,)
    requests = tuple(units.integer(f"axes.requests[{i}]", v, minimum=1, maximum=100000)
                     for i, v in enumerate(_list("axes.requests", axes["requests"], "counts"))) \
        if "requests" in axes else (None,)
    resume = axes.get("resume", False)
    if not isinstance(resume, bool):
        raise BadInput("axes.resume", "must be true or false")
    if resume and (page != (None,) or requests != (None,)):
        raise BadInput("axes.resume", "cannot be combined with page or requests")
    return {"page": page, "requests": requests, "resume": resume}


def _common(text: str, data: dict, origin: Path) -> dict:
    """The settings every spec has, whatever its servers and path."""
    name = data.get("name", origin.stem)
    if not isinstance(name, str) or not name:
        raise BadInput("name", "must be a non-empty string")
    return dict(
        name=name, description=str(data.get("description", "")),
        seed=units.integer("seed", data.get("seed", 1), minimum=0, maximum=2**31 - 1),
        timeout_ms=int(units.duration_ms("timeout", data.get("timeout", "10s"), allow_zero=False)),
        warmup=units.integer("warmup", data.get("warmup", 1), minimum=0, maximum=1000),
        samples=_samples(data.get("samples", {"min": 30, "max": 200, "ci": 0.05})),
        workers=units.integer("workers", data.get("workers", DEFAULT_WORKERS), minimum=1, maximum=256),
        calibration_samples=units.integer("calibration_samples", data.get("calibration_samples", 200),
                                          minimum=10, maximum=100_000),
        source=text)


def _with_targets(text: str, data: dict, axes: dict, origin: Path) -> Spec:
    """A spec whose servers are targets: algorithms × targets × pages/requests, measured over the host's
    network one connection at a time (one lane), the client stacks from axes.client."""
    for key in link_keys():
        if key in axes:
            raise BadInput(f"axes.{key}", "targets replace the link axes: their path is measured, not emulated")
    for key in ("scenario", "gemodel", "queue", "backend", "lanes", "protocol"):
        if key in data:
            raise BadInput(key, "does not apply with [[target]]: " + (
                "a target's protocol is its address's (HOST:PORT is TLS, ssh://HOST:PORT SSH)" if key == "protocol"
                else "one lane measures the targets, over the host's network (no emulated link)"))
    for key in ("stack", "server", "protocol"):
        if key in axes:
            raise BadInput(f"axes.{key}", "the targets are the servers; axes.client names the client stacks")
    if data.get("parallel", 1) != 1 or "max_parallel" in data or "max_bias" in data:
        raise BadInput("parallel", "targets are measured one connection at a time (rate sets the pace)")
    raw = data["target"] if isinstance(data["target"], list) else [data["target"]]
    here = origin.parent  # a target's files are named relative to the spec

    def file(value) -> Path:
        return here / Path(str(value)).expanduser()
    sigs = [str(s) for s in _list("axes.sig", axes["sig"], "signature names")] if "sig" in axes else []
    targets = []
    for i, t in enumerate(raw):
        field = f"target[{i}]"
        if not isinstance(t, dict):
            raise BadInput(field, "must be a table ([[target]] with name, address …)")
        _unknown(f"{field}.", t, TARGET_KEYS)
        if ("manifest" in t) == ("address" in t):
            raise BadInput(f"{field}.address", "give either address (HOST:PORT or ssh://HOST:PORT) or manifest")
        name = str(t.get("name") or t.get("address") or f"target{i}")
        if "manifest" in t:
            for sig in ([t["sig"]] if "sig" in t else sigs) or [None]:
                if sig is None:
                    raise BadInput(f"{field}.sig", "a manifest target needs the signature algorithms to measure "
                                                   "(its sig, or axes.sig)")
                try:  # a TLS chain by any of its names; else an SSH host key, as the manifest names it
                    sig = _algorithm(f"{field}.sig", sig, "sig", ("tls",))
                except BadInput:
                    sig = str(sig)
                many = "sig" not in t and len(sigs) > 1
                targets.append(from_manifest(field, file(t["manifest"]), sig, host=t.get("host"),
                                                       name=f"{name}/{sig}" if many else name))
        else:
            targets.append(make_target(field, t["address"], name=name, ca=file(t["ca"]) if "ca" in t else None,
                                          server_name=t.get("server_name"), sig=t.get("sig")))
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise BadInput("target", f"names must be unique (got {names})")
    protocols = tuple(dict.fromkeys(t.protocol for t in targets))
    from pqbench import endpoints
    clients = [endpoints.get(str(v), f"axes.client[{i}]").name
               for i, v in enumerate(_list("axes.client", axes["client"], "stack names"))] if "client" in axes else \
        [proto.get(p).default_pair[1] for p in protocols]
    stacks = tuple((endpoints.target_stack(p).name, c) for p in protocols for c in clients
                   if endpoints.get(c).protocol == p)
    values = registered_values(axes, protocols)
    kex = _kex(axes, values, protocols)
    netns = data.get("netns")
    if netns is not None and (not isinstance(netns, str) or not netns):
        raise BadInput("netns", "must be the name of an existing network namespace")
    return Spec(**_common(text, data, origin), kex=kex, sig=tuple(dict.fromkeys(t.credentials.sig for t in targets)),
                scenarios=(), **_workload(axes), axes={"pad": values["pad"]}, stacks=stacks,
                protocols=protocols, stacks_named=True, backend="real", lanes=1, parallel=1,
                max_bias=None, targets=tuple(targets),
                rate=units.number("rate", data.get("rate", DEFAULT_RATE), minimum=0.01, maximum=MAX_RATE), netns=netns)


def _algorithm(field: str, value, kind: str, protocols: tuple[str, ...]) -> str:
    """The catalog's spelling of an algorithm name: a TLS-only spec keeps catalog names as before; a
    spec with SSH keeps the name as given (either protocol's: the catalog links them), each cell takes
    its protocol's name for it. Unknown names list the closest names of the spec's protocol."""
    from pqbench.algorithms import catalog  # names are checked against the catalog; availability at run time
    only = protocols[0] if len(protocols) == 1 else None
    if protocols == (proto.DEFAULT,):
        return catalog.checked(str(value), kind, proto.DEFAULT, field)
    try:
        return catalog.spelled(str(value), kind, field=field)
    except BadInput:
        return catalog.spelled(str(value), kind, field=field, protocol=only)


def _protocols(data: dict, axes: dict) -> tuple[str, ...] | None:
    """The protocols asked for (axes.protocol, or a top-level protocol), None when neither is given."""
    if "protocol" in data and "protocol" in axes:
        raise BadInput("protocol", "give it once: at the top or in [axes]")
    field = "axes.protocol" if "protocol" in axes else "protocol"
    value = axes.get("protocol", data.get("protocol"))
    if value is None:
        return None
    out = []
    for i, v in enumerate(_list(field, value, " or ".join(proto.names()))):
        if v not in proto.names():
            raise BadInput(f"{field}[{i}]" if isinstance(value, list) else field,
                           f"{v!r} is not one of {', '.join(proto.names())}")
        out.append(v)
    return tuple(dict.fromkeys(out))


def _stacks(axes: dict, protocols: tuple[str, ...] | None) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """(server, client) pairs and their protocols. `stack` lists pairs by name: "rustls" is rustls
    against itself, "rustls/openssl" a rustls server measured by the openssl client; `server` × `client`
    crosses stacks instead (pairs that speak one protocol; each axis defaults to the protocols' default
    stacks). Without either, each protocol's default pair (pqbench.protocol's record)."""
    from pqbench import endpoints

    def name(axis: str, i: int, value: str) -> str:
        return endpoints.get(value, f"axes.{axis}[{i}]").name

    if not any(a in axes for a in ("stack", "server", "client")):
        protocols = protocols or (proto.DEFAULT,)
        return tuple(proto.get(p).default_pair for p in protocols), protocols
    pairs = _named_pairs(axes, name, protocols)
    # a pair named across protocols stays: its cells are skipped with the reason (endpoints.unsupported)
    speaks = {pair: endpoints.get(pair[0]).protocol for pair in pairs}
    for (server, client), p in speaks.items():
        if protocols and p not in protocols:
            raise BadInput("axes.stack", f"{server if server == client else f'{server}/{client}'} speaks {p}, but "
                                         f"protocol is {', '.join(protocols)}")
    for i, p in enumerate(protocols or ()):
        if p not in speaks.values():  # a protocol no named pair speaks would make no cell at all
            field = "axes.protocol" if "protocol" in axes else "protocol"
            stacks = ", ".join(n for n in endpoints.names() if endpoints.get(n).protocol == p)
            raise BadInput(f"{field}[{i}]" if len(protocols) > 1 else field,
                           f"{p!r} makes no cell: none of the stacks named in axes speaks {p} ({p} stacks: {stacks})")
    return pairs, protocols or tuple(dict.fromkeys(speaks.values()))


def _named_pairs(axes: dict, name, protocols) -> tuple[tuple[str, str], ...]:
    from pqbench import endpoints

    if "stack" in axes:
        crossed = [a for a in ("server", "client") if a in axes]
        if crossed:
            raise BadInput(f"axes.{crossed[0]}", "use either stack (pairs by name) or server/client, not both")
        pairs = []
        for i, v in enumerate(_list("axes.stack", axes["stack"], "stack names, or server/client pairs")):
            parts = str(v).split("/")
            if len(parts) > 2:
                raise BadInput(f"axes.stack[{i}]", f"{v!r} is neither a stack nor a server/client pair")
            pairs.append((name("stack", i, parts[0]), name("stack", i, parts[-1])))
        return tuple(dict.fromkeys(pairs))

    role = {"server": 0, "client": 1}
    defaults = [proto.get(p).default_pair for p in (protocols or proto.names())]  # pairs across protocols drop out below

    def names(axis: str) -> list[str]:
        given = axes.get(axis, [pair[role[axis]] for pair in defaults])
        return [name(axis, i, str(v)) for i, v in enumerate(_list(f"axes.{axis}", given, "stack names"))]
    servers, clients = names("server"), names("client")
    pairs = tuple((srv, cli) for srv in servers for cli in clients
                  if endpoints.get(srv).protocol == endpoints.get(cli).protocol)
    for axis, values, k in (("server", servers, 0), ("client", clients, 1)):
        for i, v in enumerate(values):
            if axis in axes and not any(pair[k] == v for pair in pairs):  # a named stack that makes no cell
                other = "client" if axis == "server" else "server"
                raise BadInput(f"axes.{axis}[{i}]", f"{v} speaks {endpoints.get(v).protocol}, and no {other} stack "
                                                    f"of the spec does: {v} makes no cell")
    return pairs


def _parallel(data: dict) -> dict:
    value = data.get("parallel", 1)
    if value != "auto":
        for key in ("max_parallel", "max_bias"):
            if key in data:
                raise BadInput(key, 'only applies with parallel = "auto"')
        if isinstance(value, str) and not value.strip().isdigit():
            raise BadInput("parallel", f'{value!r} is neither a whole number in 1..256 nor "auto"')
        return {"parallel": units.integer("parallel", value, minimum=1, maximum=256), "max_bias": None}
    return {"parallel": units.integer("max_parallel", data.get("max_parallel", 128), minimum=1, maximum=256),
            "max_bias": units.fraction("max_bias", data.get("max_bias", 0.02), minimum=0.001, maximum=0.5)}


def read(path: Path) -> Spec:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise BadInput("SPEC", f"cannot read {path}: {e.strerror}") from None
    return parse(text, origin=str(path))
