from pathlib import Path

from pqbench import store
from pqbench.experiment import spec as specmod
from pqbench.measure import runner


def register(sub):
    p = sub.add_parser("run", help="run an experiment spec (TOML): interleaved, resumable, stored in DuckDB")
    p.add_argument("spec", type=Path, metavar="SPEC.toml", help="experiment spec (see experiments/)")
    p.add_argument("--db", type=Path, default=store.DEFAULT_DB, help="results database (default results.duckdb)")
    p.add_argument("--resume", nargs="?", const="", metavar="RUN",
                   help="continue the newest run of this spec (or RUN), skipping finished cells")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=handle)


def handle(args) -> int:
    spec = specmod.load(args.spec)
    run_id = runner.run(spec, args.db, resume=args.resume is not None, resume_run=args.resume or None,
                        quiet=args.quiet)
    print(run_id)
    return 0
