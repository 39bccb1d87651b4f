"""`pqbench run` end to end on a real testbed: store contents, crash and resume, Ctrl-C."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pqbench import paths, store
from pqbench.experiment import cells as cellmod
from pqbench.measure import runner
from pqbench.experiment import spec as specmod

pytestmark = pytest.mark.root
ROOT = Path(__file__).resolve().parents[1]

SPEC = """
name = "tiny"
seed = 3
parallel = 2
samples = 8
warmup = 0
calibration_samples = 20
[axes]
kex = ["X25519", "X25519MLKEM768"]
sig = ["ecdsap256"]
rtt = ["2ms"]
loss = ["0%", "2%", "5%"]
"""


def start_run(spec_path, db, *extra):
    return subprocess.Popen([sys.executable, "-m", "pqbench", "run", str(spec_path), "--db", str(db), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "src")})


def ended_within(proc, seconds):
    """Waits for the run to end; if it does not, fails with where each of its threads waited (the CLI
    prints their stacks on SIGUSR1)."""
    try:
        return proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(3)
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the run had not ended {seconds} s after Ctrl-C; its threads:\n{err[-6000:]}")


def wait_for_cells(proc, count, timeout=120):
    """Reads progress lines until `count` cells are reported done."""
    deadline = time.monotonic() + timeout
    seen = 0
    while seen < count and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        if "elapsed, ETA" in line:
            seen += 1
    return seen


def run_segments(db) -> list[dict]:
    """Each start of the run: its git commit and its testbeds (lanes)."""
    con = store.connect(db, read_only=True)
    try:
        return json.loads(con.execute("SELECT provenance FROM runs").fetchone()[0])["segments"]
    finally:
        con.close()


def run_id(db) -> str:
    con = store.connect(db, read_only=True)
    try:
        return con.execute("SELECT run_id FROM runs").fetchone()[0]
    finally:
        con.close()


def run_testbeds(db) -> list[str]:
    """The names of the testbeds (lanes) of the run's latest start."""
    return run_segments(db)[-1]["testbeds"]


def leftovers(names: list[str], db=None):
    """Namespaces and live processes of the run's testbeds still there (other runs on the machine aside: its
    emulators name its testbeds, its servers and clients its run folder). A zombie is not one: it is dead,
    holds nothing, and waits only for PID 1 (here a slow reaper) to collect it after its killed parent."""
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    mine = names + ([str(paths.BUILD / "runs" / run_id(db))] if db else [])
    procs = subprocess.run(["pgrep", "-f", "|".join(mine)], capture_output=True, text=True).stdout
    return [line.split()[0] for line in ns.splitlines() if line.startswith(tuple(names))], \
        [pid for pid in procs.split() if not _zombie(pid)]


def _zombie(pid: str) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True  # gone meanwhile


def db_state(db):
    con = store.connect(db, read_only=True)
    try:
        cells = con.execute("SELECT cell_id, status FROM cells").fetchall()
        per_cell = dict(con.execute("SELECT cell_id, count(*) FROM samples GROUP BY cell_id").fetchall())
        runs = con.execute("SELECT run_id, status FROM runs").fetchall()
    finally:
        con.close()
    return cells, per_cell, runs


def test_killed_run_resumes_without_duplicates_or_gaps(built_stack, tmp_path):
    spec_path = tmp_path / "tiny.toml"
    spec_path.write_text(SPEC)
    expected = {c.cell_id for c in cellmod.expand(specmod.read(spec_path))}
    db = tmp_path / "r.duckdb"
    proc = start_run(spec_path, db)
    assert wait_for_cells(proc, 2) == 2
    proc.kill()  # a crash: no cleanup of its own
    proc.wait()
    subprocess.run([sys.executable, "-m", "pqbench", "net", "clean"], env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                   capture_output=True, timeout=60)
    first = run_testbeds(db)
    assert len(first) == 4  # default lanes
    assert leftovers(first, db) == ([], [])
    cells, per_cell, runs = db_state(db)
    assert 2 <= len(cells) < len(expected)
    assert all(per_cell[c] == 8 for c, _ in cells)

    resumed = start_run(spec_path, db, "--resume")
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err
    cells, per_cell, runs = db_state(db)
    assert len(runs) == 1 and runs[0][1] == "done"
    assert sorted(c for c, _ in cells) == sorted(expected)  # none missing, none twice (primary key)
    assert all(status == "done" for _, status in cells)
    assert per_cell == {c: 8 for c in expected}
    segments = run_segments(db)
    assert len(segments) == 2 and segments[0]["testbeds"] == first  # the resume is a second segment


def test_ctrl_c_keeps_finished_cells_and_cleans_up(built_stack, tmp_path):
    spec_path = tmp_path / "tiny.toml"
    spec_path.write_text(SPEC)
    db = tmp_path / "c.duckdb"
    proc = start_run(spec_path, db)
    assert wait_for_cells(proc, 1) == 1
    proc.send_signal(signal.SIGINT)
    ended_within(proc, 120)
    assert proc.returncode != 0
    assert leftovers(run_testbeds(db), db) == ([], [])  # the run tore every testbed down itself
    cells, per_cell, runs = db_state(db)
    assert runs[0][1] == "interrupted"
    assert cells and all(per_cell[c] == 8 for c, _ in cells)


