"""`pqbench population up|down`: the local population of servers pqbench did not configure for post-quantum
cryptography (pqbench.scan.local), in a detached testbed, for a first `pqbench scan --file`."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from pqbench import units
from pqbench.cli import print_json


def register(sub) -> None:
    p = sub.add_parser("population", help="a local population of servers to scan (Debian's nginx and sshd, our nginx, "
                                          "s2n, rustls, Go, QUIC, one behind an ossified middlebox) in a testbed")
    ps = p.add_subparsers(dest="population_command", required=True, parser_class=type(p))
    up = ps.add_parser("up", help="bring the population up in a detached testbed and write its target file")
    up.add_argument("--hosts", default="20", help="addresses of the fleet, each with every kind of server "
                                                  "(default 20: 222 targets; 1..200)")
    up.add_argument("--out", type=Path, default=Path("population"),
                    help="where targets.txt, ca.pem and composition.json go (default ./population)")
    up.add_argument("--name", help="testbed name pqb-XXXX (default: random)")
    up.add_argument("--json", action="store_true", help="the composition as JSON")
    up.set_defaults(func=cmd_up)
    rep = ps.add_parser("report", help="the aggregate of a population scan stored in --db, checked against the "
                                       "population's composition when given")
    rep.add_argument("--db", type=Path, default=Path("results.duckdb"), help="the store the scan wrote (default "
                                                                              "results.duckdb)")
    rep.add_argument("--composition", type=Path, help="composition.json of `population up`: compare the aggregate "
                                                      "with the one it expects (exit 1 when they differ)")
    rep.add_argument("--json", action="store_true")
    rep.set_defaults(func=cmd_report)
    down = ps.add_parser("down", help="take the population's testbed down (as pqbench net down NAME)")
    down.add_argument("name")
    down.set_defaults(func=cmd_down)


def cmd_up(args) -> int:
    from pqbench.scan import local
    from pqbench.testbed.testbed import require_root
    hosts = units.integer("--hosts", args.hosts, minimum=1, maximum=local.MAX_HOSTS)
    require_root()
    pop = local.up(hosts, args.out, name=args.name,
                   progress=lambda msg: print(f"[population] {msg}", file=sys.stderr, flush=True))
    if args.json:
        print_json(__import__("json").loads((pop.directory / "composition.json").read_text()))
        return 0
    counts = local.counts(pop.entries)
    print(f"{pop.name} up: {len(pop.entries)} targets on {len({e['host'] for e in pop.entries})} addresses "
          f"({', '.join(f'{k} {v}' for k, v in counts.items())})")
    print(f"  targets: {pop.targets_file}; composition and expected verdicts: {pop.directory / 'composition.json'}")
    print(f"  scan it: {shlex.join(pop.scan_argv(Path('population.duckdb')))}")
    print(f"  remove it: pqbench population down {pop.name}")
    return 0


def cmd_report(args) -> int:
    import json

    from pqbench import store
    from pqbench.errors import BadInput
    from pqbench.scan import aggregate, local
    from pqbench.store import scan_population as sp
    if not args.db.is_file():
        raise BadInput("--db", f"{args.db} is not a file (the store a `pqbench scan --file` wrote)")
    expected = None
    if args.composition is not None:
        try:
            expected = json.loads(args.composition.read_text())["expected_aggregate"]
        except (OSError, ValueError, KeyError) as e:
            raise BadInput("--composition", f"{args.composition}: not a composition.json of `pqbench population up` "
                                            f"({e})") from None
    con = store.connect(args.db, read_only=True)
    try:
        pid = sp.latest(con)
        if pid is None:
            raise BadInput("--db", f"{args.db} holds no population scan (pqbench scan --file)")
        agg = aggregate.aggregate(sp.results(con, pid))
    finally:
        con.close()
    differ = local.compare(agg, expected) if expected is not None else None
    if args.json:
        print_json({"population_id": pid, "aggregate": agg, "differs_from_composition": differ})
    else:
        print(f"population scan {pid} in {args.db}")
        print("\n".join(aggregate.lines(agg)))
        if differ is not None:
            print("matches the composition" if not differ else
                  "differs from the composition: " + "; ".join(f"{k} {v['got']} (expected {v['want']})"
                                                               for k, v in differ.items()))
    return 1 if differ else 0


def cmd_down(args) -> int:
    from pqbench.testbed import down
    down(args.name)
    print(f"{args.name} removed")
    return 0
