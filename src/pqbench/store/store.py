"""The results store: one DuckDB file (default results.duckdb) with its tables and schema version
(pqbench.store.schema: numbered migrations).

  runs     one row per `pqbench run`: spec, provenance (host, versions, commit, backend, seeds),
           calibration at start and end, status
  cells    one row per grid point: its parameters, status (done / skipped / failed), reason, counts
  samples  one row per sample with every field pqtimer emits (phase times in ms, sizes, TCP_INFO);
           the raw JSON line is kept too
  crypto   the crypto microbenchmarks of each algorithm the run used, in rounds at the start and the
           end of every segment (input of the lower-bound model), each with its node
  nodes    one row per node's segment of a run (a local run: one per start): provenance, calibration,
           status

Results are written after every cell, in one transaction, so a crash loses at most the cell in
progress and a resumed run finds every finished cell.
"""

import json
import os
import re
import tempfile
from pathlib import Path

from pqbench.errors import BadInput, MissingCapability
from pqbench.sample import STORED_PHASES
from pqbench.store import schema
from pqbench.store.schema import WIRE_COLUMNS, WIRE_COLUMNS_V3, WIRE_COLUMNS_V13

try:
    import duckdb
except ImportError:  # pragma: no cover - the build installs it
    duckdb = None

DEFAULT_DB = Path("results.duckdb")


# What the operating system says when a store cannot be written (DuckDB passes its strerror on)
_UNWRITABLE = ("No space left on device", "Disk quota exceeded", "Read-only file system", "Input/output error")


class Unwritable(MissingCapability):
    """The store's disk refused a write (full, read-only …): what was committed before stays, the statement
    that failed is rolled back whole."""

    def __init__(self, path: Path, detail: str):
        self.path = path
        super().__init__(f"cannot write to the store {path}: {detail}", "free space on its disk, or give another --db")


class Connection:
    """A DuckDB connection (every method passes through) whose failures say what happened.

    - Ctrl-C: DuckDB's Python module runs the signal's handler itself while a statement runs, swallows the
      KeyboardInterrupt it raises (the testbed's TestbedInterrupted too) and raises RuntimeError('Query
      interrupted') instead, so a command interrupted while it wrote ended with a traceback (exit 1) instead
      of its next step (exit 130). Raised here as the KeyboardInterrupt it was.
    - A full (or read-only) disk: Unwritable, naming the store and the fix, instead of a DuckDB traceback."""

    def __init__(self, con, path: Path):
        self._con, self.path = con, path

    def __getattr__(self, name):
        attr = getattr(self._con, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            try:
                result = attr(*args, **kwargs)
            except (RuntimeError, duckdb.Error) as e:
                raise self._translated(e) from None
            return self if result is self._con else result  # execute() returns the connection: keep this one
        return call

    def _translated(self, e: Exception) -> BaseException:
        text = str(e)
        if isinstance(e, duckdb.InterruptException) or (type(e) is RuntimeError and "interrupted" in text.lower()):
            return KeyboardInterrupt()
        if isinstance(e, duckdb.Error) and (any(w in text for w in _UNWRITABLE) or "invalidated" in text):
            return Unwritable(self.path, text.splitlines()[0])
        return e

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def connect(path: Path | str = DEFAULT_DB, read_only: bool = False) -> Connection:
    """Opens a store; read-write brings its schema up to date first (old stores open and resume)."""
    if duckdb is None:
        raise MissingCapability("the Python package duckdb is missing", "run `make` (it installs pqbench's deps)")
    path = Path(path)
    if read_only and not path.exists():
        raise BadInput("--db", f"{path} does not exist")
    try:
        con = Connection(duckdb.connect(str(path), read_only=read_only), path)
    except duckdb.Error as e:
        raise BadInput("--db", _open_failure(path, str(e))) from None
    except RuntimeError as e:
        raise Connection(None, path)._translated(e) from None
    if not read_only:
        migrate(con)
    elif not _has_table(con, "runs"):
        con.close()
        raise BadInput("--db", f"{path} is a DuckDB file without pqbench's tables: it holds no pqbench run "
                               "(give the file `pqbench run --db` wrote)")
    return con


def _open_failure(path: Path, error: str) -> str:
    """Why a store would not open. DuckDB lets one process at a time write a store, and says which holds it."""
    held = re.search(r"Conflicting lock is held in (.*?) \(PID (\d+)\)", error)
    if held:
        pid = int(held.group(2))
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            command = held.group(1)
        command = " ".join(command.split())[:200]
        return (f"{path} is open in another process (PID {pid}: {command}), and a store has one writer at a time: "
                f"wait for that process to end, or give another --db (`pqbench merge` joins stores later)")
    return f"{path} cannot be opened as a DuckDB store ({error.splitlines()[0]})"


def _rollback(con) -> None:
    """Rolls back the transaction in progress, if there still is one: DuckDB ends a transaction whose COMMIT
    failed (a full disk) or was interrupted itself, and a ROLLBACK then fails and would hide why."""
    try:
        con.execute("ROLLBACK")
    except (KeyboardInterrupt, Exception) as e:
        if "no transaction is active" not in str(e):
            raise


def _has_table(con, name: str) -> bool:
    return bool(con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?",
                            [name]).fetchone()[0])


