"""Shards (`run --shard K/N`) and merging their stores (`pqbench merge`)."""

import random

import pytest

from pqbench.errors import BadInput
from pqbench.experiment import cells as cellmod
from pqbench.experiment import shard
from pqbench.experiment import spec as specmod

GRID = """
name = "grid"
seed = 7
samples = 5
[axes]
kex = ["X25519", "X25519MLKEM768", "p256_frodo640aes"]
sig = ["ecdsap256", "mldsa44"]
rtt = ["5ms", "30ms", "80ms"]
loss = ["0%", "1%"]
page = ["1k", "100k"]
"""


def grid_cells():
    spec = specmod.parse(GRID, "grid.toml")
    return cellmod.order(cellmod.expand(spec), spec.seed)


def condition(cell):
    """A link condition and workload, written out here rather than taken from the module under test."""
    return (cell.scenario.rtt_ms, cell.scenario.loss, cell.mtu, cell.initcwnd, cell.mode, cell.page)


@pytest.mark.parametrize("text", ["", "1", "0/2", "3/2", "1/0", "-1/2", "a/b", "1/2/3", "1.5/2"])
def test_parse_refuses_what_is_not_k_of_n(text):
    with pytest.raises(BadInput) as e:
        shard.parse(text)
    assert e.value.field == "--shard"


def test_parse_reads_k_of_n():
    assert shard.parse("1/1") == (1, 1)
    assert shard.parse("3/8") == (3, 8)
    assert shard.parse(" 2 / 2 ") == (2, 2)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 12, 20])
def test_every_cell_is_in_one_shard_and_conditions_stay_together(n):
    cells = grid_cells()
    parts = [shard.part(cells, k, n) for k in range(1, n + 1)]
    ids = [c.cell_id for p in parts for c in p]
    assert sorted(ids) == sorted(c.cell_id for c in cells)  # all of them, none twice
    home = {}
    for k, p in enumerate(parts):
        for c in p:
            assert home.setdefault(condition(c), k) == k, f"{condition(c)} in shards {home[condition(c)]} and {k}"
    # all algorithms of a condition: 3 kex x 2 sig
    assert all(sum(condition(c) == cond for c in cells) == 6 for cond in home)


def test_shards_keep_the_given_order_and_do_not_depend_on_it():
    cells = grid_cells()
    shuffled = cells[:]
    random.Random(1).shuffle(shuffled)
    for k in (1, 2, 3):
        mine = shard.part(cells, k, 3)
        assert mine == [c for c in cells if c in mine]  # a subsequence of the run's order
        assert {c.cell_id for c in shard.part(shuffled, k, 3)} == {c.cell_id for c in mine}
        assert shard.part(cells, k, 3) == mine


def test_shards_are_balanced_by_cells():
    cells = grid_cells()  # 12 conditions of 6 cells
    assert [len(shard.part(cells, k, 4)) for k in range(1, 5)] == [18, 18, 18, 18]
    sizes = [len(shard.part(cells, k, 5)) for k in range(1, 6)]
    assert sum(sizes) == 72 and max(sizes) - min(sizes) <= 6  # at most one condition apart
    # unequal groups: 11 conditions of 6 cells and one of 2 over 2 shards; the small one fills the lighter shard
    small = [c for c in cells if (c.scenario.rtt_ms, c.scenario.loss, c.page) == (5, 0, "1k")]
    cells = [c for c in cells if c not in small] + small[:2]
    parts = [shard.part(cells, k, 2) for k in (1, 2)]
    assert sorted(map(len, parts)) == [32, 36]
    lighter = min(parts, key=len)
    assert all(c in lighter for c in small[:2])


def test_more_shards_than_conditions_leaves_some_empty():
    cells = grid_cells()
    parts = [shard.part(cells, k, 20) for k in range(1, 21)]
    assert sum(1 for p in parts if p) == 12 and sum(len(p) for p in parts) == len(cells)
    assert all(len(p) in (0, 6) for p in parts)


# --- merge: synthetic stores ---------------------------------------------------------------------------------

RUN = "grid-0123abcd-shards2"
ORDER = ["c1", "c2", "c3", "c4"]


def sample(i, ms=10.0):
    return {"ok": True, "i": i, "worker": 0, "t_ns": {"handshake_done": int(ms * 1e6)}}


def cell(cell_id, status, node, kex="X25519", started="2025-01-01 10:00:00", finished="2025-01-01 10:00:05"):
    return {"cell_id": cell_id, "position": ORDER.index(cell_id), "status": status, "kex": kex, "sig": "ecdsap256",
            "rtt_ms": 5.0, "loss": 0.0, "mode": "handshake", "metric": "handshake_done", "node": node,
            "started": started, "finished": finished}