def test_store_round_trip_and_export(built_stack, tmp_path):
    spec_path = tmp_path / "tiny.toml"
    spec_path.write_text(SPEC.replace('loss = ["0%", "2%", "5%"]', 'loss = ["0%"]'))
    db = tmp_path / "s.duckdb"
    proc = start_run(spec_path, db, "--quiet")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    run_id = out.strip()
    con = store.connect(db, read_only=True)
    rows = con.execute("SELECT c.kex, s.\"group\", s.sigalg, s.ok, s.duration_ms, s.handshake_done_ms, "
                       "s.client_hello_bytes, s.raw FROM samples s JOIN cells c USING (run_id, cell_id)").fetchall()
    assert len(rows) == 16
    for kex, group, sigalg, ok, duration, hs, ch, raw in rows:
        assert ok and group.lower() == kex.lower() and sigalg == "ecdsa_secp256r1_sha256"
        assert duration == hs and 4 <= duration < 100  # 2 ms RTT: two round trips plus compute
        assert ch > 0 and json.loads(raw)["ok"] is True
    prov = con.execute("SELECT provenance, calibration_start FROM runs").fetchone()
    assert '"openssl"' in prov[0] and '"backend"' in prov[0] and '"p50_ms"' in prov[1]
    # the floor from a process at each priority a client can run at, with what each lets a client's clock claim
    floor = json.loads(prov[1])
    assert floor["normal"]["n"] == floor["n"] and floor["normal"]["p50_ms"] > 0
    assert floor["agreement_allowance_ms"] >= 0.25 and floor["normal"]["agreement_allowance_ms"] >= 0.25
    # every algorithm microbenchmarked in rounds at the start and at the end
    assert con.execute("SELECT count(DISTINCT name), count(DISTINCT round), count(*) FILTER (WHERE op = 'keygen') "
                       "FROM crypto").fetchone() == (3, 2 * runner.CRYPTO_ROUNDS, 3 * 2 * runner.CRYPTO_ROUNDS)
    policies = [json.loads(c) for (c,) in con.execute("SELECT concurrency FROM cells").fetchall()]
    assert [{k: v for k, v in c.items() if k != "lane"} for c in policies] == [{"policy": "fixed", "workers": 2}] * 2
    assert {c["lane"] for c in policies} <= {0, 1}
    assert len(json.loads(prov[0])["segments"][-1]["testbeds"]) == 2  # one testbed per cell here
    written = store.export(con, run_id, tmp_path / "export", "csv")
    con.close()
    samples_csv = next(p for p in written if p.name.endswith("samples.csv"))
    assert len(samples_csv.read_text().splitlines()) == 17  # header + 16 samples
    nodes_csv = next(p for p in written if p.name.endswith("nodes.csv"))
    assert len(nodes_csv.read_text().splitlines()) == 2  # header + this machine: a local run is one node


LOSSY = """
name = "lossy"
seed = 5
parallel = "auto"
samples = {n}
lanes = 2
warmup = 0
calibration_samples = 20
[axes]
kex = {kex}
sig = ["ecdsap256"]
rtt = ["30ms"]
loss = ["5%"]  # lossy enough to spare and to touch samples; SYN losses cost 1 s each
"""


def detectors(db) -> dict:
    con = store.connect(db, read_only=True)
    try:
        return {r["kex"]: (json.loads(r["detector"]), json.loads(r["wire"])) for r in
                store.cell_rows(con, store.resolve_run(con, "latest"))}
    finally:
        con.close()


def test_a_lossy_run_stores_each_cells_late_count_and_its_wire_comparison(built_stack, tmp_path):
    """Two lossy cells on two lanes: each stores its detector (how many samples no retransmission touched, how
    many of those came late) and its client-vs-wire comparison."""
    db = tmp_path / "lossy.duckdb"
    runner.run(specmod.parse(LOSSY.format(n=100, kex='["X25519", "secp256r1"]'), "lossy.toml"), db, quiet=True)
    quiet = detectors(db)
    assert set(quiet) == {"X25519", "secp256r1"}
    for det, wire in quiet.values():
        assert det["wire"] and det["untouched"] >= 20 and det["late"] is not None  # loss spared some
        assert wire["n"] >= 66  # the emulator's record joined most samples


@pytest.mark.solo  # its CPU hog would slow the suite's other tests
def test_a_cpu_hog_raises_a_lossy_cells_late_count_and_the_report_tells_it(built_stack, tmp_path, monkeypatch):
    """One lossy cell under a synthetic CPU hog (busy loops on every CPU): its late count and the report's
    warning appear. The hog must be able to delay the measured processes: at real-time priority no normal busy
    loop can, so this runs them at their fallback (nice and slice)."""
    from pqbench import analysis
    from pqbench.measure import concurrency, late
    from pqbench.testbed import sched
    monkeypatch.setattr(sched, "MEASURED_FIFO", 0)
    hog = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2 * concurrency.CPUS)]
    try:
        db2 = tmp_path / "hog.duckdb"
        runner.run(specmod.parse(LOSSY.format(n=90, kex='["X25519"]'), "lossy.toml"), db2, quiet=True)
    finally:
        for p in hog:
            p.kill()
            p.wait()
    det, _ = detectors(db2)["X25519"]
    assert det["late"] > late.LATE_SHARE * det["untouched"], det
    con = store.connect(db2, read_only=True)
    pairs = analysis.analyse(con, store.resolve_run(con, "latest"), resamples=50).cell_warnings()
    con.close()
    # The report tells it with the side that held the samples up: a warning when dropping them moves
    # p50 or p95 beyond its CI, a note when neither moves (whichever this run's hog made it).
    told = [(c, w) for c, w in pairs if w.check in ("late", "late_note")]
    assert len(told) == 1, pairs
    cell, w = told[0]
    assert any(side in w.message for side in ("the client's", "the server's", "the link's", "not attributed")), w
    moved = any(not cell.pct[q][1] - 1e-9 <= det[f"p{q}_without_late_ms"] <= cell.pct[q][2] + 1e-9 for q in (50, 95))
    assert (w.check, w.note) == (("late", False) if moved else ("late_note", True)), (w, det)
