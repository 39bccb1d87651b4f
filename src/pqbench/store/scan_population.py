"""A population scan (`pqbench scan --file`): its row, which targets of it are done (each stored as it
finishes, so Ctrl-C loses at most the targets in progress and --resume skips the rest), and the
aggregates its report shows. The tables are created on first use (CREATE TABLE IF NOT EXISTS): a store
without population scans has none of them."""

from __future__ import annotations

import json

_TABLES = """
CREATE TABLE IF NOT EXISTS scan_populations (
    population_id VARCHAR PRIMARY KEY, created TIMESTAMP, finished TIMESTAMP, status VARCHAR,
    file VARCHAR, digest VARCHAR, targets INTEGER, options JSON
);
CREATE TABLE IF NOT EXISTS scan_population_targets (
    population_id VARCHAR, target VARCHAR, line INTEGER, scan_id VARCHAR, protocol VARCHAR, done TIMESTAMP,
    PRIMARY KEY (population_id, target)
);
"""


def ensure(con) -> None:
    con.execute(_TABLES)


def _exists(con) -> bool:
    return con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'scan_populations'"
                       ).fetchone()[0] > 0


def create(con, population_id: str, *, file: str, digest: str, targets: int, options: dict) -> None:
    ensure(con)
    con.execute("INSERT INTO scan_populations VALUES (?, now(), NULL, 'running', ?, ?, ?, ?)",
                [population_id, file, digest, targets, json.dumps(options)])


def resumable(con, digest: str) -> dict | None:
    """The newest population scan of a target file with this digest that did not finish, or None."""
    if not _exists(con):
        return None
    row = con.execute("SELECT population_id, file, targets, options, status FROM scan_populations "
                      "WHERE digest = ? AND status <> 'done' ORDER BY created DESC LIMIT 1", [digest]).fetchone()
    if row is None:
        return None
    return {"population_id": row[0], "file": row[1], "targets": row[2], "options": json.loads(row[3]),
            "status": row[4]}


def set_status(con, population_id: str, status: str) -> None:
    con.execute("UPDATE scan_populations SET status = ?, finished = CASE WHEN ? = 'done' THEN now() ELSE NULL END "
                "WHERE population_id = ?", [status, status, population_id])


def done_targets(con, population_id: str) -> set[str]:
    if not _exists(con):
        return set()
    return {r[0] for r in con.execute("SELECT target FROM scan_population_targets WHERE population_id = ?",
                                      [population_id]).fetchall()}


def mark_done(con, population_id: str, *, target: str, line: int, scan_id: str, protocol: str) -> None:
    """Once per target: a second mark of the same target is an error (nothing is scanned twice)."""
    con.execute("INSERT INTO scan_population_targets VALUES (?, ?, ?, ?, ?, now())",
                [population_id, target, line, scan_id, protocol])


def results(con, population_id: str) -> list[dict]:
    """Every stored result of the population, in target-file order."""
    if not _exists(con):
        return []
    rows = con.execute("SELECT t.target, t.line, s.result FROM scan_population_targets t JOIN scans s "
                       "ON s.scan_id = t.scan_id WHERE t.population_id = ? ORDER BY t.line",
                       [population_id]).fetchall()
    return [json.loads(r[2]) | {"line": r[1]} for r in rows]


def latest(con) -> str | None:
    if not _exists(con):
        return None
    row = con.execute("SELECT population_id FROM scan_populations ORDER BY created DESC LIMIT 1").fetchone()
    return row[0] if row else None