def crypto_round(name, us):
    return [{"name": name, "kind": "kem", "sizes": {"pk": 32, "ct": 32},
             "ops": {"keygen": {"median_us": us, "p25_us": us, "p75_us": us, "n": 10}}}]


def part_store(path, shard, node, segment, cells, us=50.0, created="2025-01-01 10:00:00"):
    """A shard's store as `run --shard` leaves it: the run with the whole order, its own cells, its
    node's segment and that segment's crypto rounds (numbered from 0 in every segment)."""
    from pqbench import store
    con = store.connect(path)
    store.create_run(con, RUN, name="grid", spec_toml="same spec", seed=1, cell_order=ORDER,
                     provenance={"shard": shard, "openssl": {"version": "3.5.7"},
                                 "segments": [{"started": created, "testbeds": [node]}]},
                     warnings=[f"a warning from {node}"])
    store.update_run(con, RUN, created=created)
    store.join_node(con, RUN, segment, node, {"host": {"hostname": node}})
    for c, n in cells:
        store.save_cell(con, RUN, c, [sample(i) for i in range(n)], "handshake_done")
    store.save_crypto(con, RUN, [crypto_round("X25519", us), crypto_round("X25519", us + 1)],
                      node=node, segment=segment)
    store.update_node(con, RUN, segment, status="done")
    store.finish_run(con, RUN, "done")
    con.close()
    return path


def snapshot(path):
    """Everything a merge writes, as sorted rows (timestamps of the rows included)."""
    import duckdb
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {t: sorted(map(repr, con.execute(f"SELECT * FROM {t}").fetchall()))
                for t in ("runs", "cells", "samples", "crypto", "nodes", "load_steps", "scans")}
    finally:
        con.close()


def cells_of(path):
    from pqbench import store
    con = store.connect(path, read_only=True)
    try:
        rows = {r["cell_id"]: (r["status"], r["node"]) for r in store.cell_rows(con, RUN)}
        samples = dict(con.execute("SELECT cell_id, count(*) FROM samples GROUP BY cell_id").fetchall())
        return {c: (*v, samples.get(c, 0)) for c, v in rows.items()}
    finally:
        con.close()


def two_parts(tmp_path):
    # c1: done in part 1, failed in part 2 (a retry gone wrong): the done copy stays, in either order.
    # c2: failed in part 1, done in part 2: the done copy wins. c3 done, c4 skipped: only in part 2.
    a = part_store(tmp_path / "part-1.duckdb", "1/2", "node-a", "seg-a",
                   [(cell("c1", "done", "node-a"), 3), (cell("c2", "failed", "node-a"), 1)], us=50.0)
    b = part_store(tmp_path / "part-2.duckdb", "2/2", "node-b", "seg-b",
                   [(cell("c1", "failed", "node-b", started="2025-01-02 09:00:00"), 1),
                    (cell("c2", "done", "node-b"), 2), (cell("c3", "done", "node-b"), 4),
                    (cell("c4", "skipped", "node-b", started=None, finished=None), 0)],
                   us=80.0, created="2025-01-02 09:00:00")
    return a, b


def test_merge_keeps_the_better_copy_of_each_cell_and_each_segments_crypto(tmp_path):
    import json
    from pqbench import store
    a, b = two_parts(tmp_path)
    before = {p: p.read_bytes() for p in (a, b)}
    dest = tmp_path / "results.duckdb"
    first = store.merge(dest, [a])
    assert first["runs"][0]["status"] == "partial" and first["runs"][0]["stored"] == 2
    summary = store.merge(dest, [b])
    (r,) = summary["parts"][0]["runs"]
    assert (r["new"], r["added"], r["replaced"], r["kept"], r["unchanged"]) == (False, 2, 1, 1, 0)
    expected = {"c1": ("done", "node-a", 3), "c2": ("done", "node-b", 2), "c3": ("done", "node-b", 4),
                "c4": ("skipped", "node-b", 0)}
    assert cells_of(dest) == expected
    assert {p: p.read_bytes() for p in (a, b)} == before  # the parts are never written

    con = store.connect(dest, read_only=True)
    try:
        run = store.run_row(con, RUN)
        # both segments' rounds are there and apart, though both count their rounds from 0
        rounds = con.execute("SELECT segment, node, round, median_us FROM crypto ORDER BY segment, round").fetchall()
        nodes = {n["segment"]: n["node"] for n in store.node_rows(con, RUN)}
    finally:
        con.close()
    assert rounds == [("seg-a", "node-a", 0, 50.0), ("seg-a", "node-a", 1, 51.0),
                      ("seg-b", "node-b", 0, 80.0), ("seg-b", "node-b", 1, 81.0)]
    assert nodes == {"seg-a": "node-a", "seg-b": "node-b"}
    prov = json.loads(run["provenance"])
    assert run["status"] == "done" and prov["shards"] == ["1/2", "2/2"] and "shard" not in prov
    assert [s["testbeds"] for s in prov["segments"]] == [["node-a"], ["node-b"]]
    assert sorted(json.loads(run["warnings"])) == ["a warning from node-a", "a warning from node-b"]
    assert str(run["created"]).startswith("2025-01-01 10:00")  # the earliest part's start

    # once more, in either order: nothing changes
    once = snapshot(dest)
    again = store.merge(dest, [b, a])
    assert snapshot(dest) == once
    assert all(r["added"] == r["replaced"] == 0 for p in again["parts"] for r in p["runs"])
    other = tmp_path / "reversed.duckdb"
    store.merge(other, [b, a])
    assert cells_of(other) == expected


