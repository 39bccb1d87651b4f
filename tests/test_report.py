"""pqbench report and export: on small REAL runs (pqbench run, root) opened in headless Chromium, and
on generated data for the figures a tiny real run cannot produce (named scenarios, failures)."""

import base64
import json
import textwrap

import duckdb
import pytest

import chromium
from conftest import run_pqbench
from pqbench import analysis, report, store
from pqbench.report import tables
from test_analysis import save

COMMON = """
seed = 3
parallel = 2
lanes = 1      # what is tested is the report: one testbed and a few server workers start fastest
workers = 4
warmup = 1
calibration_samples = 20
[axes]
kex = ["X25519", "X25519MLKEM768"{extra_kex}]
sig = ["ecdsap256"]
rtt = ["5ms"]
"""
SPECS = {
    # 2 kex x 2 loss at 5 ms, n = 30; McEliece has no TLS code point here: two skipped cells.
    "hs": "samples = 30\n" + COMMON.format(extra_kex=', "mceliece348864"') + 'loss = ["0%", "5%"]\n',
    "page": "samples = 10\n" + COMMON.format(extra_kex="") + 'loss = ["0%"]\npage = ["1k", "100k"]\n',
    "req": "samples = 10\n" + COMMON.format(extra_kex="") + 'loss = ["0%"]\nrequests = [1, 4]\n',
}
HANDSHAKE_FIGURES = {"handshake-vs-loss", "wire", "cdf", "phases", "model"}


