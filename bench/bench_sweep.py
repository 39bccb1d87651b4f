#!/usr/bin/env python3
"""Sweep throughput and the bias of concurrency (run as root after `make`, on an idle machine):

1. samples/s of `pqbench run experiments/quick.toml` (wall time of the whole run, store included);
2. two cells, X25519MLKEM768 + ECDSA P-256, same loss seed in every run of a cell:
   - hard: RTT 195.7 ms, 10 % loss, at --parallel 1, 8, 32 and auto;
   - short: RTT 5.4 ms, 0 % loss, at --parallel 1, 8 and auto;
   each with samples/s, the workers used, and the shift of p50 and p25 against parallel 1 with 95 %
   bootstrap CIs (a CI that excludes 0 is a bias, not noise).

    build/venv/bin/python bench/bench_sweep.py [-n 200] [--skip-quick]
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pqbench import stats, store  # noqa: E402
from pqbench.analysis import single
from pqbench.experiment import spec as specmod
from pqbench.measure import runner  # noqa: E402
from pqbench.testbed import LinkSpec  # noqa: E402

CELLS = {  # name: (RTT ms, loss, parallel settings)
    "hard 195.7 ms / 10 %": (195.7, 0.10, (1, 8, 32, "auto")),
    "short 5.4 ms / 0 %": (5.4, 0.0, (1, 8, "auto")),
}


def quick_throughput() -> tuple[float, int, float]:
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "quick.duckdb"
        t0 = time.monotonic()
        run_id = runner.run(specmod.read(ROOT / "experiments" / "quick.toml"), db, quiet=True)
        wall = time.monotonic() - t0
        con = store.connect(db, read_only=True)
        n = con.execute("SELECT count(*) FROM samples WHERE run_id = ?", [run_id]).fetchone()[0]
        con.close()
    return wall, n, n / wall


def measure(n: int, rtt_ms: float, loss: float, parallel) -> tuple[float, list[float], dict, int]:
    cell, options = single.one_cell("X25519MLKEM768", "ecdsap256", n=n, parallel=parallel,
                                    link=LinkSpec.symmetric(rtt_ms=rtt_ms, loss=loss, seed=7), timeout_ms=120_000)
    t0 = time.monotonic()
    r = single.run(cell, options)
    wall = time.monotonic() - t0
    times = [s["t_ns"]["handshake_done"] / 1e6
             for s in map(json.loads, Path(r["run_dir"], "samples.jsonl").read_text().splitlines())
             if s.get("ok")]
    return wall, times, r["concurrency"], r["summary"]["failures"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=200, help="samples per cell and parallelism")
    ap.add_argument("--skip-quick", action="store_true")
    args = ap.parse_args()
    if not args.skip_quick:
        wall, n, rate = quick_throughput()
        print(f"quick preset: {n} samples in {wall:.0f} s = {rate:.1f} samples/s (store and calibration included)")
    for name, (rtt, loss, settings) in CELLS.items():
        base = None
        for p in settings:
            wall, times, conc, failures = measure(args.n, rtt, loss, p)
            base = base or times
            # p25 too: at 10 % loss the median sits between the clean and the retransmitted mode
            # and jumps by a whole RTO with the sample; p25 stays in the clean mode, where queueing shows
            shifts = []
            for q in (50, 25):
                diff, lo, hi = stats.bootstrap_diff(base, times, q)
                shifts.append(f"p{q} {stats.percentile(sorted(times), q):7.2f} ms ({diff:+.2f} [{lo:+.2f}, {hi:+.2f}])")
            print(f"{name}, parallel {p!s:>4} ({conc['workers']:>3} workers): {args.n / wall:6.2f} samples/s, "
                  f"{'; '.join(shifts)} vs parallel 1, {failures} failed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
