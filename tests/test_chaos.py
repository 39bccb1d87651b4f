"""Faults in the middle of a run lose nothing (issue 37, item 3): a server killed mid-cell, the emulator killed,
a client worker killed, the disk full while the store is written, the store held by another writer, a second
run started on the same store, a cluster worker killed. Each becomes a recorded failure with its class or a
clear error (exit code and a message naming the problem and the fix), the run goes on where it can or stops
cleanly, `--resume` completes it, and every cell's samples are stored once: counted per cell before and after.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT
from pqbench import store
from pqbench.testbed import registry
from test_lifeline import descendants, guardian_log, why_alive

pytestmark = pytest.mark.root
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
SAMPLES = 150  # ~1 s per cell at 5-7 ms with two workers: long enough to be hit in the middle
SPEC = f"""
name = "chaos"
seed = 11
lanes = 1
parallel = 2
samples = {SAMPLES}
warmup = 0
workers = 2
timeout = "2s"
calibration_samples = 10
[axes]
kex = ["X25519"]
sig = ["ecdsap256"]
rtt = ["5ms", "6ms", "7ms"]
"""
CELLS = 3


def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "chaos.toml"
    path.write_text(SPEC)
    return path


def start(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pqbench", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=ENV, **kw)


def pqbench(*args, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pqbench", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def named(pid: int, name: str) -> list[int]:
    """The processes of pid's tree whose program is name (its comm)."""
    out = []
    for r in descendants(pid):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{r['pid']}/comm").read_text().strip() == name:
                out.append(r["pid"])
    return out


