"""The store's numbered migrations, on a store written by the main branch before them (commit 2b3eaa1)."""

from pathlib import Path

import pytest

from conftest import unpacked_store

from pqbench import analysis, store
from pqbench.experiment import cells as cellmod, spec as specmod

OLD = Path(__file__).parent / "data" / "store-2b3eaa1.duckdb.gz"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def old_store(tmp_path) -> Path:
    return unpacked_store(OLD, tmp_path / "old.duckdb")


def test_an_old_store_reads_without_being_changed(old_store):
    con = store.connect(old_store, read_only=True)
    assert store.schema_version(con) == 0
    assert "stack" not in store.columns(con, "cells")  # really the old layout
    data = analysis.read(con, "quick-old")
    con.close()
    assert [c.row["status"] for c in data.cells] == ["done", "done"]
    assert all(c.ok.sum() == 30 for c in data.cells)


def test_opening_an_old_store_read_write_applies_every_migration_once(old_store):
    con = store.connect(old_store)
    assert store.schema_version(con) == store.LATEST
    assert {"stack", "detector", "wire", "protocol"} <= set(store.columns(con, "cells"))
    assert {"local_port", "wire_ms", "stack", "protocol", "server", "wire_server_flight_pushes",
            "kex_reply_received_ms", "newkeys_sent_ms", "command_done_ms"} <= set(store.columns(con, "samples"))
    assert store.migrate(con) == []  # nothing left to apply
    rows = store.cell_rows(con, "quick-old")  # what they were measured with, in both roles
    assert {(r["stack"], r["server"], r["client"], r["protocol"]) for r in rows} == {("openssl", "openssl", "openssl", "tls")}
    con.close()


def test_an_old_run_resumes_with_its_finished_cells_and_reports(old_store, tmp_path):
    """The run's finished cells keep their ids (the default stack is not part of a cell id)."""
    spec = specmod.read(ROOT / "experiments" / "quick.toml")
    ordered = cellmod.order(cellmod.expand(spec), spec.seed)
    con = store.connect(old_store)
    assert store.finished_cells(con, "quick-old") == {c.cell_id for c in ordered[:2]}
    result = analysis.analyse(con, "quick-old", resamples=50)
    con.close()
    assert len(result.cells) == 2 and all(c.p50 > 0 for c in result.cells)


def test_export_takes_a_run_id_with_a_quote(tmp_path):
    con = store.connect(tmp_path / "q.duckdb")
    store.create_run(con, "it's-a-run", name="it's")
    paths = store.export(con, "it's-a-run", tmp_path / "out", "csv")
    con.close()
    assert "it's-a-run" in paths[0].read_text()


def test_scans_keep_the_newest_per_address(tmp_path):
    con = store.connect(tmp_path / "s.duckdb")
    for k, summary in enumerate(("first", "second")):
        store.save_scan(con, f"scan-{k}", target="lab", address="10.0.0.2:4433", protocol="tls", summary=summary,
                        result={"k": k}, provenance={})
    store.save_scan(con, "scan-ssh", target="lab", address="10.0.0.2:22", protocol="ssh", summary="ssh",
                    result={}, provenance={})
    rows = store.scan_rows(con)
    assert [r["summary"] for r in rows] == ["second", "ssh"]
    assert rows[0]["result"] == {"k": 1}
    assert [r["summary"] for r in store.scan_rows(con, ["10.0.0.2:22"])] == ["ssh"]


def test_the_mtc_stand_ins_open_under_their_new_names(old_store):
    """Migration 15: a cell whose chain was the size-only mtc-landmark is mtc-landmark-size after it; a store from
    before the chain axis gains the column, empty."""
    import duckdb
    version, _, sql = store.MIGRATIONS[14]
    assert version == 15
    con = duckdb.connect()
    con.execute("CREATE TABLE cells (cell_id VARCHAR, chain VARCHAR)")
    con.executemany("INSERT INTO cells VALUES (?, ?)",
                    [["a", "mtc-landmark"], ["b", "mtc-standalone"], ["c", "webpki"], ["d", None]])
    con.execute(sql)
    assert dict(con.execute("SELECT cell_id, chain FROM cells").fetchall()) == {
        "a": "mtc-landmark-size", "b": "mtc-standalone-size", "c": "webpki", "d": None}
    old = store.connect(old_store)
    assert "chain" in store.columns(old, "cells")
    old.close()
