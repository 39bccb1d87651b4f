"""Merging stores: the parts of a sharded run (`run --shard K/N`, one store per machine) into one store.

Each part is read from a migrated copy (a part may come from an older pqbench; the user's file is never
changed), attached read-only, and merged in one transaction, so a failure leaves the destination as it
was before that part:

  runs     a run the destination lacks is copied; one it has is combined: the shards and starts seen,
           created the earliest, finished the latest, warnings of both, status "done" only when every
           cell of its cell_order is done or skipped in the merged store, else "partial"
  cells    with their samples and load steps: a cell the destination lacks is copied; one it has is
           replaced by a copy at least as good (done > skipped > failed), kept otherwise, and left alone
           when both are the same attempt (same status, start, end)
  crypto   the part's rounds replace the destination's of the same (run, segment) (rounds from before
           segments: of the same (run, node))
  nodes    by (run, segment); scans by scan_id

Merging a part again changes nothing: every step replaces like with like.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from pqbench.errors import BadInput
from pqbench.store import schema
from pqbench.store.store import _dicts, _has_table, _quote, _rollback, add_cell_columns, connect, schema_version

# How good a cell's copy is: a done cell beats a skipped one beats a failed one (anything else: worst).
RANK = {"done": 3, "skipped": 2, "failed": 1}
FINISHED = ("done", "skipped")

_RANK_SQL = "CASE {col} " + " ".join(f"WHEN '{s}' THEN {r}" for s, r in RANK.items()) + " ELSE 0 END"


def merge(dest_path: Path | str, part_paths: list, *, check=None) -> dict:
    """Merges the part stores into dest (created when missing); returns what was merged, per part and run.
    check(dest_provenance, part_provenance) -> (field, dest's, part's) or None: a difference that makes a
    run's parts incomparable (different builds); the merge then refuses that part."""
    dest_path, parts = Path(dest_path), [Path(p) for p in part_paths]
    if not parts:
        raise BadInput("PART", "give at least one part store (the --db of each `pqbench run --shard`)")
    for path in parts:  # every part is checked before the destination changes
        _check_part(path, dest_path)
    summary = {"db": str(dest_path), "parts": [], "runs": []}
    touched: dict[str, None] = {}
    con = connect(dest_path)
    try:
        # the copies beside the destination: a part can be gigabytes, more than /tmp holds
        with tempfile.TemporaryDirectory(prefix=".pqbench-merge-", dir=dest_path.resolve().parent) as tmp:
            for i, path in enumerate(parts):
                copy = _migrated_copy(path, Path(tmp) / f"part-{i}.duckdb")
                try:
                    merged = _merge_part(con, copy, path, check)
                finally:
                    copy.unlink(missing_ok=True)
                touched.update(dict.fromkeys(r["run_id"] for r in merged["runs"]))
                summary["parts"].append({"part": str(path), **merged})
        summary["runs"] = [_run_state(con, run_id) for run_id in touched]
    finally:
        con.close()
    return summary


def _check_part(path: Path, dest: Path) -> None:
    if not path.exists():
        raise BadInput("PART", f"{path} does not exist")
    if not path.is_file():
        raise BadInput("PART", f"{path} is not a file (give the store `pqbench run --shard K/N --db` wrote)")
    if dest.exists() and path.resolve() == dest.resolve():
        raise BadInput("PART", f"{path} is the --db store itself: give the parts and another --db")
    try:
        con = connect(path, read_only=True)
    except BadInput as e:
        raise BadInput("PART", f"{path} is not a pqbench store: {e.detail}") from None
    try:
        version = schema_version(con)
    finally:
        con.close()
    if version > schema.LATEST:
        raise BadInput("PART", f"{path} was written by a newer pqbench (store schema {version}; this one knows up "
                               f"to {schema.LATEST}): merge with that version")


def _migrated_copy(path: Path, copy: Path) -> Path:
    """A copy of the part (with its write-ahead log, which holds what a killed run had not checkpointed),
    brought up to this pqbench's schema."""
    shutil.copyfile(path, copy)
    wal = path.with_name(path.name + ".wal")
    if wal.exists():
        shutil.copyfile(wal, copy.with_name(copy.name + ".wal"))
    connect(copy).close()  # applies the migrations the part lacks
    return copy


def _merge_part(con, copy: Path, path: Path, check) -> dict:
    con.execute(f"ATTACH {_quote(str(copy))} AS incoming (READ_ONLY)")
    try:
        con.execute("BEGIN TRANSACTION")
        try:
            merged = _merge_tables(con, path, check)
            con.execute("COMMIT")
        except BaseException:
            _rollback(con)
            raise
    finally:
        con.execute("DETACH incoming")
    return merged


