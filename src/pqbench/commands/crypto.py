import sys

from pqbench.algorithms import catalog, microbench
from pqbench.cli import print_json
from pqbench.endpoints import ondemand


def register(sub):
    p = sub.add_parser("crypto", help="keygen/encaps/decaps and keygen/sign/verify timings, and sizes")
    p.add_argument("--alg", action="append", help="algorithm (repeatable; default: every available one)")
    p.add_argument("--seconds", default="0.5", help="measuring time per algorithm: seconds, or a duration "
                                                   "(e.g. 500ms; default 0.5)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=handle)


def handle(args) -> int:
    seconds = microbench.check_seconds(args.seconds)
    # liboqs's catalog is built the first time one of its algorithms is asked for (or all, without --alg)
    ondemand.ensure([], algorithms=args.alg or [a.name for a in catalog.algorithms()])
    algs = microbench.select(args.alg)
    progress = None
    if not args.json:
        print(f"measuring {len(algs)} algorithms, {seconds:g} s each, through OpenSSL EVP "
              f"(about {len(algs) * seconds * 1.3:.0f} s)", file=sys.stderr)
        progress = (lambda k, n, name: print(f"\r[{k + 1}/{n}] {name:<40}", end="" if k + 1 < n else "\n",
                                             file=sys.stderr, flush=True))
    results = microbench.run(algs, seconds, progress)
    if args.json:
        print_json(results)
    else:
        print(microbench.format_table(results))
    return 0 if all(r["sizes_match_catalog"] for r in results) else 1
