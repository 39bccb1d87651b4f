"""Identities that stay unique when stores from several machines meet: run ids, nodes, segments, crypto rounds."""

import re

from pqbench import store
from pqbench.measure import identity, provenance


def test_run_ids_of_one_spec_started_in_the_same_second_differ():
    ids = {identity.new_run_id("quick") for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"quick-\d{8}-\d{6}-[0-9a-f]{6}", i) for i in ids)


def kem(name, us):
    return {"name": name, "kind": "kem", "sizes": {"pk": 1, "ct": 2},
            "ops": {"keygen": {"median_us": us, "p25_us": us, "p75_us": us, "n": 10}}}


def test_crypto_rounds_are_numbered_per_segment_and_keep_their_node(tmp_path):
    con = store.connect(tmp_path / "r.duckdb")
    store.create_run(con, "r", name="r")
    store.save_crypto(con, "r", [[kem("X25519", 10)], [kem("X25519", 11)]], node="a", segment="s1")
    store.save_crypto(con, "r", [[kem("X25519", 20)]], node="b", segment="s2")
    store.save_crypto(con, "r", [[kem("X25519", 12)]], node="a", segment="s1")
    rows = con.execute("SELECT node, segment, round, median_us FROM crypto ORDER BY segment, round").fetchall()
    assert rows == [("a", "s1", 0, 10), ("a", "s1", 1, 11), ("a", "s1", 2, 12), ("b", "s2", 0, 20)]


def test_a_node_segment_records_its_calibration_status_and_cells(tmp_path):
    con = store.connect(tmp_path / "r.duckdb")
    store.create_run(con, "r", name="r")
    store.join_node(con, "r", "seg", "node-a", {"pqbench": "0.1.0"})
    store.save_cell(con, "r", {"cell_id": "c1", "position": 0, "status": "done", "node": "node-a"})
    store.save_cell(con, "r", {"cell_id": "c2", "position": 1, "status": "done", "node": "node-b"})
    store.update_node(con, "r", "seg", calibration_start={"p50_ms": 0.05})
    (row,) = store.node_rows(con, "r")
    assert row["status"] == "running" and row["left"] is None and row["calibration_start"] == {"p50_ms": 0.05}
    store.update_node(con, "r", "seg", status="done", calibration_end={"p50_ms": 0.06})
    (row,) = store.node_rows(con, "r")
    assert row["status"] == "done" and row["left"] is not None and row["cells"] == 1
    assert row["provenance"] == {"pqbench": "0.1.0"} and row["calibration_end"] == {"p50_ms": 0.06}


def test_a_node_is_refused_on_the_first_version_that_differs():
    driver = {"pqbench": "0.1.0", "openssl": {"version": "3.5.7"}, "liboqs": {"version": "0.15.0"}, "pqprov": True,
              "nginx": "1.22.1"}
    assert provenance.mismatch(driver, dict(driver)) is None
    assert provenance.mismatch(driver, {**driver, "openssl": {"version": "3.0.17"}}) == ("OpenSSL", "3.5.7", "3.0.17")
    assert provenance.mismatch(driver, {**driver, "nginx": None}) == ("nginx", "1.22.1", None)