@pytest.fixture(scope="module")
def real_runs(built_stack, tmp_path_factory):
    """Three tiny runs made by `pqbench run` into one database: {kind: run_id}, and the db path."""
    d = tmp_path_factory.mktemp("report")
    db = d / "results.duckdb"
    runs = {}
    for kind, body in SPECS.items():
        spec = d / f"tiny-{kind}.toml"
        spec.write_text(f'name = "tiny-{kind}"\n' + textwrap.dedent(body))
        r = run_pqbench("run", spec, "--db", db, "--quiet", timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        runs[kind] = r.stdout.strip().splitlines()[-1]
    return db, runs


def make_report(db, run, out):
    r = run_pqbench("report", run, "--db", db, "--out", out, "--json", "--resamples", "300")
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def check_in_chromium(html_path, expected: set[str]) -> dict[str, str]:
    """The page loads without console messages and every expected figure decodes."""
    dom, console = chromium.open_page(html_path)
    assert console == [], console
    imgs = chromium.images(dom)
    assert {k.removeprefix("img-") for k in imgs} == expected
    for ident, data in imgs.items():
        assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, ident
    assert chromium.body_attribute(dom, "data-figures") == str(len(expected))
    assert chromium.body_attribute(dom, "data-figures-broken") == "0"
    assert "http://" not in dom and "https://" not in dom  # self-contained: nothing to fetch
    return imgs


@pytest.mark.root
def test_report_of_a_real_handshake_run(real_runs, tmp_path):
    db, runs = real_runs
    result = make_report(db, runs["hs"], tmp_path / "hs")
    figures = set(result["figures"])
    assert HANDSHAKE_FIGURES <= figures
    assert not figures & {"pages", "requests", "scenarios"}  # nothing of that kind in the run
    check_in_chromium(tmp_path / "hs" / "report.html", figures)
    page = (tmp_path / "hs" / "report.html").read_text()
    assert "Not shown: " in page and "Download time vs page size (no page cells)" in page
    assert "mceliece348864" in page and "no TLS code point" in page  # skipped cells with the reason
    for section in ("paired", "cells", "model-table", "not-run", "crypto", "calibration", "provenance", "spec"):
        assert f'id="{section}"' in page, section
    md = (tmp_path / "hs" / "summary.md").read_text()
    for fid in figures:
        assert f"(figures/{fid}.png)" in md and (tmp_path / "hs" / "figures" / f"{fid}.png").stat().st_size > 3000
    assert "## Paired differences" in md and "X25519MLKEM768" in md
    # every measured cell says how many workers measured it (how concurrent its samples were)
    cells_md = md.split("## Per cell", 1)[1].split("\n## ", 1)[0]
    assert "| workers |" in cells_md
    assert all(row.rstrip(" |").rsplit("| ", 1)[1][:1].isdigit()
               for row in cells_md.splitlines() if row.startswith("| X25519"))


@pytest.mark.root
def test_page_and_request_runs_get_their_own_figures(real_runs, tmp_path):
    db, runs = real_runs
    for kind, own in (("page", "pages"), ("req", "requests")):
        result = make_report(db, runs[kind], tmp_path / kind)
        figures = set(result["figures"])
        assert own in figures and "handshake-vs-loss" not in figures
        check_in_chromium(tmp_path / kind / "report.html", figures)


@pytest.mark.root
def test_real_measurements_sit_above_the_lower_bound(real_runs):
    db, runs = real_runs
    con = store.connect(db, read_only=True)
    try:
        for run in runs.values():
            a = analysis.analyse(con, run, resamples=200)
            assert a.cells
            for c in a.cells:
                assert c.bound is not None, c.bound_note
                assert c.bound.crypto_source == "measured" and c.bound.flights.source == "measured"
                rounds = 2 + {"handshake": 0, "page": 1, "requests": c.requests or 0}[c.mode]
                assert c.bound.round_trips == rounds
                assert c.pct[5][0] >= c.bound.total_ms * 0.98, (analysis.describe(c.row), c.pct[5], c.bound)
            assert len(a.paired) == len(a.cells) // 2  # each condition: X25519MLKEM768 against X25519
    finally:
        con.close()


@pytest.mark.root
@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_export_round_trip(real_runs, tmp_path, fmt):
    db, runs = real_runs
    r = run_pqbench("export", runs["hs"], "--db", db, "--format", fmt, "--out", tmp_path, "--json")
    assert r.returncode == 0, r.stderr
    files = json.loads(r.stdout)["files"]
    con = duckdb.connect(str(db), read_only=True)
    try:
        reader = "read_parquet" if fmt == "parquet" else "read_csv_auto"
        for f, table in zip(files, ("runs", "cells", "samples", "crypto")):
            n = con.execute(f"SELECT count(*) FROM {table} WHERE run_id = ?", [runs["hs"]]).fetchone()[0]
            assert f["rows"] == n
            assert con.execute(f"SELECT count(*) FROM {reader}('{f['path']}')").fetchone()[0] == n
        got = con.execute(f"SELECT sum(duration_ms) FROM {reader}('{files[2]['path']}')").fetchone()[0]
        want = con.execute("SELECT sum(duration_ms) FROM samples WHERE run_id = ?", [runs["hs"]]).fetchone()[0]
        assert got == pytest.approx(want)
    finally:
        con.close()


def test_report_adapts_to_named_scenarios_and_failures(tmp_path):
    """Generated data: scenario cells with failures give the scenario and failure figures, no loss curves."""
    con = store.connect(tmp_path / "r.duckdb")
    store.create_run(con, "gen", name="gen")
    for kex, base in (("X25519", 100.0), ("X25519MLKEM768", 104.0)):
        durations = [base + (i % 7) for i in range(60)] + [None] * 3
        save(con, "gen", kex, durations, rtt=44.0, loss=0.04)
    con.execute("UPDATE cells SET scenario = '5G-like'")
    result = report.build(con, "gen", tmp_path / "out", resamples=200)
    con.close()
    figures = set(result["figures"])
    assert {"scenarios", "failures", "wire", "cdf", "phases", "model"} <= figures
    assert "handshake-vs-loss" not in figures
    check_in_chromium(tmp_path / "out" / "report.html", figures)


def test_one_loss_rate_gives_points_not_curves(tmp_path):
    con = store.connect(tmp_path / "r.duckdb")
    store.create_run(con, "gen", name="gen")
    for kex, base in (("X25519", 40.0), ("X25519MLKEM768", 41.0)):
        save(con, "gen", kex, [base + (i % 5) * 0.2 for i in range(40)], rtt=20.0)
    result = report.build(con, "gen", tmp_path / "out", resamples=200)
    con.close()
    assert "handshake" in result["figures"] and "handshake-vs-loss" not in result["figures"]
    assert "failures" not in result["figures"]  # nothing failed


@pytest.mark.parametrize("args,field", [
    (["report", "--db", "{tmp}/missing.duckdb"], "--db"),
    (["report", "--db", "{tmp}/empty.duckdb"], "RUN"),
    (["report", "nope", "--db", "{tmp}/one.duckdb"], "RUN"),
    (["report", "--db", "{tmp}/one.duckdb", "--resamples", "5"], "--resamples"),
    (["report", "--db", "{tmp}/one.duckdb", "--out", "{tmp}/file"], "--out"),
    (["export", "--db", "{tmp}/one.duckdb", "--format", "xml"], "--format"),
    (["export", "nope", "--db", "{tmp}/one.duckdb"], "RUN"),
    (["export", "--db", "{tmp}/one.duckdb", "--out", "{tmp}/file"], "--out"),
])
def test_bad_input_exits_2_naming_the_field(tmp_path, args, field):
    store.connect(tmp_path / "empty.duckdb").close()
    con = store.connect(tmp_path / "one.duckdb")
    store.create_run(con, "only-run", name="only")
    con.close()
    (tmp_path / "file").write_text("x")
    r = run_pqbench(*[a.format(tmp=tmp_path) for a in args])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert field in r.stderr


def test_a_run_without_a_successful_sample_still_reports(tmp_path):
    con = store.connect(tmp_path / "r.duckdb")
    store.create_run(con, "bad", name="bad")
    save(con, "bad", "X25519", [None] * 5, status="failed")
    save(con, "bad", "mceliece348864", [], status="skipped", reason="no TLS code point")
    result = report.build(con, "bad", tmp_path / "out", resamples=100)
    con.close()
    assert result["figures"] == ["failures"] and result["cells"] == 1 and result["not_run"] == 1
    page = (tmp_path / "out" / "report.html").read_text()
    assert "none of 5 samples succeeded" in page and "no TLS code point" in page
    check_in_chromium(tmp_path / "out" / "report.html", {"failures"})


def test_an_interrupted_run_says_how_many_cells_are_left(tmp_path):
    con = store.connect(tmp_path / "r.duckdb")
    store.create_run(con, "cut", name="cut", cell_order=["X25519-10.0-0.0", "X25519MLKEM768-10.0-0.0", "c3", "c4", "c5"])
    store.update_run(con, "cut", status="interrupted")
    for kex in ("X25519", "X25519MLKEM768"):
        save(con, "cut", kex, [20.0 + i % 3 for i in range(30)])
    (row,) = [r for r in tables.summary(analysis.analyse(con, "cut", resamples=100)).rows if r[0] == "cells"]
    con.close()
    assert row[1].startswith("2 measured") and "3 not yet measured" in row[1] and "--resume" in row[1]


def test_a_run_on_two_nodes_names_them_and_splits_by_node(tmp_path):
    con = store.connect(tmp_path / "r.duckdb")
    store.create_run(con, "gen", name="gen")
    for k, (node, kex) in enumerate((("node-a", "X25519"), ("node-b", "X25519MLKEM768"))):
        store.join_node(con, "gen", f"seg{k}", node, {"openssl": {"version": "3.5.7"}, "git_commit": "abc"})
        save(con, "gen", kex, [40.0 + (i % 5) * 0.2 for i in range(40)], rtt=20.0)
        con.execute("UPDATE cells SET node = ? WHERE kex = ?", [node, kex])
        store.update_node(con, "gen", f"seg{k}", status="done", calibration_start={"p50_ms": 0.05})
    result = report.build(con, "gen", tmp_path / "out", resamples=200, by_node=True)
    con.close()
    page = (tmp_path / "out" / "summary.md").read_text()
    assert "Nodes: the machines that measured this run" in page
    assert "| node-a | done | 1 |" in page and "| node-b | done | 1 |" in page
    assert "RTT 20 ms, loss 0 % on node-a" in page  # the cells table says where each cell was measured
    assert set(result["nodes"]) == {"node-a", "node-b"}
    one = (tmp_path / "out" / "nodes" / "node-b" / "summary.md").read_text()
    assert "X25519MLKEM768" in one and "| X25519 |" not in one and "Nodes: the machines" not in one


def test_a_run_on_one_machine_has_no_nodes_section(tmp_path):
    con = store.connect(tmp_path / "r.duckdb")
    store.create_run(con, "gen", name="gen")
    store.join_node(con, "gen", "seg", "host", {})
    save(con, "gen", "X25519", [40.0] * 30, rtt=20.0)
    report.build(con, "gen", tmp_path / "out", resamples=200)
    con.close()
    assert "Nodes: the machines" not in (tmp_path / "out" / "summary.md").read_text()
