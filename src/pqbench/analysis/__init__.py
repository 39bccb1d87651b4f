"""Statistics of a stored run: per-cell percentiles with bootstrap CIs, failure rates with binomial
CIs, paired differences between algorithms, the lower-bound model and quality warnings.

    from pqbench import store, analysis
    con = store.connect("results.duckdb", read_only=True)
    a = analysis.analyse(con, store.resolve_run(con, "latest"))
"""

from __future__ import annotations

import dataclasses
import tomllib

from pqbench import endpoints
from pqbench.algorithms import catalog
from pqbench.errors import BadInput
from pqbench.measure import wire

from pqbench.experiment.condition import describe  # noqa: F401  (analysis.describe, as before)
from pqbench.analysis.cells import ALG_FIELDS, QS, CellStats, analyse_cell, page_bytes
from pqbench.analysis.data import RunData, read
from pqbench.analysis.paired import PairedDiff, paired_differences
from pqbench.analysis.warnings import (Warning, cell_warnings, cpu_speed_warnings, node_speed_warnings, node_speeds,
                                       run_warnings)

__all__ = ["Analysis", "CellStats", "PairedDiff", "Warning", "analyse", "analyse_data", "describe", "QS",
           "page_bytes"]


@dataclasses.dataclass
class Analysis:
    run: dict
    cells: list  # CellStats of the cells with samples (done, or failed with samples)
    not_run: list  # rows of skipped cells and of failed cells without samples, with their reasons
    paired: list  # PairedDiff
    warnings: list  # run-level Warning
    variant_fields: tuple  # which of kex/sig/pad vary: they name the "algorithm" in figures
    # algorithm -> {op: OpSpread}: medians of the fastest and slowest microbenchmark rounds (the
    # model uses the fastest)
    crypto: dict = dataclasses.field(default_factory=dict)
    nodes: list = dataclasses.field(default_factory=list)  # the run's node segments, each with its crypto speed
    load: list = dataclasses.field(default_factory=list)  # load cells' rows, each with its steps (`pqbench load`)

    def label(self, c: CellStats) -> str:
        """The algorithm a cell measures, named by what varies in this run."""
        parts = []
        for f in self.variant_fields:
            v = c.row.get(f)
            parts.append(f"{f} {v}" if f in ("pad", "server", "client") else str(v))
        return " + ".join(parts)

    def labels(self) -> list[str]:
        """Every algorithm label in a stable order (first seen in the spec's axes order, else by name)."""
        return sorted({self.label(c) for c in self.cells}, key=self._order)

    def _order(self, label: str):
        first = self.variant_fields[0] if self.variant_fields else "kex"
        names = spec_axis(self.run, first)
        head = label.split(" + ")[0]
        return (names.index(head) if head in names else len(names), label)

    def cell_warnings(self) -> list[tuple[CellStats, Warning]]:
        return [(c, w) for c in self.cells for w in c.warnings]


def spec_axis(run: dict, axis: str) -> list:
    """The values of one axis in the order the spec lists them (catalog names), or [] if unknown."""
    spec = run.get("spec")
    if not isinstance(spec, dict) and run.get("spec_toml"):
        try:
            spec = tomllib.loads(run["spec_toml"])
        except tomllib.TOMLDecodeError:
            spec = None
    values = ((spec or {}).get("axes") or {}).get(axis) or [] if isinstance(spec, dict) else []
    if axis not in ("kex", "sig"):
        return list(values)
    out = []
    for v in values:
        try:
            out.append(catalog.find(str(v), "kem" if axis == "kex" else "sig").name)
        except BadInput:
            out.append(str(v))
    return out


def _variant_fields(cells: list[CellStats]) -> tuple:
    varying = tuple(f for f in ALG_FIELDS if len({c.row.get(f) for c in cells}) > 1 and not _by_protocol(cells, f))
    return varying or ("kex", "sig")


def _by_protocol(cells: list[CellStats], field: str) -> bool:
    """A target run's stack that varies only with the protocol (remote / remote-ssh; openssl / gossh):
    the algorithm's names already say which protocol, and the target names the server."""
    if field not in ("server", "client") or not all(c.row.get("target") for c in cells):
        return False
    return all(len({c.row.get(field) for c in cells if c.row.get("protocol") == p}) == 1
               for p in {c.row.get("protocol") for c in cells})


def analyse_data(data: RunData, *, resamples: int = 1000, seed: int = 0) -> Analysis:
    cells, not_run, load = [], [], []
    speeds = node_speeds(data.crypto_nodes)
    fastest = _fastest(data.crypto)  # model input: a cell's own node's rounds when it has them
    by_node = {node: {**fastest, **_fastest(spread)} for node, spread in data.crypto_nodes.items()}
    # how far each node's clients may stand from the wire: from the floor it measured at its start, by a process
    # scheduled as the cell's client is
    floors = {n["node"]: n.get("calibration_start") for n in data.nodes if n.get("node")}

    def allowance(row: dict) -> float:
        floor = floors.get(row.get("node"), data.run.get("calibration_start"))
        return wire.allowance_ms(floor, endpoints.client_priority(row.get("client") or ""))
    for cd in data.cells:
        if cd.row.get("kind") == "load" and cd.row.get("status") != "skipped":
            load.append({**cd.row, "steps": data.load_steps.get(cd.row["cell_id"], [])})
            continue
        if cd.ok.size == 0:
            not_run.append(cd.row)
            continue
        c = analyse_cell(cd, by_node.get(cd.row.get("node"), fastest), resamples=resamples, seed=seed,
                         allowance_ms=allowance(cd.row))
        c.warnings = cell_warnings(c)
        cells.append(c)
    return Analysis(run=data.run, cells=cells, not_run=not_run,
                    paired=paired_differences(cells, resamples=resamples, seed=seed),
                    warnings=run_warnings(data.run) + cpu_speed_warnings(data.crypto) + node_speed_warnings(speeds),
                    variant_fields=_variant_fields(cells), crypto=data.crypto,
                    nodes=[{**n, "crypto_speed": speeds.get(n["node"])} for n in data.nodes], load=load)


def _fastest(spread: dict) -> dict:
    return {name: {op: s.fastest for op, s in ops.items()} for name, ops in spread.items()}


def analyse(con, run_id: str, *, resamples: int = 1000, seed: int = 0) -> Analysis:
    return analyse_data(read(con, run_id), resamples=resamples, seed=seed)