def when_measuring(proc: subprocess.Popen, timeout: float = 90) -> list[int]:
    """Waits until the run's first cell is being measured (its timing clients are up, past the warm-up);
    returns their pids."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        clients = [p for p in named(proc.pid, "pqtimer") if "/lane-" in _cmdline(p)]
        if len(clients) >= 2:
            return clients
        time.sleep(0.05)
    raise AssertionError(f"no cell was measured: {proc.poll()} {_rest(proc)}")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _rest(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        return ""
    out, err = proc.communicate()
    return f"\n--- stdout\n{out[-2000:]}\n--- stderr\n{err[-4000:]}"


def cells(db: Path) -> dict[str, dict]:
    """cell_id -> its status, failure classes and samples: count, distinct seq, the n it records, and a digest
    of its raw samples (a cell stored again would change it)."""
    con = store.connect(db, read_only=True)
    try:
        rows = con.execute("SELECT cell_id, status, n, failure_classes FROM cells").fetchall()
        out = {}
        for cell_id, status, n, classes in rows:
            raw = [r[0] for r in con.execute("SELECT raw FROM samples WHERE cell_id = ? ORDER BY seq",
                                             [cell_id]).fetchall()]
            seqs = con.execute("SELECT count(DISTINCT seq) FROM samples WHERE cell_id = ?", [cell_id]).fetchone()[0]
            out[cell_id] = {"status": status, "n": n, "samples": len(raw), "seqs": seqs, "classes": classes,
                            "digest": hashlib.sha256("\n".join(raw).encode()).hexdigest()}
        return out
    finally:
        con.close()


def run_status(db: Path) -> dict[str, str]:
    con = store.connect(db, read_only=True)
    try:
        return dict(con.execute("SELECT run_id, status FROM runs").fetchall())
    finally:
        con.close()


def check_whole(found: dict) -> None:
    """Every stored cell holds each of its samples once, as many as it says it measured."""
    for cell_id, c in found.items():
        assert c["samples"] == c["seqs"] == c["n"], f"{cell_id}: {c}"


def resume_completes(spec: Path, db: Path, before: dict, *extra) -> dict:
    """--resume finishes the run; the cells done before it are untouched, every cell is done and whole."""
    r = pqbench("run", spec, "--db", db, "--resume", *extra)
    assert r.returncode == 0, r.stderr[-4000:]
    after = cells(db)
    assert len(after) == CELLS and {c["status"] for c in after.values()} == {"done"}, after
    check_whole(after)
    for cell_id, c in before.items():
        if c["status"] == "done":
            assert after[cell_id] == c, f"{cell_id} changed on --resume: {c} -> {after[cell_id]}"
    assert set(run_status(db).values()) == {"done"}
    return after



def kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_a_server_killed_mid_cell_fails_that_cell_and_the_next_cells_meet_a_new_one(built_stack, tmp_path):
    """nginx (master and workers) killed while a cell's clients connect to it: that cell keeps its samples
    (the refused ones as failures with their class) and is failed with the reason, so --resume measures it
    again; the lane starts the server again for the cells after it."""
    spec, db = spec_file(tmp_path), tmp_path / "r.duckdb"
    proc = start("run", spec, "--db", db)
    clients = when_measuring(proc)
    # the cell's clients held while the server is found and killed, so that it dies mid-cell: a fresh clone's run
    # found it after the cell's 150 samples had ended (all three cells done, none failed, nothing to report)
    for pid in clients:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    try:
        nginx = named(proc.pid, "nginx")
        assert len(nginx) == 3, nginx  # the master and its two workers
        # its whole process group at once: killed one by one, workers first, the master forks new ones before it
        # dies, and those orphans go on serving
        (master,) = [p for p in nginx if "master process" in _cmdline(p)]
        os.killpg(os.getpgid(master), signal.SIGKILL)
    finally:
        for pid in clients:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "the openssl server died during the cell" in err, err
    before = cells(db)
    check_whole(before)
    failed = [c for c in before.values() if c["status"] == "failed"]
    assert len(before) == CELLS and len(failed) == 1, before
    assert set(json.loads(failed[0]["classes"])) <= {"connect_refused", "closed", "reset", "timeout"}, failed
    assert all(c["status"] == "done" and c["classes"] == "{}" for c in before.values() if c not in failed), before
    resume_completes(spec, db, before)


def test_the_emulator_killed_stops_the_run_with_the_reason_and_resume_completes_it(built_stack, tmp_path):
    """pqlink killed mid-cell: the lane's link is gone, so the run stops, naming the emulator's death and the
    command that continues; the cell in progress is not stored, those finished are. Before the resume, another
    process holds the store: `run --resume` names it and waits for nothing (exit 2), and changes nothing."""
    spec, db = spec_file(tmp_path), tmp_path / "r.duckdb"
    proc = start("run", spec, "--db", db)
    when_measuring(proc)
    kill(named(proc.pid, "pqlink"))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert re.search(r"error: the emulator of testbed pqb-\w+ died \(pqlink", err), err
    assert f"continue the run with: pqbench run {spec} --db {db} --resume" in err, err
    before = cells(db)
    check_whole(before)
    assert all(c["status"] == "done" for c in before.values()) and len(before) < CELLS, before
    assert set(run_status(db).values()) == {"interrupted"}
    holder = subprocess.Popen([sys.executable, "-c", "import sys, duckdb; c = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); sys.stdin.read()", str(db)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        r = pqbench("run", spec, "--db", db, "--resume")
        assert r.returncode == 2, r.stderr
        assert f"is open in another process (PID {holder.pid}: " in r.stderr, r.stderr
        assert "wait for that process to end, or give another --db" in r.stderr, r.stderr
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert cells(db) == before
    resume_completes(spec, db, before)


def test_a_client_killed_is_its_lost_sample_and_a_second_run_on_the_store_is_refused(built_stack, tmp_path):
    """One of a cell's two pqtimer workers killed: the sample it was timing is a client_lost failure, the
    other worker takes the rest, the run goes on. A second run started on the same store meanwhile is
    refused at once, naming the run that holds it; the first is not disturbed."""
    spec, db = spec_file(tmp_path), tmp_path / "r.duckdb"
    proc = start("run", spec, "--db", db)
    clients = when_measuring(proc)
    kill(clients[:1])
    second = pqbench("run", spec, "--db", db, timeout=60)
    assert second.returncode == 2, second.stderr
    assert f"is open in another process (PID {proc.pid}: " in second.stderr and " run " in second.stderr, \
        second.stderr
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    before = cells(db)
    check_whole(before)
    assert len(before) == CELLS and {c["status"] for c in before.values()} == {"done"}, before
    lost = [json.loads(c["classes"]) for c in before.values() if c["classes"] != "{}"]
    assert lost in ([], [{"client_lost": 1}]), before  # none if it died between two samples
    assert len(run_status(db)) == 1  # the second run made nothing
    resume_completes(spec, db, before)  # nothing left to do: every cell stays as it is


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MB tmpfs for the store, unmounted after the test."""
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Writes a file until the disk is full; returns it."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 65536)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 512)
    finally:
        os.close(fd)
    return filler


