"""`pqbench load`: server capacity for one key exchange, signature and server stack."""

import sys

from pqbench import units
from pqbench.cli import print_json
from pqbench.commands import axis_options
from pqbench.commands.net import add_linkspec_options, parse_link_options
from pqbench.endpoints.base import DEFAULT_WORKERS
from pqbench.experiment.loadplan import plan_from
from pqbench.measure import capacity, single_load


def register(sub):
    p = sub.add_parser("load", help="offer rising rates of open-loop handshakes until the server saturates: "
                                    "handshakes/s, latency under load, CPU per handshake on both sides")
    p.add_argument("--kex", required=True, help="key exchange (TLS group, or SSH key exchange with an SSH --server)")
    p.add_argument("--sig", required=True, help="signature algorithm of the chain (SSH: the host key)")
    p.add_argument("--server", default="openssl", help="server stack: openssl (nginx), s2n, rustls, gotls; openssh, gossh")
    p.add_argument("--rates", default="ramp", help="offered handshakes/s, comma-separated, or ramp (from --start, "
                                                   "doubling up to --max-rate) (default ramp)")
    p.add_argument("--start", default="25", help="the ramp's first rate (default 25/s)")
    p.add_argument("--max-rate", default="20000", help="the ramp's highest rate (default 20000/s)")
    p.add_argument("--step", default="2s", help="how long each rate is offered (default 2s)")
    p.add_argument("--time-bound", default="300s", help="the most the steps may take in all (default 300s)")
    p.add_argument("--workers", default=str(DEFAULT_WORKERS), help="server worker processes (nginx; default 32)")
    p.add_argument("--max-inflight", default="4096", help="handshakes the generator holds in flight at most; an arrival "
                                                          "beyond is skipped and counted (default 4096)")
    p.add_argument("--json", action="store_true", help="print the record (steps and verdict) as JSON")
    add_linkspec_options(p)
    axis_options.add(p, timing_client=False)
    p.set_defaults(func=handle)


def plan_from_args(args):
    """The steps to offer, checked (rates, durations, the time bound), before anything starts."""
    return plan_from(lambda key: "--" + key.replace("_", "-"), args.rates, args.start, args.max_rate, args.step,
                     args.time_bound, max_inflight=units.integer("--max-inflight", args.max_inflight, minimum=1,
                                                                 maximum=1_000_000))


def handle(args) -> int:
    link, tcp, _ = parse_link_options(args)
    plan = plan_from_args(args)
    cfg = single_load.LoadConfig(kex=args.kex, sig=args.sig, server=args.server, plan=plan, link=link, tcp=tcp,
                         workers=units.integer("--workers", args.workers, minimum=1, maximum=256),
                         axes=axis_options.values(args, timing_client=False))
    progress = None if args.json else (lambda msg: print(f"[load] {msg}", file=sys.stderr, flush=True))
    try:
        record = single_load.run(cfg, progress)
    except capacity.Interrupted as e:  # Ctrl-C: the steps that finished, as a shorter ramp would show them
        partial = {"interrupted": True, "steps": e.steps, "load": e.verdict, "ok": False,
                   "stop_reason": f"interrupted after {len(e.steps)} step(s)"}
        if args.json:
            print_json(partial)
        elif e.steps:
            print(summary(partial))
        raise
    if args.json:
        print_json(record)
    else:
        print(summary(record))
    return 0 if record["ok"] else 1


def summary(record: dict) -> str:
    lines = [f"{'offered/s':>10} {'served/s':>11} {'p50 ms':>8} {'p99 ms':>8} {'failed':>7} {'server CPU':>11} "
             f"{'client CPU':>11}"]
    for s in record["steps"]:
        lat = s.get("latency_ms") or {}
        lost = sum((s.get("failures") or {}).values()) + (s.get("skipped") or 0)
        lines.append(f"{s['offered_rate']:>10g} {s.get('throughput') or 0:>11.1f} {lat.get('p50') or 0:>8.2f} "
                     f"{lat.get('p99') or 0:>8.2f} {lost:>7} {s['server_util']:>10.0%} {s['client_util']:>10.0%}")
    v = record["load"]
    per = lambda x: f"{x:.3f} ms" if x is not None else "–"  # noqa: E731
    lines.append(f"{record['stop_reason']}; CPU per handshake at the last step: server {per(v['server_cpu_ms_per_hs'])}, "
                 f"client {per(v['client_cpu_ms_per_hs'])}" + (f" (pinned: server CPUs {v['pinned']['server']}, "
                                                               f"client {v['pinned']['client']})" if v["pinned"] else ""))
    return "\n".join(lines)
