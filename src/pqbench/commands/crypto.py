import sys

from pqbench import crypto
from pqbench.cli import print_json


def register(sub):
    p = sub.add_parser("crypto", help="keygen/encaps/decaps and keygen/sign/verify timings, and sizes")
    p.add_argument("--alg", action="append", help="algorithm (repeatable; default: every available one)")
    p.add_argument("--seconds", default="0.5", help="measuring time per algorithm (default 0.5)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=handle)


def handle(args) -> int:
    seconds = crypto.check_seconds(args.seconds)
    algs = crypto.select(args.alg)
    if not args.json:
        print(f"measuring {len(algs)} algorithms, {seconds:g} s each, through OpenSSL EVP", file=sys.stderr)
    results = crypto.run(algs, seconds)
    if args.json:
        print_json(results)
    else:
        print(crypto.format_table(results))
    return 0 if all(r["sizes_match_catalog"] for r in results) else 1