def schema_version(con) -> int:
    """The last migration applied; 0 for an empty store or one from before numbered migrations."""
    if not _has_table(con, "schema_version"):
        return 0
    return con.execute("SELECT coalesce(max(version), 0) FROM schema_version").fetchone()[0]


def migrate(con) -> list[int]:
    """Applies the migrations the store lacks, each in one transaction; returns their numbers."""
    con.execute(schema.VERSION_TABLE)
    applied = []
    for version, what, sql in schema.MIGRATIONS:
        if version <= schema_version(con):
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(sql)
            con.execute("INSERT INTO schema_version VALUES (?, now(), ?)", [version, what])
            con.execute("COMMIT")
        except BaseException:
            _rollback(con)
            raise
        applied.append(version)
    return applied


def columns(con, table: str) -> list[str]:
    return [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()]


def add_cell_columns(con, wanted: dict) -> list[str]:
    """Adds the cells columns a store lacks (name -> SQL type: a registered axis's, pqbench.axis); the axes
    that existed when a migration was numbered have theirs from it. Returns the names added."""
    have = set(columns(con, "cells"))
    added = [name for name in wanted if name not in have]
    for name in added:
        con.execute(f'ALTER TABLE cells ADD COLUMN "{name}" {wanted[name]}')
    return added


def sample_row(run_id: str, cell_id: str, seq: int, s: dict, metric: str) -> dict:
    """A client's JSON sample flattened into the samples table's columns (by name)."""
    t = s.get("t_ns") or {}
    ms = {f"{p}_ms": (t[p] / 1e6 if t.get(p) is not None else None) for p in STORED_PHASES}
    sent, recv = s.get("msg_bytes_sent") or {}, s.get("msg_bytes_received") or {}
    tcp = s.get("tcp_handshake") or {}
    wire = s.get("wire") or {}
    return {"run_id": run_id, "cell_id": cell_id, "seq": seq, "worker": s.get("worker"), "i": s.get("i"),
            "ok": bool(s.get("ok")), "error_class": s.get("error_class"), "error": s.get("error"),
            "duration_ms": ms.get(f"{metric}_ms") if s.get("ok") else None, **ms,
            "start_mono_ns": s.get("start_mono_ns"), "group": s.get("group"), "sigalg": s.get("sigalg"),
            "resumed": s.get("resumed"), "client_hello_bytes": sent.get("client_hello"),
            "server_hello_bytes": recv.get("server_hello"), "certificate_bytes": recv.get("certificate") or (s.get("cert_compression") or {}).get("certificate_bytes"),
            "certificate_verify_bytes": recv.get("certificate_verify"),
            "hs_bytes_sent": sum(sent.values()) if sent else None,
            "hs_bytes_received": sum(recv.values()) if recv else None,
            "records_sent": s.get("records_sent"), "records_received": s.get("records_received"),
            "tcp_bytes_sent": tcp.get("bytes_sent"), "tcp_bytes_received": tcp.get("bytes_received"),
            "tcp_segs_out": tcp.get("segs_out"), "tcp_segs_in": tcp.get("segs_in"),
            "tcp_retransmits": tcp.get("retransmits"), "tcp_rtt_us": tcp.get("rtt_us"), "tcp_cwnd": tcp.get("cwnd"),
            "http_status": s.get("http_status"), "body_bytes": s.get("body_bytes"), "requests": s.get("requests"),
            "cpu_wait_ms": s["cpu_wait_ns"] / 1e6 if s.get("cpu_wait_ns") is not None else None,
            "hrr": s.get("hrr"), "certificate_compressed_bytes": (s.get("cert_compression") or {}).get("compressed_bytes"),
            "early_data": s.get("early_data"), "transport": s.get("transport") or "tcp",
            "raw": json.dumps(s), "local_port": s.get("local_port"), "stack": s.get("stack") or "openssl",
            "server": s.get("server") or s.get("stack") or "openssl", "protocol": s.get("protocol") or "tls",
            **{k: wire.get(k.removeprefix("wire_")) for k in (*WIRE_COLUMNS, *WIRE_COLUMNS_V3, *WIRE_COLUMNS_V13)}}