def _merge_tables(con, path: Path, check) -> dict:
    runs = _dicts(con.execute("SELECT * FROM incoming.runs ORDER BY created, run_id"))
    had = {r["run_id"]: _run(con, r["run_id"]) for r in runs}
    for run in runs:
        mine = had[run["run_id"]]
        if mine is None:
            continue
        if mine["spec_toml"] and run["spec_toml"] and mine["spec_toml"] != run["spec_toml"]:
            raise BadInput("PART", f"{path}: run {run['run_id']} was measured there with another spec than the run "
                                   "of that id in the --db store: give its shards their own --run-id")
        differ = check(_json(mine["provenance"]) or {}, _json(run["provenance"]) or {}) if check else None
        if differ:
            field, here, there = differ
            raise BadInput("PART", f"{path}: run {run['run_id']} was measured with {field} {there}, its parts in the "
                                   f"--db store with {here}: results of different builds do not merge into one run")
    con.execute("INSERT INTO runs BY NAME SELECT * FROM incoming.runs WHERE run_id NOT IN (SELECT run_id FROM runs)")

    # a part measured with an axis younger than the numbered migrations has its column: so has the destination
    add_cell_columns(con, {name: sqltype for name, sqltype, *_ in con.execute("DESCRIBE incoming.cells").fetchall()})
    outcomes = _merge_cells(con)
    crypto = _replace_crypto(con)
    nodes = _upsert(con, "nodes", ("run_id", "segment"))
    scans = _upsert(con, "scans", ("scan_id",))

    out = []
    for run in runs:
        run_id = run["run_id"]
        _combine_run(con, run_id, had[run_id], run)
        out.append({"run_id": run_id, "new": had[run_id] is None,
                    **{k: outcomes.get((run_id, k), 0) for k in ("added", "replaced", "kept", "unchanged")},
                    "crypto_segments": crypto.get(run_id, 0), "nodes": nodes.get(run_id, 0)})
    return {"runs": out, "scans": scans.get(None, 0)}


def _merge_cells(con) -> dict:
    """Copies the part's cells that are new or at least as good, with their samples and load steps;
    (run_id, outcome) -> count."""
    same_attempt = " AND ".join(f"i.{c} IS NOT DISTINCT FROM d.{c}" for c in ("status", "started", "finished"))
    con.execute(f"""CREATE OR REPLACE TEMP TABLE merge_cells AS
        SELECT i.run_id, i.cell_id, CASE
            WHEN d.cell_id IS NULL THEN 'added'
            WHEN {same_attempt} THEN 'unchanged'
            WHEN {_RANK_SQL.format(col='i.status')} >= {_RANK_SQL.format(col='d.status')} THEN 'replaced'
            ELSE 'kept' END AS outcome
        FROM incoming.cells i LEFT JOIN main.cells d ON d.run_id = i.run_id AND d.cell_id = i.cell_id""")
    taken = "SELECT run_id, cell_id FROM merge_cells WHERE outcome IN ('added', 'replaced')"
    for table in ("load_steps", "samples", "cells"):  # the cell last: what refers to it goes first
        con.execute(f"DELETE FROM main.{table} WHERE EXISTS (SELECT 1 FROM ({taken}) m "
                    f"WHERE m.run_id = {table}.run_id AND m.cell_id = {table}.cell_id)")
    for table in ("cells", "samples", "load_steps"):
        con.execute(f"INSERT INTO main.{table} BY NAME SELECT i.* FROM incoming.{table} i "
                    f"JOIN ({taken}) m ON m.run_id = i.run_id AND m.cell_id = i.cell_id")
    counts = con.execute("SELECT run_id, outcome, count(*) FROM merge_cells GROUP BY ALL").fetchall()
    con.execute("DROP TABLE merge_cells")
    return {(run_id, outcome): n for run_id, outcome, n in counts}


def _replace_crypto(con) -> dict:
    """The part's crypto rounds replace the destination's of the same segment; run_id -> segments merged."""
    con.execute("""DELETE FROM main.crypto WHERE EXISTS (SELECT 1 FROM incoming.crypto i
        WHERE i.run_id = crypto.run_id AND (i.segment = crypto.segment
            OR (i.segment IS NULL AND crypto.segment IS NULL AND i.node IS NOT DISTINCT FROM crypto.node)))""")
    con.execute("INSERT INTO main.crypto BY NAME SELECT * FROM incoming.crypto")
    rows = con.execute("SELECT run_id, count(DISTINCT coalesce(segment, 'node:' || coalesce(node, ''))) "
                       "FROM incoming.crypto GROUP BY run_id").fetchall()
    return dict(rows)


