"""Reading one run out of the store: the run row, its cells, their samples and its crypto costs."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from pqbench import store
from pqbench.sample import STORED_PHASES

# Sample columns the analysis uses (numeric; NULL becomes NaN).
SAMPLE_FIELDS = ("duration_ms", *(f"{p}_ms" for p in STORED_PHASES), "client_hello_bytes", "server_hello_bytes",
                 "certificate_bytes", "certificate_verify_bytes", "hs_bytes_sent", "hs_bytes_received",
                 "tcp_bytes_sent", "tcp_bytes_received", "tcp_segs_out", "tcp_segs_in", "tcp_retransmits",
                 "body_bytes", "requests", "cpu_wait_ms", *store.WIRE_COLUMNS, *store.WIRE_COLUMNS_V3,
                 *store.WIRE_COLUMNS_V13,
                 "hrr", "certificate_compressed_bytes")
JSON_RUN_FIELDS = ("spec", "provenance", "calibration_start", "calibration_end", "cell_order", "warnings")
JSON_CELL_FIELDS = ("link", "failure_classes", "link_counters", "concurrency", "detector", "wire", "load", "path")


@dataclasses.dataclass
class CellData:
    row: dict  # the cells row, JSON columns decoded
    ok: np.ndarray  # bool per sample
    values: dict  # field -> float array over all samples (NaN where NULL)
    groups: list  # negotiated group per successful sample (names as pqtimer reports them)
    sigalgs: list  # negotiated signature algorithm per successful sample
    error_classes: list  # error class per failed sample

    def ok_values(self, field: str) -> np.ndarray:
        """The field over successful samples, NULLs dropped."""
        v = self.values[field][self.ok]
        return v[~np.isnan(v)]


@dataclasses.dataclass
class RunData:
    run: dict
    cells: list  # CellData of every cell, in the order they ran (skipped ones have no samples)
    crypto: dict  # algorithm name -> {op: OpSpread} of its microbenchmark rounds
    load_steps: dict = dataclasses.field(default_factory=dict)  # a load cell's id -> its steps' results, in order
    # node -> crypto as above, of that node's rounds only (runs measured on several nodes: each cell's model
    # uses its own node's speed); empty for runs from before nodes were recorded
    crypto_nodes: dict = dataclasses.field(default_factory=dict)
    nodes: list = dataclasses.field(default_factory=list)  # the run's node segments (store.node_rows)

    def of_node(self, node: str) -> "RunData":
        """The part one node measured: its cells, its crypto rounds, its segments."""
        return dataclasses.replace(self, cells=[c for c in self.cells if c.row.get("node") == node],
                                   crypto=self.crypto_nodes.get(node, self.crypto),
                                   crypto_nodes={k: v for k, v in self.crypto_nodes.items() if k == node},
                                   nodes=[n for n in self.nodes if n["node"] == node])


def _decode(row: dict, fields) -> dict:
    for f in fields:
        if isinstance(row.get(f), str):
            try:
                row[f] = json.loads(row[f])
            except json.JSONDecodeError:
                pass  # keep the text: a report shows it rather than failing
    return row


def _plain(column, fill):
    """A DuckDB numpy column with NULLs (masked) replaced by fill."""
    if isinstance(column, np.ma.MaskedArray):
        return column.filled(fill) if fill is not None else np.where(column.mask, None, column.data)
    return np.asarray(column)


def read(con, run_id: str) -> RunData:
    run = store.run_row(con, run_id)
    if run is None:
        from pqbench.errors import BadInput
        raise BadInput("RUN", f"no run {run_id!r} in the database")
    run = _decode(run, JSON_RUN_FIELDS)
    cell_rows = [_decode(r, JSON_CELL_FIELDS) for r in store.cell_rows(con, run_id)]
    res = store.sample_columns(con, run_id, SAMPLE_FIELDS)
    ids = np.asarray(res["cell_id"], dtype=object)
    bounds = {}
    if ids.size:
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        ends = np.r_[starts[1:], ids.size]
        bounds = {ids[a]: (a, b) for a, b in zip(starts, ends)}
    ok_all = _plain(res["ok"], False).astype(bool)
    values_all = {f: _plain(res[f], np.nan).astype(float) for f in SAMPLE_FIELDS}
    groups_all, errors_all = _plain(res["group"], None), _plain(res["error_class"], None)
    sigalgs_all = _plain(res["sigalg"], None)
    cells = []
    for row in cell_rows:
        a, b = bounds.get(row["cell_id"], (0, 0))
        ok = ok_all[a:b]
        cells.append(CellData(row, ok, {f: v[a:b] for f, v in values_all.items()},
                              [g for g in groups_all[a:b][ok]], [g for g in sigalgs_all[a:b][ok]],
                              [e or "unknown" for e in errors_all[a:b][~ok]]))
    steps: dict = {}
    for s in store.load_step_rows(con, run_id):
        steps.setdefault(s["cell_id"], []).append(s["result"])
    crypto = store.crypto_rows(con, run_id)
    by_node: dict[str, list] = {}
    for r in crypto:
        if r.get("node"):
            by_node.setdefault(r["node"], []).append(r)
    return RunData(run, cells, crypto_spread(crypto), steps, {n: crypto_spread(rows) for n, rows in by_node.items()},
                   store.node_rows(con, run_id))


@dataclasses.dataclass(frozen=True)
class OpSpread:
    """One operation's median (ms) in its fastest and its slowest microbenchmark round."""
    fastest: float
    slowest: float
    rounds: int


def crypto_spread(rows: list[dict]) -> dict:
    """Crypto table rows -> algorithm -> op -> OpSpread (rows of stores without rounds are one round)."""
    medians: dict[tuple, list] = {}
    for r in rows:
        if r.get("median_us") is not None:
            medians.setdefault((r["name"], r["op"]), []).append(r["median_us"] / 1000)
    out: dict[str, dict] = {}
    for (name, op), ms in medians.items():
        out.setdefault(name, {})[op] = OpSpread(min(ms), max(ms), len(ms))
    return out


def cell_data(row: dict, samples: list[dict], metric: str) -> CellData:
    """A cell straight from its samples (no store): what `pqbench handshake` summarises."""
    rows = [store.sample_row("", row.get("cell_id", ""), k, s, metric) for k, s in enumerate(samples)]
    ok = np.array([r["ok"] for r in rows], dtype=bool)
    values = {f: np.array([np.nan if r.get(f) is None else float(r[f]) for r in rows], dtype=float)
              for f in SAMPLE_FIELDS}
    return CellData(row, ok, values, [r["group"] for r in rows if r["ok"]], [r["sigalg"] for r in rows if r["ok"]],
                    [r["error_class"] or "unknown" for r in rows if not r["ok"]])
