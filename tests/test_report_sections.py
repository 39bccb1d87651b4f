"""The report's sections (pqbench.report.sections): a capability's tables and figures reach the report from its
registered Section alone, in its place among the others'; a section with nothing for a run adds nothing."""

import pytest
from matplotlib.figure import Figure

from conftest import unpacked_store
from pqbench import report, store
from pqbench.report.sections import Section, register, unregister
from pqbench.report.tables import Table
from test_compat import RUN, STORE


def _table(con, run_id, a):
    return [Table("toy", "Toy: cells per protocol", ["protocol", "cells"],
                  [[p, str(sum(1 for c in a.cells if (c.row.get("protocol") or "tls") == p))]
                   for p in sorted({c.row.get("protocol") or "tls" for c in a.cells})]),
            None]  # a table the run has no data for: left out


def _figure(a):
    fig = Figure(figsize=(3, 2))
    fig.add_subplot().bar(["cells"], [len(a.cells)])
    return fig


@pytest.fixture
def toy_section():
    register(Section("toy", 55, _table, lambda con, run_id: (("toy-cells", "Toy cells", _figure),
                                                               ("toy-none", "Nothing", lambda a: None)),
                     figure_order=80, captions={"toy-cells": "How many cells the run has."}))
    try:
        yield
    finally:
        unregister("toy")


def test_a_toy_section_reaches_the_report_in_its_place_from_its_record_alone(toy_section, tmp_path):
    con = store.connect(unpacked_store(STORE, tmp_path / "old.duckdb"), read_only=True)
    try:
        out = report.build(con, RUN, tmp_path / "report", resamples=50)
        cells = len([c for c in store.cell_rows(con, RUN) if c["status"] == "done"])
    finally:
        con.close()
    md = (tmp_path / "report" / "summary.md").read_text()
    # its table after the cells' own (order 50) and before the calibration (70)
    assert md.index("## Lower-bound model per cell") < md.index("## Toy: cells per protocol") < md.index("## Calibration")
    assert f"| tls | {cells} |" in md.split("## Toy: cells per protocol")[1]
    # its figure after every other (figure order 80), with its caption; the one without data is not drawn
    assert out["figures"][-1] == "toy-cells" and "toy-none" not in out["figures"]
    assert (tmp_path / "report" / "figures" / "toy-cells.png").stat().st_size > 0
    assert "How many cells the run has." in md