def test_the_disk_full_while_saving_stops_the_run_and_resume_completes_it(built_stack, tmp_path, small_disk):
    """The store's disk fills up after the first cell was stored: the next save fails whole (rolled back),
    the run stops naming the disk and the command that continues (exit 3), and once there is room again
    --resume completes it with the first cell as it was."""
    spec, db = spec_file(tmp_path), small_disk / "r.duckdb"
    proc = start("run", spec, "--db", db)
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if "1/3" in line:
            break
    filler = fill(small_disk)
    out, err = proc.communicate(timeout=120)
    err = "".join(lines) + err
    assert proc.returncode == 3, err
    assert f"cannot write to the store {db}" in err and "No space left on device" in err, err
    assert f"continue the run with: pqbench run {spec} --db {db} --resume" in err, err
    assert "Traceback" not in err, err
    filler.unlink()
    before = cells(db)
    check_whole(before)
    assert len(before) == 1 and {c["status"] for c in before.values()} == {"done"}, before
    resume_completes(spec, db, before)


def communicate_or_stacks(proc: subprocess.Popen, cluster, timeout: float) -> tuple[str, str]:
    """proc's output once it ends; if it is still running after timeout, a failure with where the driver's and the
    surviving nodes' threads wait (pqbench prints its stacks on SIGUSR1) and the cluster's logs."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for p in [proc, *cluster.workers.values()]:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGUSR1)
        time.sleep(2)
        proc.kill()
        out, err = proc.communicate()
        logs = "\n".join(f"--- {f.name}\n{f.read_text()[-6000:]}" for f in sorted(cluster.logs.glob("*.log")))
        pytest.fail(f"the driver still ran {timeout} s on\n--- driver's stderr\n{err[-8000:]}\n{logs}")


def test_a_cluster_worker_killed_mid_cell_loses_nothing(built_stack, cluster, tmp_path):
    """A node's worker killed (SIGKILL) while it measures a cell: the engine measures that cell again on the
    other node, the driver stores it once, the dead node's segment is marked lost and nothing of it is left."""
    cluster.worker("node-a")
    victim = cluster.worker("node-b")
    cluster.wait_for(2)
    spec, db = spec_file(tmp_path), tmp_path / "r.duckdb"
    proc = cluster.run(spec, db)
    deadline = time.monotonic() + 90
    while not [p for p in named(victim.pid, "pqtimer") if "/lane-" in _cmdline(p)]:
        assert time.monotonic() < deadline and proc.poll() is None, f"node-b measured no cell {_rest(proc)}"
        time.sleep(0.05)
    things = [r for r in descendants(victim.pid)]
    victim.send_signal(signal.SIGKILL)
    out, err = communicate_or_stacks(proc, cluster, timeout=180)
    assert proc.returncode == 0, err
    assert "node node-b left during the run" in err, err
    found = cells(db)
    check_whole(found)
    assert len(found) == CELLS and {c["status"] for c in found.values()} == {"done"}, found
    con = store.connect(db, read_only=True)
    try:
        statuses = {r["node"]: r["status"] for r in store.node_rows(con, out.strip())}
    finally:
        con.close()
    assert statuses == {"node-a": "done", "node-b": "lost"}, statuses
    deadline = time.monotonic() + 10  # its guardian ends what the dead worker started
    while any(registry.is_alive(r) for r in things) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [r for r in things if registry.is_alive(r)]
    assert not left, [why_alive(r["pid"]) for r in left] + guardian_log(victim.pid)
    resume_completes(spec, db, found)  # nothing left to measure
