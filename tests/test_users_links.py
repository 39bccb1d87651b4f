"""Links as users live on them in specs and cells: cellular traces, queue management, competing traffic."""

import dataclasses
import hashlib
import json

import pytest

from pqbench.errors import BadInput
from pqbench.experiment import cells as cellmod
from pqbench.experiment import spec as specmod
from pqbench.testbed import cross

BASE = """
parallel = 1
samples = 5
[axes]
kex = ["X25519", "X25519MLKEM768"]
sig = ["ecdsap256"]
rtt = ["40ms"]
"""


def cells_of(extra: str, top: str = "") -> list:
    return cellmod.expand(specmod.parse(top + BASE + extra))


def test_trace_queue_and_cross_axes_multiply_and_name_each_cell():
    cells = cells_of('trace = ["ATT-LTE-driving-2016", "Verizon-EVDO-driving"]\nqueue = ["droptail", "codel"]\n'
                     'cross = ["none", "1 bbr"]\n')
    assert len(cells) == 2 * 2 * 2 * 2
    params = [c.params() for c in cells]
    assert {p.get("trace") for p in params} == {"ATT-LTE-driving-2016", "Verizon-EVDO-driving"}
    assert {p.get("queue") for p in params} == {None, "codel"}  # drop-tail is the default, stored as NULL
    assert {p.get("cross") for p in params} == {None, "1 bbr"}
    link = next(c for c in cells if c.params().get("queue") == "codel").link_spec(1)
    assert link.client_to_server.trace.endswith(".up") and link.server_to_client.trace.endswith(".down")
    assert link.server_to_client.aqm.kind == "codel" and link.server_to_client.rate_mbit is None


def test_queue_and_competing_flows_keep_the_link_seed_so_their_cost_is_paired():
    cells = cells_of('trace = ["ATT-LTE-driving-2016", "Verizon-EVDO-driving"]\nqueue = ["droptail", "pie"]\n'
                     'cross = [0, 2]\n')
    seeds = {}
    for c in cells:
        seeds.setdefault(c.params()["trace"], set()).add(c.link_spec(7).seed)
    assert all(len(s) == 1 for s in seeds.values())  # one seed per trace, whatever the queue and the flows
    assert len({next(iter(s)) for s in seeds.values()}) == 2  # the traces differ


def test_a_spec_without_the_new_axes_keeps_its_cell_ids_and_seeds():
    (cell, _) = cells_of("")
    before_axes = {k: v for k, v in dataclasses.asdict(cell.scenario).items() if k not in cellmod.USERS_LINK_FIELDS}
    assert cell.link_key() == json.dumps([before_axes, cell.mtu], sort_keys=True)  # the key older runs were seeded by
    params = cell.params()
    assert not {"trace", "queue", "cross"} & set(params)
    del params["server"], params["client"], params["protocol"], params["stack"], params["congctl"]
    from pqbench import axis
    for a in axis.registered():  # axes whose unset value stays out of the id (Axis.id_omit)
        if a.name in params and params[a.name] in a.id_omit:
            del params[a.name]
    assert cell.cell_id == hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]


@pytest.mark.parametrize("extra,top,field,words", [
    ('trace = ["ATT-LTE-driving-2016"]\nrate = ["10mbit"]\n', "", "axes.trace[0]", "rate"),
    ('trace = ["no-such-trace"]\n', "", "axes.trace[0]", "shipped"),
    ('queue = ["red"]\n', "", "axes.queue[0]", "droptail, codel, pie"),
    ('queue = ["codel tgt=5ms"]\n', "", "axes.queue[0]", "target"),
    ('cross = ["many"]\n', "", "axes.cross[0]", "flows"),
    ('cross = ["1 BBR!"]\n', "", "axes.cross[0]", "congestion control"),
    ('trace = ["ATT-LTE-driving-2016"]\n', 'parallel = "auto"\n', "parallel", "parallel = 1"),
])
def test_bad_users_link_axes_name_the_field(extra, top, field, words):
    text = BASE.replace("parallel = 1\n", top) if top else BASE
    with pytest.raises(BadInput) as e:
        specmod.parse(text + extra)
    assert e.value.field == field and words in e.value.detail, (e.value.field, e.value.detail)


def test_a_trace_file_of_ones_own_is_checked_line_by_line(tmp_path):
    bad = tmp_path / "bad.trace"
    bad.write_text("1\n2\n2\nfive\n")
    with pytest.raises(BadInput) as e:
        cells_of(f'trace = ["{bad}"]\n')
    assert "line 4" in e.value.detail
    good = tmp_path / "good.trace"
    good.write_text("1\n1\n3\n")
    (cell, _) = cells_of(f'trace = ["{good}"]\n')
    assert cell.link_spec(1).server_to_client.trace == str(good)