def test_merge_replaces_a_segments_crypto_rounds_and_a_cell_by_an_equal_status(tmp_path):
    """A part merged again after more work (its shard resumed): the segment's rounds are replaced, not
    added to, and a cell measured again with the same status replaces the earlier attempt."""
    from pqbench import store
    dest = tmp_path / "results.duckdb"
    store.merge(dest, [part_store(tmp_path / "p1.duckdb", "1/2", "node-a", "seg-a",
                                  [(cell("c1", "done", "node-a"), 3)], us=50.0)])
    redone = part_store(tmp_path / "p1-again.duckdb", "1/2", "node-a", "seg-a",
                        [(cell("c1", "done", "node-a", started="2025-01-03 10:00:00"), 5)], us=60.0)
    (r,) = store.merge(dest, [redone])["parts"][0]["runs"]
    assert r["replaced"] == 1 and r["crypto_segments"] == 1
    assert cells_of(dest) == {"c1": ("done", "node-a", 5)}
    con = store.connect(dest, read_only=True)
    try:
        assert con.execute("SELECT round, median_us FROM crypto ORDER BY round").fetchall() == [(0, 60.0), (1, 61.0)]
        assert con.execute("SELECT count(*) FROM nodes").fetchone() == (1,)
    finally:
        con.close()


def test_merge_reads_an_older_store_without_changing_it(tmp_path):
    """A part from before nodes were recorded (schema 9): merged through a migrated copy; its crypto rows
    (no segment, no node) arrive, the file stays as it was."""
    import duckdb
    from pqbench import store
    from pqbench.store import schema
    old = tmp_path / "old.duckdb"
    con = duckdb.connect(str(old))
    con.execute(schema.VERSION_TABLE)
    for version, what, sql in schema.MIGRATIONS[:9]:
        con.execute(sql)
        con.execute("INSERT INTO schema_version VALUES (?, now(), ?)", [version, what])
    con.execute("INSERT INTO runs (run_id, created, status, name, cell_order, provenance) "
                "VALUES ('old-run', now(), 'done', 'old', '[\"c1\"]', '{}')")
    con.execute("INSERT INTO cells (run_id, cell_id, position, status, kex) "
                "VALUES ('old-run', 'c1', 0, 'done', 'X25519')")
    con.execute("INSERT INTO samples (run_id, cell_id, seq, ok) VALUES ('old-run', 'c1', 0, true)")
    con.execute("INSERT INTO crypto (run_id, name, kind, op, median_us, round) "
                "VALUES ('old-run', 'X25519', 'kem', 'keygen', 9, 0)")
    con.close()
    before = old.read_bytes()
    dest = tmp_path / "results.duckdb"
    for _ in range(2):
        summary = store.merge(dest, [old])
    assert summary["runs"] == [{"run_id": "old-run", "status": "done", "cells": 1, "stored": 1,
                                "statuses": {"done": 1}, "shards": []}]
    assert old.read_bytes() == before
    con = store.connect(dest, read_only=True)
    try:
        rows = con.execute("SELECT run_id, segment, node, median_us FROM crypto").fetchall()
        assert rows == [("old-run", None, None, 9.0)]
    finally:
        con.close()


def test_merge_cli_names_a_missing_or_foreign_part(tmp_path):
    import duckdb
    from conftest import run_pqbench
    a, b = two_parts(tmp_path)
    dest = tmp_path / "results.duckdb"
    text = tmp_path / "notes.txt"
    text.write_text("not a store\n")
    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    for bad in (tmp_path / "part-3.duckdb", text, empty, tmp_path):
        proc = run_pqbench("merge", "--db", dest, a, bad)
        assert proc.returncode == 2, proc.stderr
        assert str(bad) in proc.stderr and "Traceback" not in proc.stderr
    assert not dest.exists() or cells_of(dest) == {}  # nothing merged before every part was found good

    proc = run_pqbench("merge", "--db", dest, a, b)
    assert proc.returncode == 0, proc.stderr
    assert "part-1.duckdb: run grid-0123abcd-shards2 (new): 2 cells added" in proc.stdout
    assert f"run {RUN} done: 4 of 4 cells stored" in proc.stdout and "shards 1/2 2/2" in proc.stdout
    proc = run_pqbench("merge", "--db", dest, a, b)
    assert "part-1.duckdb: run grid-0123abcd-shards2: 0 cells added, 0 replaced, 1 unchanged, 1 kept" in proc.stdout
    assert "part-2.duckdb: run grid-0123abcd-shards2: 0 cells added, 0 replaced, 3 unchanged, 1 kept" in proc.stdout


