"""`pqbench scan TARGET... [--json] [--db results.duckdb]`: a server's post-quantum readiness;
`pqbench scan --file FILE [--rate R] [--resume]`: a population of servers, politely, resumably, summed up."""

import concurrent.futures
import os
import platform
import shlex
import sys
import threading
import uuid
from pathlib import Path

from pqbench import __version__, store, units
from pqbench.cli import print_json
from pqbench.errors import BadInput, MissingCapability

MAX_CONCURRENCY = 16
MAX_TARGETS = 10_000


def register(sub):
    p = sub.add_parser("scan", help="what a TLS or SSH server accepts and prefers: its post-quantum readiness")
    p.add_argument("targets", nargs="*", metavar="TARGET", help="HOST:PORT (TLS) or ssh://HOST:PORT (SSH)")
    p.add_argument("--file", type=Path, help="a population scan of the targets in FILE, one a line (# starts a comment; "
                                             "a bad line is reported with its number and skipped)")
    p.add_argument("--rate", default="5", help="with --file: new connections per second, over all targets (default 5)")
    p.add_argument("--backoff", default="1s", help="with --file: the pause before a host's next target after it "
                                                   "refused, doubling per refusal in a row (default 1s, at most 30s)")
    p.add_argument("--resume", action="store_true", help="with --file: continue the last unfinished scan of this "
                                                         "file in --db (the targets it stored are not scanned again)")
    p.add_argument("--concurrency", default="2", help="targets scanned at once (default 2; each target sees one "
                                                        "connection at a time)")
    p.add_argument("-n", dest="n", default="10", help="timed handshakes per accepted TLS group (default 10)")
    p.add_argument("--groups", help="TLS groups to try, comma-separated (default: every one this build has; see "
                                    "`pqbench algorithms`)")
    p.add_argument("--timeout", default="5s", help="per connection (default 5s)")
    p.add_argument("--ca", type=Path, help="CA certificates to verify TLS chains with (without: the result is recorded)")
    p.add_argument("--servername", help="TLS server name (SNI and verification; default: the target's host)")
    p.add_argument("--netns", help="run the scanning clients in this existing network namespace")
    p.add_argument("--db", type=Path, default=store.DEFAULT_DB, help="results database (default results.duckdb)")
    p.add_argument("--json", action="store_true", help="the results as JSON")
    p.set_defaults(func=handle)


def scan_groups(args) -> list[str] | None:
    """--groups as catalog names, or None for every TLS group this build has."""
    if not args.groups:
        return None
    from pqbench.scan import tls
    have = {a.name.lower(): a.name for a in tls.tls_groups()[0]}
    out = []
    for g in (x.strip() for x in args.groups.split(",")):
        if g.lower() not in have:
            raise BadInput("--groups", f"{g!r} is not a TLS group this build can offer (allowed: {', '.join(sorted(have.values()))})")
        out.append(have[g.lower()])
    return list(dict.fromkeys(out))


def targets(args) -> list:
    from pqbench.remote import address
    found = [address.parse("TARGET", t) for t in args.targets]
    if args.file is not None:
        try:
            text = args.file.read_text()
        except OSError as e:
            raise BadInput("--file", f"{args.file}: {e.strerror}") from None
        for k, line in enumerate(text.splitlines(), start=1):
            line = line.split("#", 1)[0].strip()
            if line:
                found.append(address.parse(f"--file {args.file}:{k}", line))
    if not found:
        raise BadInput("TARGET", "name at least one target: HOST:PORT (TLS), ssh://HOST:PORT (SSH) or --file FILE")
    if len(found) > MAX_TARGETS:
        raise BadInput("TARGET", f"{len(found)} targets; at most {MAX_TARGETS} per scan")
    return list(dict.fromkeys(found))  # each once


def provenance(netns: str | None) -> dict:
    from pqbench.algorithms import openssl_build
    from pqbench.measure.provenance import git_commit
    return {"pqbench": __version__, "git_commit": git_commit(), "host": platform.node(),
            "openssl": openssl_build.openssl_version(), "netns": netns}


