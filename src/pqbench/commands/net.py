"""`pqbench net up|calibrate|down|clean|list`: the network testbed from the command line."""

from __future__ import annotations

import sys

from pqbench.cli import print_json

BACKEND_CHOICES = ("auto", "pqlink", "netem")


def add_linkspec_options(p) -> None:
    g = p.add_argument_group("link (LinkSpec; units: ms/s/us, % or fraction, kbit/mbit/gbit)")
    g.add_argument("--rtt", help="round-trip time, split evenly into the two one-way delays (e.g. 31.1ms)")
    g.add_argument("--delay-c2s", dest="delay_c2s", help="one-way delay client->server")
    g.add_argument("--delay-s2c", dest="delay_s2c", help="one-way delay server->client")
    g.add_argument("--jitter", help="uniform jitter on each direction's delay (+-)")
    g.add_argument("--reorder", action="store_true", help="let jitter reorder packets (default: keep order)")
    g.add_argument("--loss", help="Bernoulli loss per direction (e.g. 1%% or 0.01)")
    g.add_argument("--loss-c2s", dest="loss_c2s", help="Bernoulli loss client->server only")
    g.add_argument("--loss-s2c", dest="loss_s2c", help="Bernoulli loss server->client only")
    g.add_argument("--gemodel", metavar="P[,R[,1-H[,1-K]]]", help="Gilbert-Elliott loss as netem's `loss gemodel`")
    g.add_argument("--rate", help="rate limit per direction (e.g. 10mbit); default unlimited")
    g.add_argument("--rate-c2s", dest="rate_c2s", help="rate limit client->server only")
    g.add_argument("--rate-s2c", dest="rate_s2c", help="rate limit server->client only")
    g.add_argument("--queue", help="packets the queue before the rate limiter holds (default 1000)")
    g.add_argument("--queue-bytes", dest="queue_bytes", help="bytes the queue holds (default unbounded)")
    g.add_argument("--aqm", metavar="SPEC",
                   help="the queue's discipline: droptail (default), codel or pie, then key=value "
                        "(codel target=5ms interval=100ms; pie target=15ms tupdate=15ms alpha=0.125 beta=1.25 "
                        "max_burst=150ms; ecn to mark instead of drop); pqlink only")
    g.add_argument("--trace-up", dest="trace_up", metavar="NAME|FILE",
                   help="replay a delivery trace (mahimahi format) client->server instead of the rate: a file or a "
                        "shipped name (e.g. ATT-LTE-driving-2016, Verizon-EVDO-driving); pqlink only")
    g.add_argument("--trace-down", dest="trace_down", metavar="NAME|FILE",
                   help="the same server->client (a bare shipped name takes its .down file)")
    g.add_argument("--middlebox", metavar="SPEC",
                   help="an ossified middlebox client->server: reset or drop a TLS ClientHello that spans more than "
                        "one TCP segment (split=on, default) or whose record exceeds max=BYTES: an action (e.g. reset or drop) "
                        "and its options, as in 'drop max=1400' (to=ADDRESS[/N]: only in front of those destinations); "
                        "or drop-fragments: drop every IP fragment (an IKE_SA_INIT larger than the path); pqlink only")
    g.add_argument("--overhead", help="per-packet bytes counted at the rate (default 0)")
    g.add_argument("--mtu", help="MTU of the link devices (default 1500)")
    g.add_argument("--seed", help="loss/jitter seed: the same seed gives the same loss pattern (default 1)")
    t = p.add_argument_group("TCP (per route, both namespaces)")
    t.add_argument("--initcwnd", help="initial congestion window in segments")
    t.add_argument("--initrwnd", help="initial receive window in segments")
    t.add_argument("--congctl", help="congestion control (e.g. reno, cubic, bbr)")
    e = p.add_argument_group("emulator")
    e.add_argument("--backend", default="auto", help="auto (netem if the kernel has it, else pqlink), pqlink or netem")
    e.add_argument("--fifo", default="50", help="pqlink SCHED_FIFO priority, 0 = normal scheduling (default 50)")
    e.add_argument("--spin-us", dest="spin_us", default="50", help="pqlink busy-wait before deadlines (default 50)")
    e.add_argument("--keep-awake", dest="keep_awake", default=None,
                   help="pqlink idle-priority spinners that keep CPUs from halting (default: one per CPU; 0 = off)")


def parse_link_options(args):
    """LinkSpec, TcpKnobs, backend and emulator options from args; BadInput names the option."""
    from pqbench.errors import BadInput
    try:
        return _link_options(args)
    except BadInput as e:
        if e.field in vars(args):  # the library's field names are the options' dests: rtt -> --rtt
            raise BadInput("--" + e.field.replace("_", "-"), e.detail) from None
        raise


def _link_options(args):
    from pqbench import units
    from pqbench.errors import BadInput
    from pqbench.testbed import EmulatorOptions, LinkSpec, TcpKnobs

    spec = LinkSpec.parse(rtt=args.rtt, delay_c2s=args.delay_c2s, delay_s2c=args.delay_s2c, jitter=args.jitter,
                          loss=args.loss, loss_c2s=args.loss_c2s, loss_s2c=args.loss_s2c, gemodel=args.gemodel,
                          rate=args.rate, rate_c2s=args.rate_c2s, rate_s2c=args.rate_s2c, queue=args.queue,
                          queue_bytes=args.queue_bytes, overhead=args.overhead, reorder=args.reorder,
                          mtu=args.mtu, seed=args.seed, trace_up=getattr(args, "trace_up", None),
                          trace_down=getattr(args, "trace_down", None), aqm=getattr(args, "aqm", None),
                          middlebox=getattr(args, "middlebox", None))
    tcp = TcpKnobs.parse(initcwnd=args.initcwnd, initrwnd=args.initrwnd, congctl=args.congctl)
    if args.backend not in BACKEND_CHOICES:
        raise BadInput("backend", f"{args.backend!r} is not one of {', '.join(BACKEND_CHOICES)}")
    fifo = units.integer("fifo", args.fifo, minimum=0, maximum=99)
    spin = units.integer("spin_us", args.spin_us, minimum=0, maximum=10000)
    keep = EmulatorOptions.keep_awake if args.keep_awake is None else \
        units.integer("keep_awake", args.keep_awake, minimum=0, maximum=64)
    emulator = EmulatorOptions(fifo_priority=fifo, spin_us=spin, keep_awake=keep,
                               capture_dir=getattr(args, "capture", None))
    return spec, tcp, emulator