def _insert_rows(con, table: str, rows: list[dict]) -> None:
    """Bulk insert through a temporary JSON-lines file: DuckDB binds Python parameters slowly
    (~1 ms per sample row), while read_json takes a whole cell in milliseconds."""
    columns = con.execute(f"DESCRIBE {table}").fetchall()  # (name, type, ...)
    is_json = [c[1] == "JSON" for c in columns]
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for row in rows:
            # JSON columns arrive as JSON text: embed the value, not a string holding it
            values = [row.get(c[0]) for c in columns]
            values = [json.loads(v) if j and isinstance(v, str) else v for v, j in zip(values, is_json)]
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


def save_cell(con, run_id: str, cell: dict, samples: list[dict] = (), metric: str | None = None,
              steps: list[dict] = ()) -> None:
    """Writes a cell and its samples (a load cell: its steps) in one transaction (replacing an earlier
    attempt at it)."""
    con.execute("BEGIN TRANSACTION")
    try:
        if steps or _has_table(con, "load_steps"):  # (a connection that skipped the migrations has none)
            con.execute("DELETE FROM load_steps WHERE run_id = ? AND cell_id = ?", [run_id, cell["cell_id"]])
        if steps:
            con.executemany("INSERT INTO load_steps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            [[run_id, cell["cell_id"], k, s["offered_rate"], s.get("throughput"), s.get("completed"),
                              (s.get("latency_ms") or {}).get("p50"), (s.get("latency_ms") or {}).get("p99"),
                              s.get("server_cpu_s"), s.get("client_cpu_s"), bool(s.get("saturated")),
                              s.get("client_bound"), json.dumps(s)] for k, s in enumerate(steps)])
        con.execute("DELETE FROM samples WHERE run_id = ? AND cell_id = ?", [run_id, cell["cell_id"]])
        con.execute("DELETE FROM cells WHERE run_id = ? AND cell_id = ?", [run_id, cell["cell_id"]])
        cols = ["run_id", *cell]
        vals = [run_id, *map(_value, cell.values())]
        names = ", ".join(f'"{c}"' for c in cols)  # quoted: "cross" is an SQL keyword
        con.execute(f"INSERT INTO cells ({names}) VALUES ({', '.join('?' for _ in cols)})", vals)
        if samples:
            _insert_rows(con, "samples", [sample_row(run_id, cell["cell_id"], k, s, metric)
                                          for k, s in enumerate(samples)])
        con.execute("COMMIT")
    except BaseException:
        _rollback(con)
        raise


def save_crypto(con, run_id: str, rounds: list[list[dict]], *, node: str | None = None,
                segment: str | None = None) -> None:
    """Rounds of crypto microbenchmarks (pqbench.algorithms.microbench.measure results), appended after the
    segment's earlier rounds: the machine's speed changes over time, so every round is kept for the model.
    A round is (run, segment, round): segments are unique, so rounds of several nodes never collide."""
    (first,) = con.execute("SELECT coalesce(max(round) + 1, 0) FROM crypto WHERE run_id = ? "
                           "AND segment IS NOT DISTINCT FROM ?", [run_id, segment]).fetchone()
    rows = [{"run_id": run_id, "name": r["name"], "kind": r["kind"], "op": op, "median_us": v["median_us"],
             "p25_us": v["p25_us"], "p75_us": v["p75_us"], "n": v["n"], "pk": r["sizes"]["pk"],
             "ct_or_sig": r["sizes"]["ct"] if r["kind"] == "kem" else r["sizes"]["sig"], "round": first + k,
             "node": node, "segment": segment}
            for k, results in enumerate(rounds) for r in results for op, v in r["ops"].items()]
    if rows:
        _insert_rows(con, "crypto", rows)


