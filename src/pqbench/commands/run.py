import contextlib
import shlex
import sys
from pathlib import Path

from pqbench import store
from pqbench.cluster import security as cluster_security
from pqbench.errors import BadInput, MeasurementFailed
from pqbench.experiment import shard as shardmod
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
    p.add_argument("--shard", metavar="K/N", help="measure only part K of N (all algorithms of a link condition stay "
                                                 "in one part) into this store; `pqbench merge` joins the parts")
    p.add_argument("--run-id", metavar="ID", help="the run's id (default: name-time-random; with --shard one id "
                                                 "derived from the spec, shared by all its shards)")
    p.add_argument("--cluster", metavar="SCHEDULER", help="measure the cells on the workers of a Dask cluster "
                                                         "(`pqbench worker SCHEDULER` on each node), e.g. "
                                                         "tcp://10.0.0.1:8786; the results come to this store")
    cluster_security.add_arguments(p)
    p.set_defaults(func=handle)


def handle(args) -> int:
    spec = specmod.read(args.spec)
    shard = shardmod.parse(args.shard) if args.shard else None
    security = cluster_security.from_arguments(args)
    if security and not args.cluster:
        raise BadInput("--tls-ca-file", "TLS options secure a cluster's connections: give --cluster too")
    try:
        with contextlib.ExitStack() as opened:
            engine = opened.enter_context(_cluster(args.cluster, security)) if args.cluster else None
            run_id = runner.run(spec, args.db, resume=args.resume is not None, resume_run=args.resume or None,
                                quiet=args.quiet, keep_files=args.keep, shard=shard, run_id=args.run_id,
                                engine=engine)
    except runner.Interrupted as e:
        again = ["pqbench", "run", str(args.spec), "--db", str(args.db), "--resume", e.run_id]
        print(f"pqbench run: interrupted; run {e.run_id} keeps its finished cells in {args.db}.\n"
              f"  continue it with: {shlex.join(again)}\n"
              f"  report what is done: {shlex.join(['pqbench', 'report', e.run_id, '--db', str(args.db)])}",
              file=sys.stderr)
        return 130
    except (store.Unwritable, MeasurementFailed) as e:
        # a full disk, or a measurement that could not go on (the emulator died …): the cells stored before are
        # kept, and --resume (the newest run of this very spec) measures the others
        again = ["pqbench", "run", str(args.spec), "--db", str(args.db), "--resume"]
        when = "once it can write, " if isinstance(e, store.Unwritable) else ""
        print(f"pqbench run: error: {e}\n  the cells finished before are stored; {when}continue the run with: "
              f"{shlex.join(again)}", file=sys.stderr)
        return e.exit_code
    print(run_id)
    return 0


def _cluster(address: str, security):
    from pqbench.cluster.driver import Cluster  # imports Dask's distributed, only for cluster runs
    return Cluster(address, security)
