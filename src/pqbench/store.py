"""The results store: one DuckDB file (default results.duckdb) with four tables.

  runs     one row per `pqbench run`: spec, provenance (host, versions, commit, backend, seeds),
           calibration at start and end, status
  cells    one row per grid point: its parameters, status (done / skipped / failed), reason, counts
  samples  one row per sample with every field pqtimer emits (phase times in ms, sizes, TCP_INFO);
           the raw JSON line is kept too
  crypto   the crypto microbenchmarks of each algorithm the run used, in rounds at the start and the
           end of every segment (input of the lower-bound model)

Results are written after every cell, in one transaction, so a crash loses at most the cell in
progress and a resumed run finds every finished cell.
"""

import json
import os
import tempfile
from pathlib import Path

from pqbench.errors import BadInput, MissingCapability

try:
    import duckdb
except ImportError:  # pragma: no cover - the build installs it
    duckdb = None

DEFAULT_DB = Path("results.duckdb")

# Cell parameters: name -> SQL type. The spec's axes map onto these one to one.
CELL_PARAMS = {
    "kex": "VARCHAR", "sig": "VARCHAR", "scenario": "VARCHAR", "rtt_ms": "DOUBLE", "loss": "DOUBLE",
    "loss_model": "VARCHAR", "rate_mbit": "DOUBLE", "mtu": "INTEGER", "initcwnd": "INTEGER",
    "mode": "VARCHAR", "page": "VARCHAR", "requests": "INTEGER", "pad": "INTEGER",
}
PHASES = ("tcp_connected", "client_hello_sent", "server_hello_received", "server_finished_received",
          "handshake_done", "first_byte", "last_byte")

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, created TIMESTAMP, finished TIMESTAMP, status VARCHAR,
    name VARCHAR, spec_toml VARCHAR, spec JSON, provenance JSON,
    calibration_start JSON, calibration_end JSON, seed BIGINT, cell_order JSON, warnings JSON
);
CREATE TABLE IF NOT EXISTS cells (
    run_id VARCHAR, cell_id VARCHAR, position INTEGER, status VARCHAR, reason VARCHAR,
    {", ".join(f"{k} {v}" for k, v in CELL_PARAMS.items())},
    link JSON, metric VARCHAR, n INTEGER, ok INTEGER, failures INTEGER, failure_classes JSON,
    link_counters JSON, started TIMESTAMP, finished TIMESTAMP, stop_reason VARCHAR, concurrency JSON,
    PRIMARY KEY (run_id, cell_id)
);
ALTER TABLE cells ADD COLUMN IF NOT EXISTS concurrency JSON;  -- databases from before it existed
CREATE TABLE IF NOT EXISTS crypto (
    run_id VARCHAR, name VARCHAR, kind VARCHAR, op VARCHAR, median_us DOUBLE, p25_us DOUBLE, p75_us DOUBLE,
    n INTEGER, pk INTEGER, ct_or_sig INTEGER, round INTEGER
);
ALTER TABLE crypto ADD COLUMN IF NOT EXISTS round INTEGER;  -- databases from before it existed (one round)
CREATE TABLE IF NOT EXISTS samples (
    run_id VARCHAR, cell_id VARCHAR, seq INTEGER, worker INTEGER, i INTEGER, ok BOOLEAN,
    error_class VARCHAR, error VARCHAR, duration_ms DOUBLE,
    {", ".join(f"{p}_ms DOUBLE" for p in PHASES)},
    start_mono_ns UBIGINT, "group" VARCHAR, sigalg VARCHAR, resumed BOOLEAN,
    client_hello_bytes INTEGER, server_hello_bytes INTEGER, certificate_bytes INTEGER,
    certificate_verify_bytes INTEGER, hs_bytes_sent INTEGER, hs_bytes_received INTEGER,
    records_sent INTEGER, records_received INTEGER,
    tcp_bytes_sent BIGINT, tcp_bytes_received BIGINT, tcp_segs_out INTEGER, tcp_segs_in INTEGER,
    tcp_retransmits INTEGER, tcp_rtt_us INTEGER, tcp_cwnd INTEGER,
    http_status INTEGER, body_bytes BIGINT, requests INTEGER, raw JSON
);
"""


def connect(path: Path | str = DEFAULT_DB, read_only: bool = False):
    if duckdb is None:
        raise MissingCapability("the Python package duckdb is missing", "run `make` (it installs pqbench's deps)")
    path = Path(path)
    if read_only and not path.exists():
        raise BadInput("--db", f"{path} does not exist")
    con = duckdb.connect(str(path), read_only=read_only)
    if not read_only:
        con.execute(SCHEMA)
    return con


def sample_row(run_id: str, cell_id: str, seq: int, s: dict, metric: str) -> tuple:
    """A pqtimer JSON sample flattened into the samples table's columns."""
    t = s.get("t_ns") or {}
    ms = {p: (t[p] / 1e6 if t.get(p) is not None else None) for p in PHASES}
    sent, recv = s.get("msg_bytes_sent") or {}, s.get("msg_bytes_received") or {}
    tcp = s.get("tcp_handshake") or {}
    return (run_id, cell_id, seq, s.get("worker"), s.get("i"), bool(s.get("ok")), s.get("error_class"),
            s.get("error"), ms.get(metric) if s.get("ok") else None, *ms.values(), s.get("start_mono_ns"),
            s.get("group"), s.get("sigalg"), s.get("resumed"), sent.get("client_hello"), recv.get("server_hello"),
            recv.get("certificate"), recv.get("certificate_verify"), sum(sent.values()) if sent else None,
            sum(recv.values()) if recv else None, s.get("records_sent"), s.get("records_received"),
            tcp.get("bytes_sent"), tcp.get("bytes_received"), tcp.get("segs_out"), tcp.get("segs_in"),
            tcp.get("retransmits"), tcp.get("rtt_us"), tcp.get("cwnd"), s.get("http_status"), s.get("body_bytes"),
            s.get("requests"), json.dumps(s))


