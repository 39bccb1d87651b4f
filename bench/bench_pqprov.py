#!/usr/bin/env python3
"""Benchmark: liboqs algorithms through OpenSSL + pqprov (`pqbench crypto`, i.e. native/cryptobench
via EVP) against liboqs called directly (native/pqprov/oqsbench), same run, per algorithm and
operation. Ratio = provider / direct, of the medians and of the minimums; the goal is <= 1.05 for
operations of 10 µs or more. The two are interleaved (provider, direct, provider, direct …) and the
lowest median and lowest minimum of each are kept, so drift and other load on the machine hit both
alike; on a busy machine the ratio of minimums is the steadier estimate of the provider's cost.

Run after `make`:  build/venv/bin/python bench/bench_pqprov.py [--seconds S] [--rounds N] [--alg NAME ...]
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pqbench import paths  # noqa: E402
from pqbench.algorithms import catalog, microbench, openssl_build

GOAL = 1.05
THRESHOLD_US = 10.0
OQSBENCH = paths.NATIVE_BUILD / "pqprov" / "oqsbench"


def direct(alg: catalog.Algorithm, seconds: float) -> dict:
    out = subprocess.run([str(OQSBENCH), alg.kind, alg.liboqs, "--seconds", str(seconds)], capture_output=True,
                         check=True, env=openssl_build.openssl_env(), timeout=600)
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
        print(f"OpenSSL {openssl_build.openssl_version()} + pqprov vs liboqs {openssl_build.liboqs_version()} direct; "
              f"median µs, best of {args.rounds} interleaved rounds")
        print(f"{'algorithm':<24} {'op':<7} {'pqprov µs':>11} {'liboqs µs':>11} {'ratio':>6}   "
              f"{'min pqprov':>11} {'min liboqs':>11} {'ratio':>6}")
    for alg in algs:
        best = {k: {} for k in ("p", "d", "pmin", "dmin")}
        for _ in range(args.rounds):
            p = microbench.measure(alg, seconds=args.seconds)["ops"]
            d = direct(alg, args.seconds)["ops"]
            for op in microbench.OPS[alg.kind]:
                for key, src, stat in (("p", p, "median_us"), ("d", d, "median_us"), ("pmin", p, "min_us"),
                                       ("dmin", d, "min_us")):
                    best[key][op] = min(best[key].get(op, float("inf")), src[op][stat])
        for op in microbench.OPS[alg.kind]:
            ratio = best["p"][op] / best["d"][op]
            ratio_min = best["pmin"][op] / best["dmin"][op]
            counted = best["d"][op] >= THRESHOLD_US
            rows.append({"algorithm": alg.name, "op": op, "pqprov_us": best["p"][op], "liboqs_us": best["d"][op],
                         "ratio": ratio, "pqprov_min_us": best["pmin"][op], "liboqs_min_us": best["dmin"][op],
                         "ratio_min": ratio_min, "counted": counted})
            if not args.json:
                flag = "" if not counted else ("" if min(ratio, ratio_min) <= GOAL else "  > goal")
                print(f"{alg.name:<24} {op:<7} {best['p'][op]:>11.1f} {best['d'][op]:>11.1f} {ratio:>6.3f}   "
                      f"{best['pmin'][op]:>11.1f} {best['dmin'][op]:>11.1f} {ratio_min:>6.3f}"
                      f"{flag}{'  (< 10 µs, not counted)' if not counted else ''}", flush=True)
    counted = [r for r in rows if r["counted"]]
    if args.json:
        print(json.dumps({"goal": GOAL, "threshold_us": THRESHOLD_US, "rows": rows}, indent=2))
        return 0
    print()
    for key, what in (("ratio", "medians"), ("ratio_min", "minimums")):
        ratios = sorted(r[key] for r in counted)
        over = [f"{r['algorithm']} {r['op']} ({r[key]:.3f})" for r in counted if r[key] > GOAL]
        print(f"ratio of {what}, {len(counted)} operations >= {THRESHOLD_US:.0f} µs: median {ratios[len(ratios) // 2]:.3f}, "
              f"max {ratios[-1]:.3f}; {len(counted) - len(over)} within {GOAL}" + (f"; over: {', '.join(over)}" if over else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
