"""The ossified middlebox as an axis of a spec (pqbench.testbed.axes: `middlebox`, Axis.to_link): its cells put the
middlebox in front of the link client -> server and keep the link's seed, so a cell with it and one without meet
the same losses; a real run resets the post-quantum ClientHello that spans two segments and nothing else."""

import json

import pytest

from conftest import run_pqbench

from pqbench import store
from pqbench.errors import BadInput
from pqbench.experiment import cells, spec
from pqbench.testbed.middlebox import Middlebox

SPEC = """
name = "middlebox-axis"
samples = 3
seed = 45
timeout = "2s"

[axes]
kex = ["X25519", "X25519MLKEM768"]
sig = ["ecdsap256"]
rtt = ["5ms"]
loss = ["0%"]
middlebox = ["none", "reset"]
"""


def _cells(tmp_path, text=SPEC):
    f = tmp_path / "spec.toml"
    f.write_text(text)
    return f, cells.expand(spec.read(f))


def test_a_cell_with_the_middlebox_has_it_on_its_link_and_the_same_seed(tmp_path):
    _, got = _cells(tmp_path)
    assert sorted((c.kex, c.middlebox or "") for c in got) == [("X25519", ""), ("X25519", "reset"),
                                                              ("X25519MLKEM768", ""), ("X25519MLKEM768", "reset")]
    links = {(c.kex, c.middlebox): c.link_spec(45) for c in got}
    assert links["X25519", "reset"].client_to_server.middlebox == Middlebox("reset")
    assert links["X25519", None].client_to_server.middlebox is None
    assert links["X25519", "reset"].server_to_client.middlebox is None
    assert links["X25519", "reset"].client_to_server.loss == links["X25519", None].client_to_server.loss  # paired:
    assert links["X25519", "reset"].seed == links["X25519", None].seed  # the same loss pattern


def test_a_bad_middlebox_is_bad_input_naming_the_axis(tmp_path):
    with pytest.raises(BadInput) as e:
        _cells(tmp_path, SPEC.replace('["none", "reset"]', '["none", "smash"]'))
    assert "middlebox" in str(e.value) and "drop-fragments" in str(e.value)


@pytest.mark.root
def test_a_run_resets_only_the_client_hello_that_spans_two_segments(built_stack, tmp_path):
    f, _ = _cells(tmp_path)
    db = tmp_path / "mb.duckdb"
    r = run_pqbench("run", f, "--db", db, "--quiet")
    assert r.returncode == 0, r.stderr
    con = store.connect(db, read_only=True)
    run_id = store.resolve_run(con, None)
    rows = {(row["kex"], row["middlebox"]): row for row in store.cell_rows(con, run_id)}
    failed = {k: [json.loads(x) for x in store.sample_raw(con, run_id, row["cell_id"])] for k, row in rows.items()}
    con.close()
    for key, samples in failed.items():
        bad = [s for s in samples if not s["ok"]]
        if key == ("X25519MLKEM768", "reset"):  # 1.2 kB of key share: the ClientHello spans two segments
            assert len(bad) == len(samples) == 3 and {s["error_class"] for s in bad} <= {"reset", "closed"}, bad
        else:
            assert not bad, (key, bad)
