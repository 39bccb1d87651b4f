"""What users have keeps working: cell ids, labels and store columns of every preset and of spec variants that
name every axis, as main wrote them at 32be4d3 (before the axis registry); a store written then opens, resumes
and reports the same."""

import hashlib
import json
from pathlib import Path

import pytest

from conftest import unpacked_store, ROOT, run_pqbench
from pqbench import store
from pqbench.experiment import cells as cellmod, spec as specmod

DATA = Path(__file__).parent / "data"
RECORDED = json.loads((DATA / "cell_ids-32be4d3.json").read_text())
STORE = DATA / "store-32be4d3.duckdb.gz"  # tests/data/store-32be4d3.toml measured by main at 32be4d3
RUN = "fixture-20261127-075104-4e27e9"


def _digest(lines) -> str:
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()


def _params(cell) -> str:
    return json.dumps({k: v for k, v in cell.params().items() if v is not None}, sort_keys=True)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_cell_ids_labels_and_columns_are_as_before_the_registry(name, tmp_path):
    recorded = RECORDED[name]
    if "toml" in recorded:
        spec = specmod.parse(recorded["toml"], origin=str(tmp_path / f"{name}.toml"))
    else:
        spec = specmod.read(ROOT / name)
    cells = cellmod.expand(spec)
    assert sorted(c.cell_id for c in cells) == recorded["ids"]
    assert _digest(c.label() for c in cells) == recorded["labels_sha256"], sorted(c.label() for c in cells)[:5]
    if "params_sha256" in recorded:
        assert _digest(_params(c) for c in cells) == recorded["params_sha256"], sorted(map(_params, cells))[:3]


@pytest.fixture
def old_store(tmp_path) -> Path:
    return unpacked_store(STORE, tmp_path / "old.duckdb")


def test_a_store_from_before_reports_the_same(old_store, tmp_path):
    cp = run_pqbench("report", RUN, "--db", old_store, "--out", tmp_path / "report")
    assert cp.returncode == 0, cp.stderr
    assert (tmp_path / "report" / "summary.md").read_text() == (DATA / "store-32be4d3.summary.md").read_text()


def test_a_store_from_before_finds_its_cells_by_their_ids(old_store):
    spec = specmod.read(DATA / "store-32be4d3.toml")
    con = store.connect(old_store)
    try:
        assert store.finished_cells(con, RUN) == {c.cell_id for c in cellmod.expand(spec)}
    finally:
        con.close()


@pytest.mark.root
def test_a_run_from_before_resumes(old_store, built_stack):
    """A cell lost from the old run is measured again under its old id; the other three stay as they were."""
    spec = specmod.read(DATA / "store-32be4d3.toml")
    lost = sorted(c.cell_id for c in cellmod.expand(spec) if c.transport is None)[0]
    con = store.connect(old_store)
    kept = {r["cell_id"]: r["finished"] for r in store.cell_rows(con, RUN) if r["cell_id"] != lost}
    con.execute("DELETE FROM samples WHERE cell_id = ?", [lost])
    con.execute("DELETE FROM cells WHERE cell_id = ?", [lost])
    con.close()
    cp = run_pqbench("run", DATA / "store-32be4d3.toml", "--db", old_store, "--resume", RUN)
    assert cp.returncode == 0, cp.stderr
    assert "1 cells to measure" in cp.stderr or "3 already done" in cp.stderr, cp.stderr
    con = store.connect(old_store, read_only=True)
    rows = {r["cell_id"]: r for r in store.cell_rows(con, RUN)}
    con.close()
    assert set(rows) == set(kept) | {lost} and rows[lost]["n"] == 5
    assert {k: rows[k]["finished"] for k in kept} == kept
