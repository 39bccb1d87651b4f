"""The axis registry (pqbench.axis): every axis's behaviour from its record, and an axis that exists only in this
test module reaching the spec, the cell id, the store, the label, the capability check, the server's site and
the client's arguments, with no other file changed."""

import pytest

from pqbench import axis, store
from pqbench.endpoints.base import ClientJob
from pqbench.errors import BadInput
from pqbench.experiment import axes as registry, cells as cellmod, spec as specmod
from pqbench.measure import session
from pqbench.store import schema

BASE = """
[axes]
kex = ["X25519"]
sig = ["ecdsap256"]
rtt = ["10ms"]
"""


def base(a) -> str:
    """A spec that names every axis a needs beside it (an offer names the key exchange itself)."""
    return BASE.replace('kex = ["X25519"]\n', "") if a.name == "offer" else BASE


@pytest.mark.parametrize("a", registry.registered(), ids=lambda a: a.name)
def test_a_bad_value_is_refused_naming_the_axis_and_its_place(a):
    with pytest.raises(BadInput) as e:
        specmod.parse(base(a) + f'{a.name} = [{{ bad = "table" }}]\n')
    assert e.value.field == f"axes.{a.name}[0]"


@pytest.mark.parametrize("a", registry.registered(), ids=lambda a: a.name)
def test_an_empty_list_says_what_the_axis_takes(a):
    with pytest.raises(BadInput) as e:
        specmod.parse(base(a) + f"{a.name} = []\n")
    assert e.value.field == f"axes.{a.name}" and a.allowed in str(e.value)


@pytest.mark.parametrize("a", [a for a in registry.registered() if a.sql], ids=lambda a: a.name)
def test_every_axis_has_its_column_in_a_store(a, tmp_path):
    """The numbered migrations made the columns of the axes they knew (with the axis's type); a younger axis's
    column is added by the runner's call, to old stores and new ones alike."""
    if a.name in schema.CELL_PARAMS:
        assert schema.CELL_PARAMS[a.name] == a.sql
    con = store.connect(tmp_path / "s.duckdb")
    store.add_cell_columns(con, axis.columns())
    assert a.name in store.columns(con, "cells") and store.add_cell_columns(con, axis.columns()) == []
    con.close()


def test_the_spec_takes_exactly_the_registered_and_the_experiments_own_axes():
    assert set(specmod.axes_allowed()) == set(specmod.CORE_AXES) | set(axis.names())
    with pytest.raises(BadInput, match="did you mean 'initcwnd'"):
        specmod.parse(BASE + "initcwd = [10]\n")


def test_an_axis_of_quic_alone_needs_quic_among_the_transports():
    with pytest.raises(BadInput, match='add "quic" to axes.transport') as e:
        specmod.parse(BASE + "quic_retry = [true]\n")
    assert e.value.field == "axes.quic_retry"
    cells = cellmod.expand(specmod.parse(BASE + 'transport = ["tcp", "quic"]\ninitial_size = [1200, 1300]\n'))
    assert sorted((c.transport, c.initial_size, c.quic_retry) for c in cells if c.transport) == \
        [("quic", 1200, False), ("quic", 1300, False)]
    assert [(c.initial_size, c.quic_retry) for c in cells if not c.transport] == [(None, None)]  # TCP: not crossed


# --- an axis registered here, and nowhere else -----------------------------------------------------------

TOY = axis.Axis("toy_knob", lambda field, v: _knob(field, v), "knob settings 1..9", sql="INTEGER",
                client_feature="toy_knob", client_option="--toy-knob", site=True, order=45,
                label=lambda v, row, short: f"toy {v}")


def _knob(field, value):
    if not isinstance(value, int) or not 1 <= value <= 9:
        raise BadInput(field, f"{value!r} is not a knob setting (1..9)")
    return value


@pytest.fixture
def toy():
    axis.register(TOY)
    try:
        yield TOY
    finally:
        axis.unregister(TOY.name)


def test_a_toy_axis_reaches_every_hub_from_its_record_alone(toy, tmp_path):
    without = {c.cell_id for c in cellmod.expand(specmod.parse(BASE))}
    spec = specmod.parse(BASE + "toy_knob = [2, 7]\n")
    assert spec.axes["toy_knob"] == (2, 7)
    with pytest.raises(BadInput, match="is not a knob setting") as e:
        specmod.parse(BASE + "toy_knob = [2, 12]\n")
    assert e.value.field == "axes.toy_knob[1]"

    cells = cellmod.expand(spec)
    assert sorted(c.toy_knob for c in cells) == [2, 7]
    assert {c.cell_id for c in cellmod.expand(specmod.parse(BASE))} == without  # unset: ids as before the axis
    assert not {c.cell_id for c in cells} & without
    cell = next(c for c in cells if c.toy_knob == 7)
    assert cell.label() == "X25519 + ecdsap256, RTT 10 ms, loss 0 %, toy 7"

    con = store.connect(tmp_path / "toy.duckdb")  # the store: a column of its own, added by the runner's call
    assert "toy_knob" in store.add_cell_columns(con, axis.columns())
    store.create_run(con, "r", name="toy")
    store.save_cell(con, "r", session.record(cell, 0, {"status": "skipped", "reason": "test"}))
    assert [r["toy_knob"] for r in store.cell_rows(con, "r")] == [7]
    con.close()

    # the capability check: openssl's client has no such feature, so the cell is skipped with the reason
    assert cellmod.unavailable_reason(cell) == "openssl client: no toy knob"

    # the server's site and the client's arguments
    site_of, _ = session.servers(spec, cells, tmp_path, {("tls", "ecdsap256"): None})
    other = next(c for c in cells if c.toy_knob == 2)
    assert site_of(cell).options == {"toy_knob": 7} and site_of(cell).port != site_of(other).port
    job = ClientJob(host="10.0.0.2", port=4433, groups=["X25519"], cafile=None, servername="x",
                    **axis.job_fields(cell.values()))
    argv = job.tls_client_options(["X25519"], 1, 0, None)
    assert argv[argv.index("--toy-knob") + 1] == "7"
    assert "--toy-knob" not in ClientJob(host="h", port=1, groups=["X25519"], cafile=None,
                                         servername="x").tls_client_options(["X25519"], 1, 0, None)


def test_a_set_value_needs_its_feature_of_the_named_role_only(toy):
    values = {"toy_knob": 3}
    assert axis.needs(values, "client") == ["toy_knob"] and axis.needs(values, "server") == []
    assert axis.needs({"toy_knob": None}, "client") == []


@pytest.mark.root
def test_initrwnd_an_axis_added_by_its_record_alone_reaches_the_routes(built_stack):
    """initrwnd was added as one line in testbed/axes.py (and its row in docs/spec.md): the spec takes it, the
    cell's id and label name it, and the testbed's routes at both ends carry it."""
    import subprocess
    from pqbench.testbed import Testbed
    (cell,) = cellmod.expand(specmod.parse(BASE + "initrwnd = [20]\n"))
    (plain,) = cellmod.expand(specmod.parse(BASE))
    assert cell.tcp().initrwnd == 20 and cell.cell_id != plain.cell_id and "initrwnd 20" in cell.label()
    with pytest.raises(BadInput, match="axes.initrwnd"):
        specmod.parse(BASE + "initrwnd = [0]\n")
    with Testbed(cell.link_spec(1), tcp=cell.tcp()) as tb:
        for ns in (tb.client_ns, tb.server_ns):
            routes = subprocess.run(["ip", "-n", ns, "route"], capture_output=True, text=True).stdout
            assert "initrwnd 20" in routes, routes
