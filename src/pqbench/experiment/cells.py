"""A spec expanded into cells (grid points), each with a stable id, in a randomised order.

A cell names its algorithms as its protocol does (SSH cells: SSH names, pqbench.algorithms.catalog links them).
Cells whose algorithms this build cannot use are kept as skipped with the reason, never
silently dropped. The link seed depends only on the link condition, not on the algorithms, so every
algorithm at the same condition sees the same loss pattern (paired comparisons).
"""

import dataclasses
import hashlib
import itertools
import json
import random

from pqbench import axis, endpoints
from pqbench import protocol as proto
from pqbench.algorithms import catalog
from pqbench.experiment.condition import describe
from pqbench.endpoints import DEFAULT_STACK
from pqbench.errors import BadInput
from pqbench.endpoints.offer import parse_offer
from pqbench.experiment import axes as registry
from pqbench.experiment.spec import RESUMPTIONS, Scenario, Spec
from pqbench.testbed import LinkSpec, Loss, TcpKnobs
from pqbench.testbed.linkspec import Aqm
from pqbench.transport import DEFAULT as DEFAULT_TRANSPORT


USERS_LINK_FIELDS = ("trace_up", "trace_down", "aqm", "cross")
# Not part of the seed: a cell with competing flows or a managed queue meets the same loss pattern and trace
# phases as the same link without them, so what they add is a paired comparison.
SEEDLESS = ("aqm", "cross")


def users_link_params(s: Scenario) -> dict:
    """The cells columns of a scenario's users'-link fields, only those set (cell ids stay as before):
    trace (a trace's name when both directions follow it, else "up / down"), queue, cross."""
    out = {}
    if s.trace_up or s.trace_down:
        out["trace"] = trace_label(s.trace_up, s.trace_down)
    if s.aqm:
        out["queue"] = s.aqm
    if s.cross:
        out["cross"] = s.cross
    return out


def trace_label(up: str | None, down: str | None) -> str:
    """A shipped trace's name when both directions follow its two files, else "up / down"."""
    stem = lambda name: name.rsplit(".", 1)[0] if name and name.endswith((".up", ".down")) else name  # noqa: E731
    if up and down and stem(up) == stem(down) and up != down:
        return stem(up)
    return f"{up or 'fixed rate'} / {down or 'fixed rate'}"


