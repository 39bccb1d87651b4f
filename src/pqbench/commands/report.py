"""`pqbench report RUN [--db results.duckdb] [--out DIR]`."""

import sys
from pathlib import Path

from pqbench import store, units
from pqbench.cli import print_json
from pqbench.errors import BadInput


def register(sub):
    p = sub.add_parser("report", help="statistics and figures of a stored run: report.html (self-contained) "
                                      "and summary.md")
    p.add_argument("run", nargs="?", default="latest", metavar="RUN",
                   help="run id, a unique prefix of one, its name, or 'latest' (default)")
    p.add_argument("--db", type=Path, default=store.DEFAULT_DB, help="results database (default results.duckdb)")
    p.add_argument("--out", type=Path, help="output directory (default reports/RUN_ID)")
    p.add_argument("--resamples", default="1000", help="bootstrap resamples per confidence interval (default 1000)")
    p.add_argument("--by-node", action="store_true", help="also one report per node that measured the run "
                                                          "(OUT/nodes/NODE), each with that node's cells only")
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    p.set_defaults(func=handle)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def handle(args) -> int:
    resamples = units.integer("--resamples", args.resamples, minimum=100, maximum=100_000)
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise BadInput("--out", f"{args.out} exists and is not a directory")
    from pqbench import report  # matplotlib loads only when a report is made

    con = store.connect(args.db, read_only=True)
    try:
        run_id = store.resolve_run(con, args.run)
        result = report.build(con, run_id, args.out or Path("reports") / run_id, resamples=resamples,
                              by_node=args.by_node)
    finally:
        con.close()
    if args.json:
        print_json(result)
    else:
        print(f"report of {run_id}: {plural(result['cells'], 'cell')}, {plural(len(result['figures']), 'figure')}, "
              f"{plural(result['warnings'], 'warning')}", file=sys.stderr)
        print(result["html"])
        print(result["markdown"])
        for path in result.get("nodes", {}).values():
            print(path)
    return 0
