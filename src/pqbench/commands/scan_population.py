"""`pqbench scan --file FILE`: a population scan (pqbench.scan.population), each result stored as it
finishes, Ctrl-C then --resume continuing it, and the aggregate report at its end."""

from __future__ import annotations

import shlex
import sys
import threading
import uuid

from pqbench import store, units
from pqbench.cli import print_json
from pqbench.errors import BadInput, MissingCapability

MAX_TARGETS = 100_000


def options(args) -> dict:
    """What a resumed scan must repeat (its targets' results must be comparable)."""
    return {"n": args.n, "timeout": args.timeout, "ca": str(args.ca) if args.ca else None,
            "servername": args.servername, "groups": args.groups}


def handle(args, max_concurrency: int, provenance, groups: list[str] | None) -> int:
    """provenance(netns) -> dict: the command's (pqbench.commands.scan); groups: --groups read."""
    import os

    from pqbench.scan import population
    if args.targets:
        raise BadInput("TARGET", "give targets on the command line or --file, not both")
    concurrency = units.integer("--concurrency", args.concurrency, minimum=1, maximum=max_concurrency)
    n = units.integer("-n", args.n, minimum=1, maximum=1000)
    timeout_s = units.duration_ms("--timeout", args.timeout, allow_zero=False) / 1000
    rate = units.number("--rate", args.rate, minimum=0.01, maximum=1000)
    backoff_s = units.duration_ms("--backoff", args.backoff) / 1000
    if args.ca is not None and not args.ca.is_file():
        raise BadInput("--ca", f"{args.ca} is not a file (a PEM file of CA certificates)")
    if args.netns and os.geteuid() != 0:
        raise MissingCapability("--netns needs root (entering a network namespace)", "run as root, or scan without --netns")
    tf = population.read(args.file)
    for k, text, why in tf.bad:
        print(f"{args.file}:{k}: skipped {text!r}: {why}", file=sys.stderr)
    if not tf.targets:
        raise BadInput("--file", f"{args.file} lists no target" + (f" ({len(tf.bad)} bad line(s), above)" if tf.bad else ""))
    if len(tf.targets) > MAX_TARGETS:
        raise BadInput("--file", f"{len(tf.targets)} targets; at most {MAX_TARGETS} per scan")

    con = store.connect(args.db)
    try:
        return _scan(args, con, tf, concurrency=concurrency, n=n, timeout_s=timeout_s, rate=rate, backoff_s=backoff_s,
                     prov=provenance(args.netns), groups=groups)
    finally:
        con.close()


def _scan(args, con, tf, *, concurrency, n, timeout_s, rate, backoff_s, prov, groups) -> int:
    from pqbench import interrupts, scan
    from pqbench.measure.rig import place_on
    from pqbench.scan import aggregate, population
    from pqbench.store import scan_population as sp
    from pqbench.testbed import RealPath

    if args.resume:
        earlier = sp.resumable(con, tf.digest)
        if earlier is None:
            raise BadInput("--resume", f"{args.db} holds no unfinished scan of {args.file} (as it is now)")
        if earlier["options"] != options(args):
            raise BadInput("--resume", f"the scan being resumed used {earlier['options']}; give the same -n, --timeout, "
                                       "--ca, --servername and --groups")
        pid = earlier["population_id"]
        skip = sp.done_targets(con, pid)
    else:
        pid = uuid.uuid4().hex[:12]
        sp.create(con, pid, file=str(args.file), digest=tf.digest, targets=len(tf.targets), options=options(args))
        skip = set()
    todo = [(k, a) for k, a in tf.targets if str(a) not in skip]
    print(f"[scan] population {pid}: {len(tf.targets)} targets, {len(skip)} already scanned, {len(todo)} to scan at "
          f"{rate:g} connections/s", file=sys.stderr)

    count = [len(skip)]

    def done(k, a, result):
        result["scan_id"] = uuid.uuid4().hex[:12]
        store.save_scan(con, result["scan_id"], target=result["target"], address=result["address"],
                        protocol=result["protocol"], summary=result["summary"], result=result, provenance=prov)
        sp.mark_done(con, pid, target=str(a), line=k, scan_id=result["scan_id"], protocol=result["protocol"])
        count[0] += 1
        print(f"[scan] {count[0]}/{len(tf.targets)} {a} (line {k}): {result['summary']}", file=sys.stderr, flush=True)

    with interrupts.deferred() as interrupt:
        stop = threading.Event()
        with RealPath(netns={"client": args.netns} if args.netns else None) as path:
            place = place_on(path, "client")

            def one(a, pace):
                return scan.scan(a, place, n=n, timeout_s=timeout_s, cafile=str(args.ca) if args.ca else None,
                                 servername=args.servername, stop=stop, pace=pace, groups=groups)
            account = population.run(todo, one, rate=rate, concurrency=concurrency, backoff_s=backoff_s, done=done,
                                     stop=stop, interrupted=lambda: interrupt.arrived)
        left = len(tf.targets) - len(sp.done_targets(con, pid))
        if interrupt.arrived or left:
            sp.set_status(con, pid, "interrupted")
            again = ["pqbench", "scan", "--file", str(args.file), "--resume", "--db", str(args.db), "--rate", args.rate,
                     "--backoff", args.backoff, "-n", args.n, "--timeout", args.timeout, "--concurrency", args.concurrency]
            for option, value in (("--ca", args.ca), ("--servername", args.servername), ("--netns", args.netns),
                                  ("--groups", args.groups)):
                if value is not None:
                    again += [option, str(value)]
            print(f"interrupted: {len(tf.targets) - left} of {len(tf.targets)} targets scanned and stored in {args.db}; "
                  f"continue with: {shlex.join(again)}", file=sys.stderr)
            return 130 if interrupt.arrived else 1
        sp.set_status(con, pid, "done")
    agg = aggregate.aggregate(sp.results(con, pid))
    print(f"[scan] {account['connections']} connections", file=sys.stderr)
    if args.json:
        print_json({"population_id": pid, "aggregate": agg, "bad_lines": [{"line": k, "text": t, "why": w}
                                                                         for k, t, w in tf.bad]})
    else:
        print("\n".join(aggregate.lines(agg)))
    return 0