def test_merge_refuses_parts_of_another_build_or_spec(tmp_path):
    import duckdb
    from conftest import run_pqbench
    a, b = two_parts(tmp_path)
    con = duckdb.connect(str(b))
    con.execute("UPDATE runs SET provenance = json_merge_patch(provenance, '{\"openssl\": {\"version\": \"3.6.0\"}}')")
    con.close()
    dest = tmp_path / "results.duckdb"
    assert run_pqbench("merge", "--db", dest, a).returncode == 0
    proc = run_pqbench("merge", "--db", dest, b)
    assert proc.returncode == 2 and "OpenSSL" in proc.stderr and "3.6.0" in proc.stderr and str(b) in proc.stderr
    assert cells_of(dest) == {"c1": ("done", "node-a", 3), "c2": ("failed", "node-a", 1)}  # rolled back whole

    con = duckdb.connect(str(b))
    con.execute("UPDATE runs SET spec_toml = 'another spec', provenance = json_merge_patch(provenance, "
                "'{\"openssl\": {\"version\": \"3.5.7\"}}')")
    con.close()
    proc = run_pqbench("merge", "--db", dest, b)
    assert proc.returncode == 2 and "another spec" in proc.stderr


# --- shards of a real run, merged ----------------------------------------------------------------------------

TINY = """
name = "tinyshards"
seed = 4
parallel = 2
samples = 6
warmup = 0
lanes = 1
calibration_samples = 20
[axes]
kex = ["X25519", "X25519MLKEM768"]
sig = ["ecdsap256"]
rtt = ["2ms", "8ms"]
loss = ["0%"]
"""


def measured(path, run_id):
    """(cell_id, status, samples) of a run, and its row."""
    from pqbench import store
    con = store.connect(path, read_only=True)
    try:
        cells = {(r["cell_id"], r["status"]) for r in store.cell_rows(con, run_id)}
        counts = dict(con.execute("SELECT cell_id, count(*) FROM samples WHERE run_id = ? GROUP BY cell_id",
                                  [run_id]).fetchall())
        return {(c, s, counts.get(c, 0)) for c, s in cells}, store.run_row(con, run_id), store.node_rows(con, run_id), \
            con.execute("SELECT count(DISTINCT segment), count(DISTINCT round) FROM crypto WHERE run_id = ?",
                        [run_id]).fetchone()
    finally:
        con.close()


@pytest.mark.root
@pytest.mark.slow
def test_two_shards_merged_hold_the_cells_of_one_run(built_stack, tmp_path):
    import json
    from pqbench import store
    from pqbench.measure import runner
    spec = specmod.parse(TINY, "tinyshards.toml")
    whole_id = runner.run(spec, tmp_path / "whole.duckdb", quiet=True)
    whole, _, _, _ = measured(tmp_path / "whole.duckdb", whole_id)
    assert len(whole) == 4 and all(s == "done" and n == 6 for _, s, n in whole)

    parts = []
    for k in (1, 2):
        parts.append(tmp_path / f"part-{k}.duckdb")
        run_id = runner.run(spec, parts[-1], quiet=True, shard=(k, 2), run_id="tiny-array-77")
        assert run_id == "tiny-array-77"
        mine, _, nodes, _ = measured(parts[-1], run_id)
        assert len(mine) == 2 and len(nodes) == 1  # one link condition each: both key exchanges of it
        assert len({c.scenario.rtt_ms for c in cellmod.expand(spec) if c.cell_id in {m[0] for m in mine}}) == 1

    dest = tmp_path / "results.duckdb"
    summary = store.merge(dest, parts)
    merged, run, nodes, (segments, _) = measured(dest, "tiny-array-77")
    assert merged == whole  # the same cells, statuses and sample counts as the unsharded run
    assert run["status"] == "done" and summary["runs"][0]["status"] == "done"
    assert json.loads(run["provenance"])["shards"] == ["1/2", "2/2"]
    assert json.loads(run["cell_order"]) == json.loads(measured(tmp_path / "whole.duckdb", whole_id)[1]["cell_order"])
    assert len(nodes) == 2 and segments == 2  # each shard's node segment and its crypto rounds, apart

    once = snapshot(dest)
    store.merge(dest, parts)
    assert snapshot(dest) == once