def join_node(con, run_id: str, segment: str, node: str, provenance: dict) -> None:
    """A node's segment of a run begins (a local run: this host; a cluster: each worker that measures)."""
    con.execute("INSERT INTO nodes (run_id, segment, node, provenance, joined, status, cells) "
                "VALUES (?, ?, ?, ?, now(), 'running', 0)", [run_id, segment, node, json.dumps(provenance)])


def update_node(con, run_id: str, segment: str, **fields) -> None:
    """Sets a segment's fields (calibration_start/end, status, …); status other than running marks it left."""
    sets = ", ".join(f'"{k}" = ?' for k in fields)
    left = ', "left" = now()' if fields.get("status", "running") != "running" else ""
    con.execute(f"UPDATE nodes SET {sets}{left}, cells = (SELECT count(*) FROM cells c WHERE c.run_id = nodes.run_id "
                "AND c.node = nodes.node) WHERE run_id = ? AND segment = ?",
                [*map(_value, fields.values()), run_id, segment])


def node_rows(con, run_id: str) -> list[dict]:
    """A run's node segments in the order they joined, provenance and calibrations as dicts; [] for runs
    and stores from before nodes were recorded."""
    if not _has_table(con, "nodes"):
        return []
    rows = _dicts(con.execute("SELECT * FROM nodes WHERE run_id = ? ORDER BY joined, node", [run_id]))
    for r in rows:
        for k in ("provenance", "calibration_start", "calibration_end"):
            r[k] = json.loads(r[k]) if r[k] else None
    return rows


def finished_cells(con, run_id: str) -> set[str]:
    rows = con.execute("SELECT cell_id FROM cells WHERE run_id = ? AND status IN ('done', 'skipped')",
                       [run_id]).fetchall()
    return {r[0] for r in rows}


def runs(con) -> list[dict]:
    cur = con.execute("SELECT run_id, name, status, created, finished FROM runs ORDER BY created")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def resolve_run(con, run: str | None) -> str:
    """A run id, a run's name (the newest run of that name), a unique prefix of an id, or
    'latest'/None for the newest run. An exact id or name wins over prefixes: `tiny` is the run named
    tiny even when runs tiny-… and tiny1-… exist."""
    all_runs = runs(con)
    if not all_runs:
        raise BadInput("RUN", "the database holds no runs")
    if run in (None, "latest", "last"):
        return all_runs[-1]["run_id"]
    exact = [r["run_id"] for r in all_runs if run in (r["run_id"], r.get("name"))]
    if exact:
        return exact[-1]
    matches = [r["run_id"] for r in all_runs if r["run_id"].startswith(run)]
    if len(matches) != 1:
        known = ", ".join(r["run_id"] for r in all_runs[-5:])
        raise BadInput("RUN", f"{run!r} matches {len(matches)} runs (recent: {known})")
    return matches[0]


def export(con, run_id: str, out: Path, fmt: str) -> list[Path]:
    """Writes runs/cells/samples/crypto/nodes of one run as Parquet or CSV files into out; returns the paths."""
    if fmt not in ("parquet", "csv"):
        raise BadInput("--format", f"{fmt!r} is not parquet or csv")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for table in exported_tables(con):
        path = out / f"{run_id}-{table}.{fmt}"
        opts = "(FORMAT PARQUET)" if fmt == "parquet" else "(FORMAT CSV, HEADER)"
        # COPY takes no parameters: the run id and path are quoted as SQL literals
        con.execute(f"COPY (SELECT * FROM {table} WHERE run_id = {_quote(run_id)}) TO {_quote(str(path))} {opts}")
        written.append(path)
    return written


def _quote(text: str) -> str:
    """A SQL string literal, for the statements that take no parameters (COPY)."""
    return "'" + text.replace("'", "''") + "'"


def exported_tables(con) -> list[str]:
    """The tables a run is exported as, in order (a read-only store from before nodes has no nodes table)."""
    return [t for t in ("runs", "cells", "samples", "crypto", "nodes") if _has_table(con, t)]


def count_rows(con, run_id: str) -> dict[str, int]:
    return {t: con.execute(f"SELECT count(*) FROM {t} WHERE run_id = ?", [run_id]).fetchone()[0]
            for t in exported_tables(con)}


