#!/usr/bin/env python3
"""Benchmark: `pqbench crypto` (our EVP harness) against `openssl speed`, same run, same OpenSSL.

Prints µs per operation from both and their ratio (harness / speed): ≈ 1 means the harness adds
no measurable overhead. Run after `make`:  build/venv/bin/python bench/bench_crypto.py [--seconds S]
"""

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pqbench.algorithms import catalog, microbench, openssl_build  # noqa: E402

# catalog name -> (speed argument, {our op: speed column}); speed reports operations per second.
PAIRS = {
    "rsa2048": ("rsa2048", {"sign": "sign/s", "verify": "verify/s"}),
    "ecdsap256": ("ecdsap256", {"sign": "sign/s", "verify": "verify/s"}),
    "ed25519": ("ed25519", {"sign": "sign/s", "verify": "verify/s"}),
    "ed448": ("ed448", {"sign": "sign/s", "verify": "verify/s"}),
    "MLKEM768": ("ML-KEM-768", {"keygen": "keygen/s", "encaps": "encaps/s", "decaps": "decaps/s"}),
    "MLKEM512": ("ML-KEM-512", {"keygen": "keygen/s", "encaps": "encaps/s", "decaps": "decaps/s"}),
}


def speed(arg: str, seconds: int) -> dict:
    """Operations per second per column from `openssl speed -mr` (machine-readable lines)."""
    out = openssl_build.run_openssl(["speed", "-mr", "-seconds", str(seconds), arg], timeout=600).stdout.decode()
    rates = {}
    for line in out.splitlines():
        # "+F<n>:<index>[:<bits>][:<name>]:<op1/s>:<op2/s>[...]" — the rates are the fields with a decimal point
        if re.match(r"\+F\d+:", line) and "values" not in rates:  # the first table: sign/verify for RSA
            rates["values"] = [float(v) for v in line.split(":")[1:] if "." in v]
    return rates


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=int, default=2, help="seconds per operation for both tools")
    args = ap.parse_args()
    print(f"OpenSSL {openssl_build.openssl_version()}; ratio = harness mean / speed mean (µs per operation)")
    print(f"{'algorithm':<12} {'op':<7} {'harness µs':>11} {'speed µs':>10} {'ratio':>6}")
    for name, (arg, columns) in PAIRS.items():
        ours = microbench.measure(catalog.find(name), seconds=args.seconds * len(columns))
        theirs = speed(arg, args.seconds).get("values", [])
        if len(theirs) < len(columns):
            print(f"{name:<12} speed gave no figures for {arg}")
            continue
        for (op, _), per_s in zip(columns.items(), theirs):
            us_speed = 1e6 / per_s
            us_ours = ours["ops"][op]["mean_us"]
            print(f"{name:<12} {op:<7} {us_ours:>11.2f} {us_speed:>10.2f} {us_ours / us_speed:>6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
