"""Axes of an experiment, each one registered record (as liboqs keeps one struct per algorithm).

An axis is a knob a spec sweeps: `[axes] NAME = [values]`, one value per cell. Its record says everything the
rest of pqbench needs to know of it, so that adding an axis is its own module and one line in
pqbench.experiment.axes:

- how a value is read (parse, with errors naming the field) and what is allowed (allowed);
- the cell's value where the spec does not name the axis (default), and which cells it crosses at all
  (applies: the other axes' values of a cell; a cell it does not apply to holds None) - with the error
  (needs_text) when a spec names it but no cell could take it;
- the store's cells column (sql; the runner adds a younger axis's column to a store), the columns of what its
  cells record beside (records), and how it enters the cell
  id (id_omit: the values left out of the id, so cells from before the axis keep their ids);
- what it asks of the stacks: a feature of the server or the client stack (server_feature, client_feature) when
  its value is set, and any check beyond (check);
- how it reaches them: the timing client's option (client_option, option_value) through the ClientJob, and the
  server's site (site: a port per value, the value in Site.options);
- how it reaches the path: TCP's per-route knobs (to_tcp), the link itself (to_link);
- its label in progress lines and the report (label, with its place among the other parts: order).

Spec, Cell, cell ids, store columns, condition labels, capability checks and client arguments are derived from
the registry. The axes that shape a cell's whole meaning (algorithms, the link and its scenarios, the workload,
stacks and protocol, targets) are the experiment's own (pqbench.experiment.cells).

Each feature registers its axes in its own module; pqbench.experiment.axes imports them all (the one line a
new feature adds). This module holds the record and the table only, below everything that reads it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from pqbench import protocol as proto
from pqbench.errors import BadInput

ALWAYS = ()  # id_omit for an axis whose value is always part of the cell id


@dataclasses.dataclass(frozen=True)
class Axis:
    name: str  # the key under [axes], the Cell's attribute, the store's cells column
    parse: Callable[[str, Any], Any]  # (field, one value from the spec) -> the cell's value; BadInput naming field
    allowed: str  # what its values are ("segments", "congestion control names"), for errors
    default: Any = None  # a cell's value where the spec does not name the axis
    sql: str | None = "VARCHAR"  # the store's cells column type; None: no column
    id_omit: tuple = (None,)  # values left out of the cell id (ids stay as before the axis existed)
    applies: Callable[[Mapping], bool] | None = None  # the cells it crosses, by their other values (None: all)
    needs_text: str | None = None  # the error when the spec names it but no cell could take it
    # (value, protocol) -> why no cell of that protocol can have the value (such cells are not made), or None
    admits: Callable[[Any, str], str | None] | None = None
    path: bool = False  # a knob of the emulated path: a spec whose servers are targets (a real path) refuses it
    to_tcp: Callable[[Any], dict] | None = None  # how it reaches TCP's per-route knobs (TcpKnobs keyword arguments)
    to_link: Callable[[Any, Any], Any] | None = None  # (value, LinkSpec) -> the cell's LinkSpec with it (the path's)
    server_feature: str | None = None  # Capabilities.features entry the server stack needs when the value is set
    client_feature: str | None = None  # … the client stack
    # (value, Capabilities, role, the cell's values) -> why the stack in role cannot, or None
    check: Callable[[Any, Any, str, Mapping], str | None] | None = None
    # How a cell's value reaches the client: as the client job's own fields (ClientJob keyword arguments, which
    # the clients read and turn into their options themselves), or else, in ClientJob.axes, as the timing
    # clients' option client_option with option_value's text.
    to_job: Callable[[Any], dict] | None = None
    client_option: str | None = None
    option_value: Callable[[Any], str] = str
    site: bool = False  # a server serves a port per value
    to_site: Callable[[Any], dict] | None = None  # … as Site keyword arguments (None: in Site.options)
    label: Callable[[Any, Mapping, bool], str | None] | None = None  # (value, cell row, short) -> its label part
    order: int = 50  # where the label stands among the condition's parts (the link at 10, the workload at 70)
    records: tuple = ()  # (column, SQL type) of what a cell of the axis records beside its value (its own columns)
    # The single-cell commands' option (pqbench.commands.axis_options: --NAME, one value; a BOOLEAN axis is a
    # flag): its help, after what the axis allows where None. An axis of the path is the link's option instead.
    help: str | None = None
    # (a protocol's record, pqbench.protocol.Protocol) -> whether its cells can have the axis at all (None: every
    # protocol's): another protocol's cells hold the default, its commands have no option for it.
    protocols: Callable[[Any], bool] | None = None
    # (a protocol's record) -> the value its cells hold where none is given (None: `default` for every protocol)
    default_for: Callable[[Any], Any] | None = None

    def for_protocol(self, name: str) -> bool:
        return self.protocols is None or bool(self.protocols(proto.get(name)))

    def default_of(self, protocol: str):
        """The value a cell of the protocol holds where the spec or the command line gives none."""
        return self.default_for(proto.get(protocol)) if self.default_for else self.default

    def protocol_text(self) -> str:
        """Which protocols it applies to, for errors."""
        return f"applies to {' and '.join(p.label for p in proto.registered() if self.for_protocol(p.name))} only"

    @property
    def command_option(self) -> str:
        """Its option on the single-cell commands (pqbench.commands.axis_options)."""
        return "--" + self.name.replace("_", "-")

    @property
    def reaches_client(self) -> bool:
        """Its value asks something of the client (a job field, an option, a feature): a load generator, which
        honours none of them, cannot take it."""
        return bool(self.to_job or self.client_option or self.client_feature)

    @property
    def for_load_generator(self) -> bool:
        """A load generator's cells (`load`, kind = "load") can have it: it asks nothing of the client, nor applies
        only beside a value of one that does (QUIC's Retry)."""
        return not (self.reaches_client or self.applies and not self.applies({}))

    def is_set(self, value) -> bool:
        """A value that asks something of the stacks: neither absent nor the axis's default."""
        return value not in (None, self.default)

    def values(self, axes: Mapping) -> tuple:
        """The axis's values from a spec's [axes] table: parsed, each error naming axes.NAME[i]; (default,)
        when the spec does not name it."""
        if self.name not in axes:
            return (self.default,)
        raw = axes[self.name]
        if isinstance(raw, list) and not raw:
            raise BadInput(f"axes.{self.name}", f"must not be empty ({self.allowed})")
        items = raw if isinstance(raw, list) else [raw]
        return tuple(dict.fromkeys(self.parse(f"axes.{self.name}[{i}]", v) for i, v in enumerate(items)))

    def value_for(self, values: Mapping, given):
        """The value a cell holds: None where the axis does not apply to it."""
        return given if self.applies is None or self.applies(values) else None


_REGISTRY: dict[str, Axis] = {}


def register(*axes: Axis) -> None:
    for axis in axes:
        _REGISTRY[axis.name] = axis


def unregister(name: str) -> None:
    """Removes an axis (a test's own)."""
    _REGISTRY.pop(name, None)


def registered() -> list[Axis]:
    """Every axis, in the order registered."""
    return list(_REGISTRY.values())


def get(name: str) -> Axis | None:
    return _REGISTRY.get(name)


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


# --- what every hub derives from the table ------------------------------------------------------------

def columns() -> dict[str, str]:
    """The store's cells columns of the axes (their values, and what their cells record): name -> SQL type."""
    return {**{a.name: a.sql for a in registered() if a.sql}, **{c: t for a in registered() for c, t in a.records}}


def id_params(values: Mapping) -> dict:
    """The axes' part of a cell id: each value unless its axis leaves it out."""
    return {a.name: values.get(a.name) for a in registered() if values.get(a.name) not in a.id_omit}


def missing(feature: str, caps) -> str:
    """What to say of a stack without a feature: "no cert compression (why)"."""
    note = caps.feature_notes.get(feature)
    return f"no {feature.replace('_', ' ')}" + (f" ({note})" if note else "")


def needs(values: Mapping, role: str) -> list[str]:
    """The features a cell's set values need of the stack in role ("server", "client")."""
    out = []
    for a in registered():
        feature = a.server_feature if role == "server" else a.client_feature
        if feature and a.is_set(values.get(a.name)):
            out.append(feature)
    return list(dict.fromkeys(out))


def problems(values: Mapping, caps, role: str) -> str | None:
    """The first reason an axis's own check gives against a stack's capabilities in role, or None."""
    for a in registered():
        if a.check and a.is_set(values.get(a.name)):
            why = a.check(values[a.name], caps, role, values)
            if why:
                return why
    return None


def refusal(given: Mapping, protocol: str, values: Mapping) -> tuple["Axis", str] | None:
    """The first of the given axis values a cell cannot take, and why: one its protocol does not admit, or one
    of an axis that does not apply to the cell's other values; None when it can take them all."""
    for name, v in given.items():
        a = _REGISTRY[name]
        if not a.is_set(v):
            continue
        if not a.for_protocol(protocol):
            return a, a.protocol_text()
        why = a.admits(v, protocol) if a.admits else None
        if why:
            return a, why
        if a.applies and not a.applies(values):
            return a, a.needs_text or "does not apply to this cell"
    return None


def client_options(values: Mapping) -> list[str]:
    """The timing clients' options for the set values of the axes that reach the client as an option."""
    out = []
    for a in registered():
        if a.client_option and not a.to_job and a.is_set(values.get(a.name)):
            out += [a.client_option, a.option_value(values[a.name])]
    return out


def job_fields(values: Mapping) -> dict:
    """The ClientJob keyword arguments of a cell's values: the job's own fields, and `axes` with the values
    of the axes that reach the client as an option."""
    out, options = {}, {}
    for a in registered():
        if a.to_job and a.name in values:
            out.update(a.to_job(values[a.name]))
        elif a.client_option and a.name in values:
            options[a.name] = values[a.name]
    return {**out, "axes": options} if options else out


def on_link(values: Mapping, link):
    """The cell's LinkSpec with what its set values put on the path (Axis.to_link)."""
    for a in registered():
        if a.to_link and values.get(a.name) is not None:
            link = a.to_link(values[a.name], link)
    return link


def tcp_fields(values: Mapping) -> dict:
    """The TcpKnobs keyword arguments of a cell's values (the axes that are TCP's per-route knobs)."""
    out = {}
    for a in registered():
        if a.to_tcp and values.get(a.name) is not None:
            out.update(a.to_tcp(values[a.name]))
    return out


def site_key(values: Mapping) -> tuple:
    """What of a cell needs a port of its own, as (Site field, value) pairs: the site axes' own fields, and
    ("options", (name, value)) for the others. Cells with equal keys share a port."""
    out = []
    for a in registered():
        if a.site and a.to_site:
            out += sorted(a.to_site(values.get(a.name)).items())
        elif a.site and values.get(a.name) is not None:
            out.append(("options", (a.name, values[a.name])))
    return tuple(out)


def site_fields(key: tuple) -> dict:
    """Site keyword arguments from a site_key."""
    fields = {k: v for k, v in key if k != "options"}
    options = dict(v for k, v in key if k == "options")
    return {**fields, "options": options} if options else fields


def labels(row: Mapping, short: bool = False) -> list[tuple[int, str]]:
    """(order, text) of each axis label that has something to say about the cell row."""
    out = []
    for a in registered():
        if a.label and row.get(a.name) is not None:
            text = a.label(row[a.name], row, short)
            if text:
                out.append((a.order, text))
    return out