def runs_named(con, name: str) -> list[tuple[str, str]]:
    """(run_id, spec text) of the runs with this spec name, newest first."""
    return con.execute("SELECT run_id, spec_toml FROM runs WHERE name = ? ORDER BY created DESC", [name]).fetchall()


def provenance(con, run_id: str) -> dict:
    row = con.execute("SELECT provenance FROM runs WHERE run_id = ?", [run_id]).fetchone()
    return json.loads(row[0]) if row and row[0] else {}


def _dicts(cur) -> list[dict]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def run_row(con, run_id: str) -> dict | None:
    rows = _dicts(con.execute("SELECT * FROM runs WHERE run_id = ?", [run_id]))
    return rows[0] if rows else None


def sample_raw(con, run_id: str, cell_id: str) -> list[str]:
    """A cell's samples as the clients printed them (JSON text, with the wire record joined), in order."""
    return [r[0] for r in con.execute("SELECT raw FROM samples WHERE run_id = ? AND cell_id = ? ORDER BY seq",
                                      [run_id, cell_id]).fetchall()]


def cell_rows(con, run_id: str) -> list[dict]:
    return _dicts(con.execute("SELECT * FROM cells WHERE run_id = ? ORDER BY position, cell_id", [run_id]))


def load_step_rows(con, run_id: str) -> list[dict]:
    """A run's load steps in order, each with its generator result (result) as a dict."""
    if not _has_table(con, "load_steps"):
        return []
    rows = _dicts(con.execute("SELECT * FROM load_steps WHERE run_id = ? ORDER BY cell_id, step", [run_id]))
    for r in rows:
        r["result"] = json.loads(r["result"])
    return rows


def crypto_rows(con, run_id: str) -> list[dict]:
    return _dicts(con.execute("SELECT * FROM crypto WHERE run_id = ?", [run_id]))


def sample_columns(con, run_id: str, numeric: tuple[str, ...]) -> dict:
    """A run's samples as numpy columns (cell_id, ok, group, sigalg, error_class and the numeric fields as
    doubles), ordered by cell and sequence. Fields an older store lacks come back as NULL."""
    have = set(columns(con, "samples"))
    cols = ", ".join(f'CAST("{f}" AS DOUBLE) AS "{f}"' if f in have else f'CAST(NULL AS DOUBLE) AS "{f}"'
                     for f in numeric)
    return con.execute(f'SELECT cell_id, ok, "group", sigalg, error_class, {cols} FROM samples WHERE run_id = ? '
                       "ORDER BY cell_id, seq", [run_id]).fetchnumpy()  # columnar: a million rows in a second


def early_data(con, run_id: str) -> dict[str, dict]:
    """cell_id -> how its samples' 0-RTT early data fared ({"accepted": n, "rejected": n, …}); cells without
    early data are absent, as are stores from before it was recorded."""
    if "early_data" not in columns(con, "samples"):
        return {}
    out: dict = {}
    for cell_id, state, n in con.execute("SELECT cell_id, early_data, count(*) FROM samples WHERE run_id = ? "
                                         "AND early_data IS NOT NULL GROUP BY ALL", [run_id]).fetchall():
        out.setdefault(cell_id, {})[state] = n
    return out


def save_scan(con, scan_id: str, *, target: str, address: str, protocol: str, summary: str, result: dict,
              provenance: dict) -> None:
    """One `pqbench scan` of one target (replacing an earlier scan with the same id)."""
    con.execute("DELETE FROM scans WHERE scan_id = ?", [scan_id])
    con.execute("INSERT INTO scans VALUES (?, now(), ?, ?, ?, ?, ?, ?)",
                [scan_id, target, address, protocol, summary, json.dumps(result), json.dumps(provenance)])


def scan_rows(con, addresses: list[str] | None = None) -> list[dict]:
    """The newest scan of each target address (of these addresses only, when given), oldest first;
    result and provenance as dicts. Empty for a store from before scans."""
    if not _has_table(con, "scans"):
        return []
    rows = _dicts(con.execute("SELECT * FROM scans s WHERE created = (SELECT max(created) FROM scans t "
                              "WHERE t.address = s.address AND t.protocol = s.protocol) ORDER BY created"))
    for r in rows:
        r["result"], r["provenance"] = json.loads(r["result"]), json.loads(r["provenance"])
    return [r for r in rows if addresses is None or r["address"] in addresses]