def _upsert(con, table: str, key: tuple[str, ...]) -> dict:
    """The part's rows replace the destination's with the same key; run_id (None: no run) -> rows."""
    if not _has_table(con, table):
        return {}
    match = " AND ".join(f"i.{k} = {table}.{k}" for k in key)
    con.execute(f"DELETE FROM main.{table} WHERE EXISTS (SELECT 1 FROM incoming.{table} i WHERE {match})")
    con.execute(f"INSERT INTO main.{table} BY NAME SELECT * FROM incoming.{table}")
    by = "run_id" if "run_id" in key else "NULL"
    return dict(con.execute(f"SELECT {by}, count(*) FROM incoming.{table} GROUP BY ALL").fetchall())


def _combine_run(con, run_id: str, mine: dict | None, theirs: dict) -> None:
    """The run's row after the part: its parts' shards and starts, earliest creation, latest end, both
    runs' warnings, and a status from the cells now in the store."""
    merged = mine or theirs
    prov = _combined_provenance(_json(merged["provenance"]) or {}, _json(theirs["provenance"]) or {})
    warnings = list(dict.fromkeys(json.dumps(w, sort_keys=True) for w in
                                  (_json(merged["warnings"]) or []) + (_json(theirs["warnings"]) or [])))
    status = _status(con, run_id, _json(merged["cell_order"]), merged["status"], theirs["status"], mine is None)
    created = min(t for t in (merged["created"], theirs["created"]) if t is not None) \
        if merged["created"] or theirs["created"] else None
    ended = [t for t in (merged["finished"], theirs["finished"]) if t is not None]
    con.execute("UPDATE runs SET provenance = ?, warnings = ?, status = ?, created = ?, finished = ?, "
                "calibration_start = coalesce(calibration_start, ?), calibration_end = coalesce(calibration_end, ?) "
                "WHERE run_id = ?",
                [json.dumps(prov), "[" + ", ".join(warnings) + "]", status, created, max(ended) if ended else None,
                 theirs["calibration_start"], theirs["calibration_end"], run_id])


def _combined_provenance(mine: dict, theirs: dict) -> dict:
    """The first part's provenance, with every part's shard (as "shards") and every start's segment."""
    prov = {k: v for k, v in mine.items() if k != "shard"}
    shards = {s for p in (mine, theirs) for s in p.get("shards", []) + ([p["shard"]] if p.get("shard") else [])}
    if shards:
        prov["shards"] = sorted(shards, key=_shard_order)
    segments = {json.dumps(s, sort_keys=True): s for p in (mine, theirs) for s in p.get("segments", [])}
    if segments:
        prov["segments"] = sorted(segments.values(),
                                  key=lambda s: (str(s.get("started")), json.dumps(s, sort_keys=True)))
    return prov


def _shard_order(shard: str) -> tuple:
    """"K/N" by N, then K (1/2 2/2 1/4 …); anything else after them, as text."""
    k, _, n = str(shard).partition("/")
    return (0, int(n), int(k), "") if k.isdigit() and n.isdigit() else (1, 0, 0, str(shard))


def _status(con, run_id: str, order: list | None, mine: str, theirs: str, new: bool) -> str:
    """done when every cell of the run's order is finished here; otherwise interrupted when the parts
    say so (a run stopped on one machine, merged alone or with itself), else partial (some shards missing
    or unfinished; a part's "running" is over wherever it came from)."""
    status = dict(con.execute("SELECT cell_id, status FROM cells WHERE run_id = ?", [run_id]).fetchall())
    if order is None:  # a run row without its order: every stored cell must be finished
        order = list(status)
    if order and all(status.get(c) in FINISHED for c in order):
        return "done"
    if theirs == "interrupted" and (new or mine == theirs):
        return theirs
    return "partial"


def _run(con, run_id: str) -> dict | None:
    rows = _dicts(con.execute("SELECT * FROM main.runs WHERE run_id = ?", [run_id]))
    return rows[0] if rows else None


def _run_state(con, run_id: str) -> dict:
    run = _run(con, run_id)
    order = _json(run["cell_order"]) or []
    counts = dict(con.execute("SELECT status, count(*) FROM cells WHERE run_id = ? GROUP BY status",
                              [run_id]).fetchall())
    return {"run_id": run_id, "status": run["status"], "cells": len(order),
            "stored": sum(counts.values()), "statuses": counts,
            "shards": (_json(run["provenance"]) or {}).get("shards", [])}


def _json(value):
    return json.loads(value) if isinstance(value, str) else value