def _insert_rows(con, table: str, rows: list[tuple]) -> None:
    """Bulk insert through a temporary JSON-lines file: DuckDB binds Python parameters slowly
    (~1 ms per sample row), while read_json takes a whole cell in milliseconds."""
    columns = con.execute(f"DESCRIBE {table}").fetchall()  # (name, type, ...)
    is_json = [c[1] == "JSON" for c in columns]
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for row in rows:
            # JSON columns arrive as JSON text: embed the value, not a string holding it
            values = [json.loads(v) if j and isinstance(v, str) else v for v, j in zip(row, is_json)]
            f.write(json.dumps(dict(zip((c[0] for c in columns), values)), default=str) + "\n")
    try:
        types = ", ".join(f"'{name}': '{ctype}'" for name, ctype, *_ in columns)
        con.execute(f"INSERT INTO {table} SELECT * FROM read_json(?, format = 'newline_delimited', "
                    f"columns = {{{types}}})", [f.name])
    finally:
        os.unlink(f.name)


def _value(v):
    return json.dumps(v) if isinstance(v, (dict, list)) else v


def create_run(con, run_id: str, **fields) -> None:
    cols = ["run_id", *fields]
    con.execute(f"INSERT INTO runs (created, status, {', '.join(cols)}) "
                f"VALUES (now(), 'running', {', '.join('?' for _ in cols)})",
                [run_id, *map(_value, fields.values())])


def update_run(con, run_id: str, **fields) -> None:
    sets = ", ".join(f"{k} = ?" for k in fields)
    con.execute(f"UPDATE runs SET {sets} WHERE run_id = ?", [*map(_value, fields.values()), run_id])


def finish_run(con, run_id: str, status: str) -> None:
    con.execute("UPDATE runs SET status = ?, finished = now() WHERE run_id = ?", [status, run_id])


def save_cell(con, run_id: str, cell: dict, samples: list[dict] = (), metric: str | None = None) -> None:
    """Writes a cell and its samples in one transaction (replacing an earlier attempt at it)."""
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM samples WHERE run_id = ? AND cell_id = ?", [run_id, cell["cell_id"]])
        con.execute("DELETE FROM cells WHERE run_id = ? AND cell_id = ?", [run_id, cell["cell_id"]])
        cols = ["run_id", *cell]
        vals = [run_id, *map(_value, cell.values())]
        con.execute(f"INSERT INTO cells ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})", vals)
        if samples:
            _insert_rows(con, "samples", [sample_row(run_id, cell["cell_id"], k, s, metric)
                                          for k, s in enumerate(samples)])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def save_crypto(con, run_id: str, rounds: list[list[dict]]) -> None:
    """Rounds of crypto microbenchmarks (pqbench.crypto.measure results), appended after the run's
    earlier rounds: the machine's speed changes over time, so every round is kept for the model."""
    (first,) = con.execute("SELECT coalesce(max(round) + 1, 0) FROM crypto WHERE run_id = ?", [run_id]).fetchone()
    rows = [(run_id, r["name"], r["kind"], op, v["median_us"], v["p25_us"], v["p75_us"], v["n"], r["sizes"]["pk"],
             r["sizes"]["ct"] if r["kind"] == "kem" else r["sizes"]["sig"], first + k)
            for k, results in enumerate(rounds) for r in results for op, v in r["ops"].items()]
    if rows:
        _insert_rows(con, "crypto", rows)


def finished_cells(con, run_id: str) -> set[str]:
    rows = con.execute("SELECT cell_id FROM cells WHERE run_id = ? AND status IN ('done', 'skipped')",
                       [run_id]).fetchall()
    return {r[0] for r in rows}


def runs(con) -> list[dict]:
    cur = con.execute("SELECT run_id, name, status, created, finished FROM runs ORDER BY created")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def resolve_run(con, run: str | None) -> str:
    """A run id, a unique prefix of one, or 'latest'/None for the newest run."""
    all_runs = runs(con)
    if not all_runs:
        raise BadInput("RUN", "the database holds no runs")
    if run in (None, "latest", "last"):
        return all_runs[-1]["run_id"]
    matches = [r["run_id"] for r in all_runs if r["run_id"] == run or r["run_id"].startswith(run)
               or r.get("name") == run]
    if len(matches) != 1:
        known = ", ".join(r["run_id"] for r in all_runs[-5:])
        raise BadInput("RUN", f"{run!r} matches {len(matches)} runs (recent: {known})")
    return matches[0]


def export(con, run_id: str, out: Path, fmt: str) -> list[Path]:
    """Writes runs/cells/samples of one run as Parquet or CSV files into out; returns the paths."""
    if fmt not in ("parquet", "csv"):
        raise BadInput("--format", f"{fmt!r} is not parquet or csv")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for table in ("runs", "cells", "samples", "crypto"):
        path = out / f"{run_id}-{table}.{fmt}"
        opts = "(FORMAT PARQUET)" if fmt == "parquet" else "(FORMAT CSV, HEADER)"
        con.execute(f"COPY (SELECT * FROM {table} WHERE run_id = '{run_id}') TO '{path}' {opts}")
        written.append(path)
    return written
