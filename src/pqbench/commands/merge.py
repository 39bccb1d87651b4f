"""`pqbench merge --db results.duckdb PART.duckdb...`: the stores of a run's shards (`run --shard K/N`) into
one store; merging a part again changes nothing."""

from pathlib import Path

from pqbench import store
from pqbench.cli import print_json
from pqbench.measure import provenance


def register(sub):
    p = sub.add_parser("merge", help="merge stores (the shards of `run --shard K/N`) into one; again changes nothing")
    p.add_argument("parts", nargs="+", type=Path, metavar="PART.duckdb", help="a store to merge in (left unchanged)")
    p.add_argument("--db", type=Path, default=store.DEFAULT_DB,
                   help="the store to merge into, created when missing (default results.duckdb)")
    p.add_argument("--json", action="store_true", help="print what was merged as JSON")
    p.set_defaults(func=handle)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def handle(args) -> int:
    # parts of one run must come from the same build, as a cluster's nodes must
    summary = store.merge(args.db, args.parts, check=provenance.mismatch)
    if args.json:
        print_json(summary)
        return 0
    for part in summary["parts"]:
        if not part["runs"]:
            print(f"{part['part']}: no runs")
        for r in part["runs"]:
            print(f"{part['part']}: run {r['run_id']}{' (new)' if r['new'] else ''}: {r['added']} cells added, "
                  f"{r['replaced']} replaced, {r['unchanged']} unchanged, {r['kept']} kept (the copy here is better); "
                  f"{_plural(r['nodes'], 'node segment')}, crypto rounds of {_plural(r['crypto_segments'], 'segment')}")
        if part["scans"]:
            print(f"{part['part']}: {part['scans']} scan(s)")
    for r in summary["runs"]:
        shards = f", shards {' '.join(r['shards'])}" if r["shards"] else ""
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(r["statuses"].items()))
        print(f"{summary['db']}: run {r['run_id']} {r['status']}: {r['stored']} of {r['cells']} cells stored "
              f"({statuses or 'none'}){shards}")
    return 0