@dataclasses.dataclass(frozen=True)
class Cell:
    """One grid point: the experiment's own axes as fields, the registered axes' values (pqbench.axis) in
    `axes`, readable as attributes too (cell.transport, cell.mtu)."""
    kex: str
    sig: str
    scenario: Scenario
    mode: str = "handshake"
    page: str | None = None
    requests: int | None = None
    server: str = DEFAULT_STACK
    client: str = DEFAULT_STACK
    protocol: str = proto.DEFAULT
    target: str | None = None  # a target's name: a server pqbench did not start, over a measured path
    kind: str | None = None  # "load": server capacity (pqbench.measure.capacity); None: handshake samples
    axes: tuple = ()  # (name, value) of every registered axis, in registry order

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        a = axis.get(name)
        if a is None:
            raise AttributeError(f"Cell has no attribute or axis {name!r}")
        given = dict(self.axes)
        return given[name] if name in given else a.value_for(given, a.default)

    @classmethod
    def of_target(cls, target, kex: str, mode: str, page, requests, pad: int, client: str) -> "Cell":
        """A cell against a target: its path is the host's network (no link parameters), its server the
        target's endpoint, its signature algorithm the target's chain (named, or unknown until sent)."""
        return cls(kex, target.credentials.sig, Scenario(target.name, 0.0, 0.0), mode, page, requests,
                   endpoints.target_stack(target.protocol).name, client, target.protocol, target.name,
                   axes=(("mtu", None), ("initcwnd", None), ("pad", pad)))

    @property
    def stack(self) -> str:
        """The pair as one label: the stack's name when it measures itself, else "server/client"."""
        return self.server if self.server == self.client else f"{self.server}/{self.client}"

    def values(self) -> dict:
        """Every registered axis's value for this cell, with what its checks read of the cell itself."""
        return {**{a.name: getattr(self, a.name) for a in axis.registered()}, "kex": self.kex, "sig": self.sig,
                "protocol": self.protocol, "mode": self.mode}

    def params(self) -> dict:
        """The cell's parameters as the store's cells columns."""
        s = self.scenario
        loss_model = "bernoulli" if not s.gemodel else "gemodel " + ",".join(f"{v:g}" for v in s.gemodel)
        link = {"rtt_ms": s.rtt_ms, "loss": self.link_spec(0).client_to_server.loss.mean, "loss_model": loss_model}
        if self.target:  # nothing emulated: the path is measured per cell (cells.path)
            link = {"rtt_ms": None, "loss": None, "loss_model": None}
        return {"kex": self.kex, "sig": self.sig, "scenario": s.name, **link, "rate_mbit": s.rate_mbit,
                "mode": self.mode, "page": self.page, "requests": self.requests, "stack": self.stack,
                "server": self.server, "client": self.client, "protocol": self.protocol,
                **({"target": self.target} if self.target else {}), **({"kind": self.kind} if self.kind else {}),
                **users_link_params(s), **{a.name: getattr(self, a.name) for a in axis.registered() if a.sql}}

    @property
    def transport_name(self) -> str:
        return self.transport or DEFAULT_TRANSPORT

    @property
    def cell_id(self) -> str:
        """Stable across runs: the default stack is left out, so stores from before stacks resume, a stack
        against itself is keyed as before server/client axes existed (TLS, as before protocols), and each
        registered axis leaves out the values that keep ids as they were before it (Axis.id_omit)."""
        params = self.params()
        for name in ("server", "client", *(a.name for a in axis.registered())):
            params.pop(name, None)
        if proto.get(params["protocol"]).is_default:
            del params["protocol"]
        if params["stack"] == DEFAULT_STACK:
            del params["stack"]
        params.update(axis.id_params(self.values()))
        blob = json.dumps(params, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def link_key(self) -> str:
        """What determines the link: equal keys share a loss pattern and a trace's phases (same seed). The
        users'-link fields count only when set, so a spec from before them keeps its seeds."""
        scenario = {k: v for k, v in dataclasses.asdict(self.scenario).items()
                    if k not in USERS_LINK_FIELDS or (v is not None and k not in SEEDLESS)}
        return json.dumps([scenario, self.mtu], sort_keys=True)

    def link_spec(self, run_seed: int) -> LinkSpec:
        if self.target:
            return LinkSpec()
        s = self.scenario
        loss = Loss.gemodel(*s.gemodel) if s.gemodel else s.loss
        seed = int.from_bytes(hashlib.sha256(f"{run_seed}:{self.link_key()}".encode()).digest()[:4], "big")
        extra = {"queue_packets": s.queue} if s.queue else {}
        link = LinkSpec.symmetric(s.rtt_ms, jitter_ms=s.jitter_ms, loss=loss, rate_mbit=s.rate_mbit,
                                  mtu=self.mtu, seed=seed, **extra)
        if s.trace_up or s.trace_down or s.aqm:
            aqm = Aqm.parse(s.aqm) if s.aqm else Aqm()
            link = link.replace(
                client_to_server=dataclasses.replace(link.client_to_server, aqm=aqm, trace=s.trace_up),
                server_to_client=dataclasses.replace(link.server_to_client, aqm=aqm, trace=s.trace_down))
        return axis.on_link(self.values(), link)  # a middlebox … (the seed stays the link's: pairs share losses)

    def tcp(self) -> TcpKnobs:
        """TCP's per-route knobs, from the axes that are (Axis.to_tcp)."""
        return TcpKnobs(**axis.tcp_fields(self.values()))

    def label(self) -> str:
        return describe(self.params())


def _mode(spec: Spec, page, requests, resumption=None) -> tuple[str, str | None, int | None]:
    if resumption is not None:  # full / resumed / 0-RTT, each asking a page (time to its first byte)
        return RESUMPTIONS[resumption], page or "1k", None
    if spec.resume:
        return "resume", None, None
    if requests is not None:
        return "requests", page or "1k", requests
    if page is not None:
        return "page", page, None
    return "handshake", None, None


def _named(name: str, kind: str, protocol: str) -> str:
    """The protocol's name for an algorithm; where it has none, the catalog name (the stacks then
    skip the cell with the reason)."""
    try:
        return catalog.name_in(name, kind, protocol)
    except BadInput:
        return catalog.find(name, kind).name


def expand(spec: Spec) -> list[Cell]:
    if spec.targets:
        return _expand_targets(spec)
    cells = []
    kexes = [(parse_offer(o).shares[0], o) for o in spec.axes["offer"]] if spec.axes["offer"] != (None,) else \
        [(k, None) for k in spec.kex]
    for (kex, offer), sig, scen, page, req, (server, client), resumption in \
            itertools.product(kexes, spec.sig, spec.scenarios, spec.page, spec.requests, spec.stacks, spec.resumption):
        mode, page_, req_ = _mode(spec, page, req, resumption)
        protocol = endpoints.get(server).protocol
        kex_, sig_ = _named(kex, "kem", protocol), _named(sig, "sig", protocol)
        if not spec.stacks_named:
            server, client = endpoints.default_pair(protocol, sig_)
        for values in _crossed(spec, {"offer": offer}, protocol):
            cells.append(Cell(kex_, sig_, scen, mode, page_, req_, server, client, protocol,
                              kind="load" if spec.load else None, axes=tuple(values.items())))
    unique = {c.cell_id: c for c in cells}
    return list(unique.values())


def _crossed(spec: Spec, fixed: dict, protocol: str) -> list[dict]:
    """The registered axes' values of the cells at one point of the experiment's own axes: each axis crosses
    the cells it applies to (the others hold None; a protocol's it does not apply to, its default), and values a
    protocol cannot take make no cell of it (SSH cells of a spec that also measures TLS over QUIC)."""
    partial = [{}]
    for a in registry.registered():
        if a.name in fixed:
            partial = [{**p, a.name: fixed[a.name]} for p in partial]
            continue
        own = spec.axes[a.name] if a.for_protocol(protocol) else (a.default,)
        # none given (or the default named), or none the protocol can take (TLS's TCP and QUIC in a spec with DTLS
        # cells): the protocol's own (DTLS: over UDP)
        if own == (a.default,) or a.default_for and a.admits and all(a.admits(v, protocol) for v in own):
            own = (a.default_of(protocol),)
        partial = [{**p, a.name: v} for p in partial for v in dict.fromkeys(a.value_for(p, x) for x in own)
                   if not (a.admits and a.admits(v, protocol))]
    return list({tuple(p.items()): p for p in partial}.values())


def _expand_targets(spec: Spec) -> list[Cell]:
    cells = []
    for kex, target, page, req, pad, (server, client) in itertools.product(
            spec.kex, spec.targets, spec.page, spec.requests, spec.axes["pad"], spec.stacks):
        if endpoints.get(server).protocol != target.protocol:
            continue
        mode, page_, req_ = _mode(spec, page, req)
        cells.append(Cell.of_target(target, _named(kex, "kem", target.protocol), mode, page_, req_, pad, client))
    return list({c.cell_id: c for c in cells}.values())


def order(cells: list[Cell], seed: int) -> list[Cell]:
    """Randomised, interleaved order from the seed: slow drift hits every algorithm alike."""
    shuffled = sorted(cells, key=lambda c: c.cell_id)
    random.Random(seed).shuffle(shuffled)
    return shuffled


def unavailable_reason(cell: Cell, spec: Spec | None = None) -> str | None:
    """Why the cell's server or client stack, as built here, cannot run the cell, or None."""
    if cell.target and spec is not None:
        from pqbench.remote.target import client_problem
        why = client_problem(next(t for t in spec.targets if t.name == cell.target), cell.client)
        if why:
            return why
    return endpoints.unsupported(cell.server, cell.client, cell.kex, cell.sig, cell.mode, cell.values())
