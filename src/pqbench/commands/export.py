"""`pqbench export RUN --format parquet|csv [--db results.duckdb] [--out DIR]`: a run's tables as files."""

from pathlib import Path

from pqbench import store
from pqbench.cli import print_json
from pqbench.errors import BadInput

FORMATS = ("parquet", "csv")


def register(sub):
    p = sub.add_parser("export", help="write a run's runs/cells/samples/crypto tables as Parquet or CSV")
    p.add_argument("run", nargs="?", default="latest", metavar="RUN",
                   help="run id, a unique prefix of one, its name, or 'latest' (default)")
    p.add_argument("--format", default="parquet", help="parquet (default) or csv")
    p.add_argument("--db", type=Path, default=store.DEFAULT_DB, help="results database (default results.duckdb)")
    p.add_argument("--out", type=Path, default=Path("."), help="output directory (default: current directory)")
    p.add_argument("--json", action="store_true", help="print the written paths as JSON")
    p.set_defaults(func=handle)


def handle(args) -> int:
    fmt = args.format.lower()
    if fmt not in FORMATS:
        raise BadInput("--format", f"{args.format!r} is not one of {', '.join(FORMATS)}")
    if args.out.exists() and not args.out.is_dir():
        raise BadInput("--out", f"{args.out} exists and is not a directory")
    con = store.connect(args.db, read_only=True)
    try:
        run_id = store.resolve_run(con, args.run)
        paths = store.export(con, run_id, args.out, fmt)
        rows = store.count_rows(con, run_id)
        counts = {p.name: rows[t] for p, t in zip(paths, store.exported_tables(con))}
    finally:
        con.close()
    if args.json:
        print_json({"run": run_id, "format": fmt, "files": [{"path": str(p), "rows": counts[p.name]} for p in paths]})
    else:
        for p in paths:
            print(f"{p}  ({counts[p.name]} rows)")
    return 0
