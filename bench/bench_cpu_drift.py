#!/usr/bin/env python3
"""Benchmark: how much this machine's CPU speed drifts, as the runner's crypto rounds see it.

Measures the algorithms in ROUNDS rounds exactly as `pqbench run` does (microbench.rounds) and prints,
per round, each algorithm's speed factor: its median decapsulation time over its fastest round's.
Factors that rise and fall together across algorithms are the machine, not the algorithms. The last
line is the largest slowest/fastest ratio — what the report's cpu_speed warning compares with 1.25.
Run after `make`:  build/venv/bin/python bench/bench_cpu_drift.py [--rounds N] [--alg ALG ...]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pqbench.algorithms import catalog, microbench  # noqa: E402
from pqbench.measure.runner import CRYPTO_SECONDS  # noqa: E402

DEFAULT_ALGS = ["hqc128", "frodo640aes", "MLKEM768", "X25519"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--alg", action="append", help=f"KEM to time (default: {' '.join(DEFAULT_ALGS)})")
    args = ap.parse_args()
    algs = [catalog.find(n, "kem") for n in args.alg or DEFAULT_ALGS]
    rounds = microbench.rounds(algs, args.rounds, CRYPTO_SECONDS)
    decaps = {a.name: [r[i]["ops"]["decaps"]["median_us"] for r in rounds] for i, a in enumerate(algs)}
    print(f"decaps median per round / fastest round ({args.rounds} rounds of {CRYPTO_SECONDS} s per algorithm)")
    print("round " + " ".join(f"{n:>13}" for n in decaps))
    for k in range(args.rounds):
        print(f"{k:>5} " + " ".join(f"{v[k] / min(v):>13.2f}" for v in decaps.values()))
    print("fastest µs " + " ".join(f"{min(v):>9.1f}" for v in decaps.values()))
    worst = max(decaps, key=lambda n: max(decaps[n]) / min(decaps[n]))
    print(f"largest slowest/fastest: {worst} {max(decaps[worst]) / min(decaps[worst]):.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
