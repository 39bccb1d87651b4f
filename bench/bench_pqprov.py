#!/usr/bin/env python3
"""Benchmark: liboqs algorithms through OpenSSL + pqprov (`pqbench crypto`, i.e. native/cryptobench
via EVP) against liboqs called directly (native/pqprov/oqsbench), same run, per algorithm and
operation. Ratio = provider median / direct median; the goal is <= 1.05 for operations of 10 µs or
more. The two are interleaved (provider, direct, provider, direct …) and the lowest median of each
is kept, so drift and other load on the machine hit both alike.

Run after `make`:  build/venv/bin/python bench/bench_pqprov.py [--seconds S] [--rounds N] [--alg NAME ...]
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pqbench import catalog, crypto, paths, stack  # noqa: E402

GOAL = 1.05
THRESHOLD_US = 10.0
OQSBENCH = paths.NATIVE_BUILD / "pqprov" / "oqsbench"


def direct(alg: catalog.Algorithm, seconds: float) -> dict:
    out = subprocess.run([str(OQSBENCH), alg.kind, alg.liboqs, "--seconds", str(seconds)], capture_output=True,
                         check=True, env=stack.openssl_env(), timeout=600)
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=0.6, help="seconds per run of one algorithm (all 3 operations)")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds; the lowest median is kept")
    ap.add_argument("--alg", action="append", help="catalog name (default: every pure liboqs algorithm)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    if not OQSBENCH.exists():
        print(f"{OQSBENCH} is missing: run `make`", file=sys.stderr)
        return 3
    algs = [catalog.find(n) for n in args.alg] if args.alg else \
        [a for a in catalog.algorithms() if a.source == "liboqs" and not a.hybrid]
    rows = []
    if not args.json:
        print(f"OpenSSL {stack.openssl_version()} + pqprov vs liboqs {stack.liboqs_version()} direct; "
              f"median µs, best of {args.rounds} interleaved rounds")
        print(f"{'algorithm':<24} {'op':<7} {'pqprov µs':>11} {'liboqs µs':>11} {'ratio':>6}")
    for alg in algs:
        best_p, best_d = {}, {}
        for _ in range(args.rounds):
            p = crypto.measure(alg, seconds=args.seconds)["ops"]
            d = direct(alg, args.seconds)["ops"]
            for op in crypto.OPS[alg.kind]:
                best_p[op] = min(best_p.get(op, float("inf")), p[op]["median_us"])
                best_d[op] = min(best_d.get(op, float("inf")), d[op]["median_us"])
        for op in crypto.OPS[alg.kind]:
            ratio = best_p[op] / best_d[op]
            counted = best_d[op] >= THRESHOLD_US
            rows.append({"algorithm": alg.name, "op": op, "pqprov_us": best_p[op], "liboqs_us": best_d[op],
                         "ratio": ratio, "counted": counted, "meets_goal": ratio <= GOAL or not counted})
            if not args.json:
                flag = "" if not counted else ("" if ratio <= GOAL else "  > goal")
                print(f"{alg.name:<24} {op:<7} {best_p[op]:>11.1f} {best_d[op]:>11.1f} {ratio:>6.3f}"
                      f"{flag}{'  (< 10 µs, not counted)' if not counted else ''}", flush=True)
    counted = [r for r in rows if r["counted"]]
    missed = [r for r in counted if not r["meets_goal"]]
    if args.json:
        print(json.dumps({"goal": GOAL, "threshold_us": THRESHOLD_US, "rows": rows}, indent=2))
    else:
        ratios = sorted(r["ratio"] for r in counted)
        print(f"\n{len(counted)} operations >= {THRESHOLD_US:.0f} µs: median ratio {ratios[len(ratios) // 2]:.3f}, "
              f"max {ratios[-1]:.3f}; {len(counted) - len(missed)} within {GOAL}"
              + (f", over: {', '.join(r['algorithm'] + ' ' + r['op'] for r in missed)}" if missed else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
