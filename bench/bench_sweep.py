#!/usr/bin/env python3
"""Sweep throughput (run as root after `make`):

1. samples/s of `pqbench run experiments/quick.toml` (wall time of the whole run, store included);
2. samples/s of one hard cell — RTT 195.7 ms, 10 % loss, X25519MLKEM768 + ECDSA P-256 — at
   --parallel 1, 8 and 32, with the bias of each median against parallel 1 (same seed, so the
   same loss pattern).

    build/venv/bin/python bench/bench_sweep.py [-n 200] [--skip-quick]
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pqbench import handshake, store  # noqa: E402
from pqbench.experiment import runner, spec as specmod  # noqa: E402
from pqbench.testbed import LinkSpec  # noqa: E402


def quick_throughput() -> tuple[float, int, float]:
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "quick.duckdb"
        t0 = time.monotonic()
        run_id = runner.run(specmod.load(ROOT / "experiments" / "quick.toml"), db, quiet=True)
        wall = time.monotonic() - t0
        con = store.connect(db, read_only=True)
        n = con.execute("SELECT count(*) FROM samples WHERE run_id = ?", [run_id]).fetchone()[0]
        con.close()
    return wall, n, n / wall


def hard_cell(n: int, parallel: int) -> tuple[float, float, int]:
    cfg = handshake.HandshakeConfig(kex="X25519MLKEM768", sig="ecdsap256", n=n, parallel=parallel,
                                    spec=LinkSpec.symmetric(rtt_ms=195.7, loss=0.10, seed=7), timeout_ms=120_000)
    t0 = time.monotonic()
    r = handshake.run(cfg)
    return time.monotonic() - t0, r["summary"]["p50_ms"], r["summary"]["failures"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=200, help="samples of the hard cell per parallelism")
    ap.add_argument("--skip-quick", action="store_true")
    args = ap.parse_args()
    if not args.skip_quick:
        wall, n, rate = quick_throughput()
        print(f"quick preset: {n} samples in {wall:.0f} s = {rate:.1f} samples/s (store and calibration included)")
    base = None
    for p in (1, 8, 32):
        wall, p50, failures = hard_cell(args.n, p)
        base = base or p50
        print(f"195.7 ms / 10 % loss, parallel {p:>2}: {args.n / wall:6.2f} samples/s, p50 {p50:8.1f} ms "
              f"({(p50 - base) / base * 100:+.1f} % vs parallel 1), {failures} failed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