def handle(args) -> int:
    if args.file is not None:
        from pqbench.commands import scan_population
        return scan_population.handle(args, MAX_CONCURRENCY, provenance, scan_groups(args))
    if args.resume:
        raise BadInput("--resume", "only with --file (a population scan)")
    found = targets(args)
    groups = scan_groups(args)
    concurrency = units.integer("--concurrency", args.concurrency, minimum=1, maximum=MAX_CONCURRENCY)
    n = units.integer("-n", args.n, minimum=1, maximum=1000)
    timeout_s = units.duration_ms("--timeout", args.timeout, allow_zero=False) / 1000
    if args.ca is not None and not args.ca.is_file():
        raise BadInput("--ca", f"{args.ca} is not a file (a PEM file of CA certificates)")
    if args.netns and os.geteuid() != 0:
        raise MissingCapability("--netns needs root (entering a network namespace)", "run as root, or scan without --netns")
    from pqbench import interrupts, scan
    from pqbench.measure.rig import place_on
    from pqbench.testbed import RealPath

    # The main thread waits on the scanning threads: a Ctrl-C is noted, not raised in the middle of the wait
    # (pqbench.interrupts), the scans in progress stop, what finished is stored and printed, and the signal
    # is raised again when the block ends (exit 130).
    with interrupts.deferred() as interrupt:
        stop = threading.Event()
        with RealPath(netns={"client": args.netns} if args.netns else None) as path:
            place = place_on(path, "client")

            def one(a):
                return scan.scan(a, place, n=n, timeout_s=timeout_s, cafile=str(args.ca) if args.ca else None,
                                 servername=args.servername, stop=stop, groups=groups)
            with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as pool:
                futures = [pool.submit(one, a) for a in found]
                while not all(f.done() for f in futures):
                    if interrupt.arrived and not stop.is_set():
                        stop.set()  # the scans in progress end (Stopped), those not begun never start
                    concurrent.futures.wait(futures, timeout=0.1, return_when=concurrent.futures.FIRST_COMPLETED)
            results = [f.result() for f in futures if f.exception() is None or not _stopped(f.exception())]
        _store(args.db, results, args.netns)
        if results:
            _print(results, args)
        if interrupt.arrived:
            left = [str(a) for a, f in zip(found, futures) if f.exception() is not None]
            print(f"interrupted: {len(results)} of {len(found)} target(s) scanned"
                  + (f" and stored in {args.db}" if results else "")
                  + (f"; scan the others with: {shlex.join(again(args, left))}" if left else ""), file=sys.stderr)
    answered = [r for r in results if not r.get("failure") or r.get("readiness")]
    return 0 if answered else 1


def _stopped(error: BaseException) -> bool:
    from pqbench.scan import Stopped
    if isinstance(error, Stopped):
        return True
    raise error


def _store(db: Path, results: list, netns: str | None) -> None:
    if not results:
        return
    con = store.connect(db)
    try:
        prov = provenance(netns)
        for r in results:
            r["scan_id"] = uuid.uuid4().hex[:12]
            store.save_scan(con, r["scan_id"], target=r["target"], address=r["address"], protocol=r["protocol"],
                            summary=r["summary"], result=r, provenance=prov)
    finally:
        con.close()


def _print(results: list, args) -> None:
    if args.json:
        print_json(results if len(results) > 1 or args.file else results[0])
    else:
        from pqbench.scan import render
        print("\n".join(render.lines(results)).rstrip())
    sys.stdout.flush()


def again(args, targets: list[str]) -> list[str]:
    """The command that scans these targets with the same options (what an interrupted scan did not finish)."""
    argv = ["pqbench", "scan", *targets, "--concurrency", args.concurrency, "-n", args.n, "--timeout", args.timeout]
    for option, value in (("--ca", args.ca), ("--servername", args.servername), ("--netns", args.netns),
                          ("--groups", args.groups)):
        if value is not None:
            argv += [option, str(value)]
    return argv + ["--db", str(args.db)] + (["--json"] if args.json else [])
