#!/usr/bin/env python3
"""A spec on a Dask cluster against the same spec run locally (root, after `make`, idle machine).

The same 16-cell spec (2 key exchanges x 2 chains x 2 RTTs x 0 and 1 % loss, fixed samples) runs
  - locally (`pqbench run`),
  - on a one-machine cluster with 1 worker, then with 2 workers (each in its own UTS namespace).
Printed: the wall times; the scheduling overhead per cell (cluster with 1 worker against local, both
measuring one cell at a time); the speed-up of 2 workers over 1 and the mean cell time on each (two workers
here share this machine's CPUs, which bounds the speed-up); the worker engine's idle CPU (from the store);
and the engine's own round trip for a task that does nothing, with the bytes a cell's result carries back,
which is the overhead that remains when the nodes are separate machines.

    build/venv/bin/python bench/bench_cluster.py [-n 50]
"""

import argparse
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pqbench import store  # noqa: E402
from pqbench.cluster.local import BIN, LocalCluster  # noqa: E402

SPEC = """
name = "bench-cluster"
seed = 7
parallel = 1
timeout = "10s"
warmup = 1
[samples]
min = {n}
max = {n}
ci = 0.5
[axes]
kex = ["X25519", "X25519MLKEM768"]
sig = ["ecdsap256", "mldsa44"]
rtt = ["5.6ms", "31.1ms"]
loss = ["0%", "1%"]
"""


def summary(db: Path, wall: float) -> dict:
    con = store.connect(db, read_only=True)
    run_id = store.resolve_run(con, "latest")
    cells = store.cell_rows(con, run_id)
    nodes = store.node_rows(con, run_id)
    raw = store.sample_raw(con, run_id, cells[0]["cell_id"])
    con.close()
    durations = [(c["finished"] - c["started"]).total_seconds() for c in cells if c["status"] == "done"]
    return {"wall": wall, "cells": len(durations), "cell_mean": statistics.mean(durations),
            "cell_sum": sum(durations), "nodes": sorted({c["node"] for c in cells}),
            "idle": [n["provenance"].get("engine_idle_cpu") for n in nodes], "sample_bytes": len(pickle.dumps(raw))}


def local(spec: Path, d: Path) -> dict:
    t0 = time.monotonic()
    subprocess.run([BIN / "pqbench", "run", str(spec), "--db", str(d / "local.duckdb"), "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    return summary(d / "local.duckdb", time.monotonic() - t0)


def clustered(spec: Path, d: Path, workers: int) -> tuple[dict, list[float]]:
    db = d / f"cluster{workers}.duckdb"
    with LocalCluster(d / f"logs{workers}") as cluster:
        for k in range(workers):
            cluster.worker(f"bench-node-{k}")
        cluster.wait_for(workers)
        t0 = time.monotonic()
        proc = cluster.run(spec, db, "--quiet")
        _, err = proc.communicate()
        wall = time.monotonic() - t0
        if proc.returncode:
            raise SystemExit(err)
        return summary(db, wall), round_trips(cluster.address) if workers == 1 else []


def noop() -> int:
    return 0


def round_trips(address: str, count: int = 50) -> list[float]:
    """The engine's own latency per task: submit, run nothing on the node, result back (ms)."""
    from distributed import Client
    with Client(address, set_as_default=False) as client:
        out = []
        for k in range(count):
            t0 = time.monotonic()
            client.submit(noop, key=f"noop-{k}", pure=False, resources={"pqbench_node": 1}).result()
            out.append((time.monotonic() - t0) * 1000)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=50, help="samples per cell")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        spec = d / "bench-cluster.toml"
        spec.write_text(SPEC.format(n=args.n))
        here = local(spec, d)
        one, rtts = clustered(spec, d, 1)
        two, _ = clustered(spec, d, 2)
    cells = here["cells"]
    print(f"{cells} cells x {args.n} samples, wall time: local {here['wall']:.1f} s, cluster 1 worker "
          f"{one['wall']:.1f} s, 2 workers {two['wall']:.1f} s")
    print(f"scheduling overhead per cell, cluster (1 worker) vs local: {(one['wall'] - here['wall']) / cells * 1000:+.0f} ms "
          f"(wall {one['wall'] / here['wall']:.3f}x)")
    print(f"speed-up 2 workers vs 1: x{one['wall'] / two['wall']:.2f}; mean cell {one['cell_mean']:.2f} s on 1 worker, "
          f"{two['cell_mean']:.2f} s on 2 (x{two['cell_mean'] / one['cell_mean']:.2f}: both share this machine's CPUs); "
          f"nodes used {two['nodes']}")
    idle = [v for v in one["idle"] + two["idle"] if v is not None]
    print(f"worker engine idle CPU: {', '.join(f'{v:.1%}' for v in idle)} of one CPU")
    print(f"engine round trip of an empty task: median {statistics.median(rtts):.1f} ms, p95 "
          f"{sorted(rtts)[int(0.95 * len(rtts))]:.1f} ms; a cell's samples carry {one['sample_bytes'] / 1024:.0f} kB back")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