def cmd_up(args) -> int:
    from pqbench.testbed import Testbed
    spec, tcp, emulator = parse_link_options(args)
    tb = Testbed(spec, tcp=tcp, backend=args.backend, emulator=emulator, name=args.name, detached=True)
    tb.up()
    info = tb.info()
    if args.json:
        print_json(info)
    else:
        print(f"{tb.name} up ({tb.backend_name}): {tb.spec.describe()}")
        print(f"  client: netns {tb.client_ns}, {tb.client_dev} {tb.client_addr}")
        print(f"  server: netns {tb.server_ns}, {tb.server_dev} {tb.server_addr}")
        knobs = " ".join(tb.tcp.route_args())
        if knobs:
            print(f"  TCP per route: {knobs}")
        print(f"  run inside with: ip netns exec {tb.client_ns} COMMAND; remove with: pqbench net down {tb.name}")
    return 0


def cmd_down(args) -> int:
    from pqbench.testbed import down
    final = down(args.name)
    if args.json:
        print_json({"name": args.name, "removed": True, "counters": final})
    else:
        print(f"{args.name} removed")
    return 0


def cmd_clean(args) -> int:
    from pqbench.testbed.testbed import require_root
    from pqbench.testbed import clean
    require_root()
    summary = clean(force=args.force)
    if args.json:
        print_json(summary)
    else:
        removed = sum(len(summary[k]) for k in ("namespaces", "devices", "processes"))
        print(f"removed {len(summary['namespaces'])} namespaces, {len(summary['devices'])} devices, "
              f"{len(summary['processes'])} processes" + ("" if removed else " (nothing left over)"))
        for k in summary["kept"]:
            print(f"kept {k['name']}: in use by running pid {k['owner_pid']} (--force removes it too)")
    return 0


def cmd_list(args) -> int:
    from pqbench.testbed import running
    recs = running()
    if args.json:
        print_json(recs)
    else:
        for r in recs:
            print(f"{r['name']} {r.get('backend')} client {r['client']['addr']} server {r['server']['addr']}")
    return 0


def cmd_calibrate(args) -> int:
    from pqbench import units
    from pqbench.testbed.calibrate import calibrate, summary_lines
    from pqbench.testbed.testbed import require_root
    spec, tcp, emulator = parse_link_options(args)
    loss_packets = units.integer("--packets", args.packets, minimum=100, maximum=10_000_000)
    floor_samples = units.integer("--samples", args.samples, minimum=10, maximum=100_000)
    goodput_s = units.duration_ms("--goodput-time", args.goodput_time, allow_zero=False) / 1000
    require_root()
    progress = None if args.json else (lambda msg: print(f"[calibrate] {msg}", file=sys.stderr, flush=True))
    report = calibrate(spec, tcp=tcp, backend=args.backend, emulator=emulator, floor_samples=floor_samples,
                       loss_packets=loss_packets, goodput_seconds=goodput_s, progress=progress)
    if args.json:
        print_json(report)
    else:
        print("\n".join(summary_lines(report)))
    return 0


def register(subparsers) -> None:
    net = subparsers.add_parser("net", help="the network testbed: namespaces joined by an emulated link")
    sub = net.add_subparsers(dest="net_command", required=True, parser_class=type(net))

    up = sub.add_parser("up", help="create a testbed and leave it running")
    add_linkspec_options(up)
    up.add_argument("--name", help="testbed name pqb-XXXX (default: random)")
    up.add_argument("--capture", metavar="DIR",
                    help="pqlink: write link-c2s.pcap, link-s2c.pcap and drops.log (every drop) into DIR")
    up.add_argument("--json", action="store_true")
    up.set_defaults(func=cmd_up)

    cal = sub.add_parser("calibrate", help="measure floor, RTT, loss and goodput through a fresh link")
    add_linkspec_options(cal)
    cal.add_argument("--packets", default="20000", help="UDP datagrams per direction for the loss check")
    cal.add_argument("--samples", default="200", help="TCP connects for the floor")
    cal.add_argument("--goodput-time", dest="goodput_time", default="3s", help="length of each goodput transfer")
    cal.add_argument("--json", action="store_true")
    cal.set_defaults(func=cmd_calibrate)

    down = sub.add_parser("down", help="remove a testbed made by `net up`")
    down.add_argument("name")
    down.add_argument("--json", action="store_true")
    down.set_defaults(func=cmd_down)

    clean = sub.add_parser("clean", help="remove every leftover pqb namespace, device and emulator process")
    clean.add_argument("--force", action="store_true", help="also testbeds of pqbench processes still running")
    clean.add_argument("--json", action="store_true")
    clean.set_defaults(func=cmd_clean)

    ls = sub.add_parser("list", help="testbeds in the registry")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)
