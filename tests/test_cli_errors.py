"""What a first-time user meets instead of a traceback (issue 30, item 3)."""

import os
import subprocess
import sys

import duckdb
import pytest

from conftest import ROOT, run_pqbench
from pqbench import store
from pqbench.errors import BadInput


@pytest.mark.parametrize("command", ["report", "export"])
def test_a_duckdb_file_without_pqbench_tables_is_bad_input(tmp_path, command):
    foreign = tmp_path / "other.duckdb"
    con = duckdb.connect(str(foreign))
    con.execute("CREATE TABLE things (x INTEGER)")
    con.close()
    r = run_pqbench(command, "latest", "--db", foreign, "--out", tmp_path / "out")
    assert r.returncode == 2, r.stderr
    assert "without pqbench's tables" in r.stderr and str(foreign) in r.stderr
    assert "Traceback" not in r.stderr


def test_a_file_that_is_not_duckdb_is_bad_input(tmp_path):
    junk = tmp_path / "notes.duckdb"
    junk.write_text("not a database\n" * 100)
    r = run_pqbench("report", "latest", "--db", junk)
    assert r.returncode == 2 and "cannot be opened as a DuckDB store" in r.stderr and "Traceback" not in r.stderr


def test_output_piped_into_head_ends_quietly():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run(["bash", "-c", f"{sys.executable} -m pqbench algorithms | head -1; exit ${{PIPESTATUS[0]}}"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 1 and r.stderr == ""


def test_a_run_named_exactly_is_found_by_its_name(tmp_path):
    con = store.connect(tmp_path / "r.duckdb")
    for run_id, name in (("tiny-20261125-010000", "tiny"), ("tiny1-20261125-020000", "tiny1"),
                         ("tiny-20261125-030000", "tiny")):
        store.create_run(con, run_id, name=name)
    assert store.resolve_run(con, "tiny") == "tiny-20261125-030000"  # the newest run of that name
    assert store.resolve_run(con, "tiny1") == "tiny1-20261125-020000"
    assert store.resolve_run(con, "tiny-20261125-01") == "tiny-20261125-010000"  # a unique prefix
    with pytest.raises(BadInput):
        store.resolve_run(con, "tin")  # a prefix of three runs
    con.close()


def test_the_text_summary_names_the_server_and_client_stacks():
    from pqbench.analysis import single
    cell, options = single.one_cell("X25519", "ecdsap256", server="rustls", client="gotls")
    result = single.summarise(cell, options, [{"ok": True, "i": i, "t_ns": {"handshake_done": (20 + i) * 10**6}}
                                    for i in range(20)])
    result["config"]["backend"], result["run_dir"] = "pqlink", None
    first = single.format_summary(result).splitlines()[0]
    assert first.startswith("X25519 + ecdsap256, server rustls, client gotls, over pqlink: 20 samples")
    assert result["config"]["server"] == "rustls" and result["config"]["client"] == "gotls"


def test_help_shows_percent_signs_as_percent():
    r = run_pqbench("handshake", "--help")
    assert r.returncode == 0 and "% or fraction" in r.stdout and "%%" not in r.stdout


def test_the_algorithms_table_lines_up():
    r = run_pqbench("algorithms")
    lines = [l for l in r.stdout.splitlines() if l and not l.startswith("-")][:-1]
    header = lines[0]
    for col in ("kind", "family", "source"):
        at = header.index(col)
        assert all(l[at - 2:at] == "  " for l in lines[1:]), col  # every row has the column's gap there


def test_plural_words_in_the_report_line():
    from pqbench.commands.report import plural
    assert plural(1, "warning") == "1 warning" and plural(2, "warning") == "2 warnings"


def test_a_fixed_sample_count_is_not_told_to_raise_samples_max():
    import numpy as np
    from pqbench.analysis import cells, warnings
    from pqbench.analysis.data import cell_data
    durations = np.random.default_rng(3).lognormal(3, 0.6, 30)
    samples = [{"ok": True, "t_ns": {"handshake_done": int(d * 1e6)}} for d in durations]
    for reason, fix in (("fixed count", "raise samples (a fixed count"), ("reached samples.max", "raise samples.max")):
        row = {"kex": "X25519", "sig": "ecdsap256", "loss": 0.01, "mode": "handshake", "stop_reason": reason}
        c = cells.analyse_cell(cell_data(row, samples, "handshake_done"), {}, resamples=200)
        wide = [w for w in warnings.cell_warnings(c) if w.check == "wide_ci"]
        assert wide and wide[0].fix.startswith(fix), (reason, wide)


def test_the_command_ends_once_its_work_is_done_whatever_a_library_object_does_at_exit(tmp_path):
    """An object whose finalizer never returns (as one of a library's did at an interrupted cluster driver's exit:
    10 s and more in the interpreter's garbage collection) does not keep the command from ending with its code;
    a non-daemon thread of pqbench's own is still waited for, and the atexit handlers still run."""
    code = ("import atexit, sys, threading, time\n"
            "class Stuck:\n"
            "    def __del__(self):\n"
            "        time.sleep(600)\n"
            "stuck = Stuck()\n"
            "holder = [stuck, None]\n"
            "holder[1] = holder  # a cycle: only the interpreter's last collection reaches it\n"
            "del stuck\n"
            "threading.Thread(target=lambda: (time.sleep(0.5), print('thread done', flush=True))).start()\n"
            "atexit.register(lambda: print('atexit ran', flush=True))\n"
            "from pqbench.cli import run\n"
            "run(['algorithms', '--kind', 'nothing'])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert r.returncode == 2 and "--kind" in r.stderr, r.stderr
    assert r.stdout.splitlines() == ["thread done", "atexit ran"], r.stdout