def test_scenario_tables_take_the_users_link_keys():
    spec = specmod.parse("""
parallel = 1
[axes]
kex = ["X25519"]
sig = ["ecdsap256"]
[[scenario]]
name = "lte-behind-a-download"
rtt = "40ms"
trace = "ATT-LTE-driving-2016"
aqm = "codel target=10ms"
cross = 1
""")
    (cell,) = cellmod.expand(spec)
    assert cell.params()["queue"] == "codel target=10ms" and cell.params()["cross"] == "1 cubic"
    assert cell.link_spec(1).server_to_client.aqm.value("target") == 10.0


def test_competing_flows_parse():
    assert cross.parse("cross", 0) is None and cross.parse("cross", "none") is None
    assert cross.parse("cross", 2) == cross.Cross(2, "cubic")
    assert cross.parse("cross", "1 bbr").label() == "1 bbr"
    with pytest.raises(BadInput):
        cross.parse("cross", 65)


BLOAT = """
name = "bloat"
seed = 4
parallel = 1
timeout = "20s"
warmup = 1
samples = 8
queue = 1000
[axes]
kex = ["X25519"]
sig = ["ecdsap256"]
rtt = ["20ms"]
rate = ["10mbit"]
queue = ["droptail", "codel"]
cross = ["none", 1]
"""


@pytest.mark.root
@pytest.mark.slow
def test_a_standing_queue_adds_its_delay_and_codel_takes_it_away(built_stack, tmp_path):
    """One cubic flow over 10 Mbit/s and a 1000-packet drop-tail queue: every handshake waits behind the queue
    the flow built (pqlink's record of its packets' time in the queue); CoDel holds that queue near its 5 ms
    target, and the handshake comes back near its time on the empty link."""
    from pqbench import analysis, store
    from pqbench.measure import runner
    from pqbench.report import links
    db = tmp_path / "r.duckdb"
    run_id = runner.run(specmod.parse(BLOAT, "bloat.toml"), db, quiet=True, keep_files=False)
    con = store.connect(db, read_only=True)
    a = analysis.analyse(con, run_id, resamples=200)
    cell = {(c.row.get("queue") or "droptail", c.row.get("cross") or "none"): c for c in a.cells}
    assert len(cell) == 4 and all(c.failures == 0 for c in cell.values())
    alone, bloated = cell["droptail", "none"], cell["droptail", "1 cubic"]
    queue_ms = links.sojourn_ms(bloated)
    assert queue_ms > 100  # the flow filled the drop-tail queue
    assert bloated.p50 - alone.p50 >= queue_ms  # the SYN-ACK and the server's flight each wait behind it
    managed = cell["codel", "1 cubic"]
    assert links.sojourn_ms(managed) < 20  # CoDel holds the queue near its target
    assert managed.p50 - cell["codel", "none"].p50 < 30
    assert links.sojourn_ms(cell["codel", "none"]) < 5  # the link drained between cells
    moved = json.loads(next(r for r in store.cell_rows(con, run_id) if r["cross"] and not r["queue"])["cross_traffic"])
    assert moved["goodput_mbit"] > 5 and moved["drained_s"] is not None  # the flow used the link; it emptied after


@pytest.mark.root
@pytest.mark.slow
def test_every_algorithm_meets_the_same_trace_offsets(built_stack, tmp_path):
    from pqbench import store
    from pqbench.measure import runner
    spec = specmod.parse(BASE.replace('sig = ["ecdsap256"]', 'sig = ["mldsa44"]').replace("samples = 5", "samples = 4")
                         + 'trace = ["ATT-LTE-driving-2016"]\n', "tr.toml")
    db = tmp_path / "r.duckdb"
    run_id = runner.run(spec, db, quiet=True, keep_files=False)
    con = store.connect(db, read_only=True)
    rows = store.cell_rows(con, run_id)
    assert [r["status"] for r in rows] == ["done", "done"] and {r["trace"] for r in rows} == {"ATT-LTE-driving-2016"}
    records = [json.loads(r["link_counters"])["server_to_client"]["trace"] for r in rows]
    assert records[0]["file"].endswith("ATT-LTE-driving-2016.down")
    assert records[0]["restarts"] == 1 + 4  # the warm-up connection and each sample started at an offset of its own
    offsets = [(t["first_offset_ms"], t["last_offset_ms"]) for t in records]
    assert offsets[0] == offsets[1]  # the same series for both key exchanges: paired
