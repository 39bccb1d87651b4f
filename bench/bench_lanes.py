#!/usr/bin/env python3
"""Overlapping cells on several testbeds (`lanes`): wall time and bias (root, after `make`, idle machine).

The same lossy spec (2 key exchanges x 30.9 ms x 10, 15, 20 % loss, same seed) is run with lanes = 1
and lanes = 4. Printed: each run's wall time and their ratio, and per cell the shift of p25, p50 and
p95 from lanes 1 to lanes 4 with 95 % bootstrap CIs: cells overlap only in their tails, so no shift
should exclude 0 by more than noise.

    build/venv/bin/python bench/bench_lanes.py [-n 300]
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pqbench import stats, store  # noqa: E402
from pqbench.experiment import spec as specmod
from pqbench.measure import runner  # noqa: E402

SPEC = """
name = "bench-lanes"
seed = 11
parallel = "auto"
timeout = "60s"
samples = {n}
lanes = {lanes}
[axes]
kex = ["X25519", "MLKEM512"]
sig = ["ecdsap256"]
rtt = ["30.916ms"]
loss = ["10%", "15%", "20%"]
"""


def run(n: int, lanes: int, d: Path) -> tuple[float, dict]:
    db = d / f"lanes{lanes}.duckdb"
    t0 = time.monotonic()
    run_id = runner.run(specmod.parse(SPEC.format(n=n, lanes=lanes), "bench-lanes.toml"), db, quiet=True)
    wall = time.monotonic() - t0
    con = store.connect(db, read_only=True)
    rows = con.execute("SELECT c.kex, c.loss, s.duration_ms FROM samples s JOIN cells c USING (run_id, cell_id) "
                       "WHERE run_id = ? AND s.ok", [run_id]).fetchall()
    con.close()
    cells: dict = {}
    for kex, loss, ms in rows:
        cells.setdefault((kex, loss), []).append(ms)
    return wall, cells


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=300, help="samples per cell")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        one_wall, one = run(args.n, 1, Path(d))
        four_wall, four = run(args.n, 4, Path(d))
    print(f"6 cells x {args.n} samples: lanes 1 {one_wall:.0f} s, lanes 4 {four_wall:.0f} s "
          f"(x{one_wall / four_wall:.2f} faster)")
    for key in sorted(one):
        shifts = []
        for q in (25, 50, 95):
            diff, lo, hi = stats.bootstrap_diff(one[key], four[key], q)
            shifts.append(f"p{q} {stats.percentile(sorted(one[key]), q):7.1f} -> {diff:+6.1f} [{lo:+.1f}, {hi:+.1f}]")
        print(f"{key[0]:>9} {key[1] * 100:4.0f} %: " + "; ".join(shifts) + " ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
