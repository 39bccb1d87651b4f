"""Ctrl-C leaves the user with next steps, and a run leaves its folder only when asked (issue 30,
items 4 and 5). Real runs through the real CLI (root)."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import duckdb
import pytest

from conftest import ROOT, run_pqbench

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, TUN devices)")]

SPEC = """name = "{name}"
samples = 400
warmup = 0
calibration_samples = 10
[axes]
kex = ["X25519", "X25519MLKEM768"]
sig = ["ecdsap256"]
rtt = ["31.1ms"]
"""


def start(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pqbench", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})


def interrupt_when(proc: subprocess.Popen, needle: str, timeout: float = 240) -> tuple[str, str]:
    """Reads the progress lines until one holds needle, then sends SIGINT as Ctrl-C does; returns
    (stdout, stderr)."""
    seen, deadline = [], time.monotonic() + timeout
    for line in proc.stderr:
        seen.append(line)
        if needle in line:
            proc.send_signal(signal.SIGINT)
            break
        assert time.monotonic() < deadline, "".join(seen)
    out, rest = proc.communicate(timeout=120)
    return out, "".join(seen) + rest


def run_status(db, run_id: str) -> str:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT status FROM runs WHERE run_id = ?", [run_id]).fetchone()[0]
    finally:
        con.close()


@pytest.mark.parametrize("when", ["emulator floor", "cells, 0 already done"])
def test_ctrl_c_during_a_run_prints_the_resume_command_and_marks_the_run_interrupted(tmp_path, when):
    """Once cells are measuring, and during the start-up (crypto rounds, certificates, testbeds)."""
    spec = tmp_path / "interrupted.toml"
    spec.write_text(SPEC.format(name="interrupted"))
    db = tmp_path / "r.duckdb"
    proc = start("run", spec, "--db", db)
    _, err = interrupt_when(proc, when)
    assert proc.returncode == 130, err
    run_id = re.search(r"run (interrupted-\S+): ", err).group(1)
    assert f"pqbench run {spec} --db {db} --resume {run_id}" in err, err
    assert run_status(db, run_id) == "interrupted"


def test_ctrl_c_during_a_handshake_summarises_the_samples_so_far(tmp_path):
    proc = start("handshake", "--kex", "X25519", "--sig", "ecdsap256", "--rtt", "31.1ms", "-n", "2000")
    out, err = interrupt_when(proc, "measuring 2000")
    assert proc.returncode == 130, err
    first, *rest = out.splitlines()
    n = int(first.split()[2])
    assert first == f"interrupted: the {n} samples finished so far" and n < 2000, out
    folder = next(line.split()[2] for line in rest if "raw samples:" in line)
    assert sum(1 for f in ROOT.joinpath(folder).glob("*.jsonl") for _ in f.read_text().splitlines()) >= n


def test_a_handshake_writes_no_big_page_and_keeps_its_folder_only_when_asked(tmp_path):
    runs = ROOT / "build" / "runs"
    before = set(runs.iterdir()) if runs.exists() else set()
    r = run_pqbench("handshake", "--kex", "X25519", "--sig", "ecdsap256", "-n", "5", "--json", "--keep")
    assert r.returncode == 0, r.stderr
    kept = json.loads(r.stdout)["run_dir"]
    pages = sorted(p.name for p in (ROOT / kept).rglob("www/*"))
    assert pages == ["1k"], pages  # no 1000 kB page without --page
    second = subprocess.Popen([sys.executable, "-m", "pqbench", "handshake", "--kex", "X25519", "--sig", "ecdsap256",
                               "-n", "5", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    out, err = second.communicate(timeout=600)
    assert second.returncode == 0 and json.loads(out)["run_dir"] is None, err
    # a run folder is named after its process (not other tests' runs): the second, without --keep and without
    # failures, left nothing
    assert not [p for p in runs.iterdir() if p.name.startswith("handshake-") and p.name.endswith(f"-{second.pid}")]
    assert (ROOT / kept).is_dir() and (ROOT / kept) not in before
