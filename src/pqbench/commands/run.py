import shlex
import sys
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
    p.add_argument("--keep", action="store_true", help="keep the run folder under build/runs (servers' configs "
                                                       "and logs, scratch files) after the run; the results are in "
                                                       "the database either way")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=handle)


def handle(args) -> int:
    spec = specmod.load(args.spec)
    try:
        run_id = runner.run(spec, args.db, resume=args.resume is not None, resume_run=args.resume or None,
                            quiet=args.quiet, keep_files=args.keep)
    except runner.Interrupted as e:
        again = ["pqbench", "run", str(args.spec), "--db", str(args.db), "--resume", e.run_id]
        print(f"pqbench run: interrupted; run {e.run_id} keeps its finished cells in {args.db}.\n"
              f"  continue it with: {shlex.join(again)}\n"
              f"  report what is done: {shlex.join(['pqbench', 'report', e.run_id, '--db', str(args.db)])}",
              file=sys.stderr)
        return 130
    print(run_id)
    return 0
