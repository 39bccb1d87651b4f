import shutil
import sys
from pathlib import Path

from pqbench import protocol as proto
from pqbench import units
from pqbench.analysis import single
from pqbench.cli import print_json
from pqbench.commands import axis_options
from pqbench.commands.net import add_linkspec_options, parse_link_options
from pqbench.endpoints.offer import parse_cert_compression, parse_offer
from pqbench.errors import BadInput
from pqbench.measure.single import new_run_dir
from pqbench.remote.target import DEFAULT_RATE, MAX_RATE, make


def register(sub):
    p = sub.add_parser("handshake", help="measure TLS 1.3 handshakes for one key exchange and signature "
                                         "over an emulated link, or to a target server over the real network")
    p.add_argument("--kex", help="key exchange group (e.g. X25519MLKEM768); with --offer: optional, the group the "
                                 "offer expects (default: its first key share)")
    p.add_argument("--sig", help="signature algorithm of the certificate chain (e.g. mldsa44); with --target: "
                                 "optional, a label for the target's own chain")
    add_sampling_options(p)
    add_target_options(p, "HOST:PORT")
    p.add_argument("--page", help="after the handshake GET a page of this size (e.g. 10k)")
    p.add_argument("--requests", help="GET the page this many times on the connection (default page 1k)")
    p.add_argument("--resume", action="store_true", help="TLS 1.3 resumption (psk_dhe_ke) with a ticket; with "
                                                         "--page: then GET the page")
    p.add_argument("--early-data", dest="early_data", action="store_true",
                   help="resume and send the GET for the page (--page, default 1k) as 0-RTT early data; the server "
                        "accepts early data")
    p.add_argument("--cert-compression", dest="cert_compression", default="none",
                   help="certificate compression algorithms the client offers (RFC 8879): none (default), all, or "
                        "zlib, brotli, zstd (comma-separated, preferred first)")
    p.add_argument("--server-compression", dest="server_compression", choices=("on", "off"),
                   help="the server compresses its chain for a client that offers compression (default: on with "
                        "--cert-compression, else off)")
    p.add_argument("--warmup", default="0", help="connections per worker before recording (default 0)")
    p.add_argument("--server", help="server stack (default: the protocol's, openssl: nginx); see `pqbench algorithms`")
    p.add_argument("--client", help="client stack (default: the protocol's, openssl: pqtimer)")
    p.add_argument("--protocol", default=proto.DEFAULT,
                   help=f"the protocol: {', '.join(proto.names())} (default {proto.DEFAULT}; `pqbench ssh` is SSH's own "
                        "command, with its names)")
    p.add_argument("--samples", type=Path, help="also write the raw samples (JSON lines) to this file")
    axis_options.add(p, own=OWN_AXES)
    p.set_defaults(func=handle)


# The axes handshake takes through options of its own: certificate compression, as what the client offers
# (--cert-compression) and whether the server compresses (--server-compression).
OWN_AXES = ("compress",)


def add_sampling_options(p) -> None:
    """What `handshake` and `ssh` share: how many samples, how many clients at once, the timeout, the
    output, and the link."""
    p.add_argument("-n", default="100", help="samples in total (default 100)")
    p.add_argument("--parallel", default="1", help="client processes making connections at once (default 1), or "
                                                   "auto: add them while CPU queueing stays under --max-bias")
    p.add_argument("--max-bias", dest="max_bias", default="0.02",
                   help="with --parallel auto: the most CPU queueing may add, as a fraction of the clean time "
                        "(default 0.02)")
    p.add_argument("--timeout", default="10s", help="per-sample timeout (default 10s)")
    p.add_argument("--json", action="store_true", help="print the result object (DESIGN.md contract)")
    p.add_argument("--keep", action="store_true", help="keep the run folder under build/runs (raw samples, server "
                                                       "config and logs); by default it goes when no sample failed")
    add_linkspec_options(p)


def add_target_options(p, form: str) -> None:
    """What `handshake` and `ssh` take to measure a server pqbench did not start."""
    p.add_argument("--target", metavar=form, help="measure this server (one pqbench did not start) over the host's "
                                                  "network instead of an emulated link; pqbench contacts nothing else")
    p.add_argument("--ca", help="with --target: the CA certificate (PEM; SSH: the host's public key) to verify it "
                                "with; without, the verification result (SSH: the host key's fingerprint) is recorded "
                                "and not enforced")
    p.add_argument("--servername", help="with --target: the name to ask for and verify (default: the target's host)")
    p.add_argument("--netns", help="with --target: run the client in this existing network namespace")
    p.epilog = (f"With --target, --rate is the pace: connections per second at most, one at a time (default "
                f"{DEFAULT_RATE:g}); the other link options do not apply.")


def target_config(args, protocol: str) -> dict:
    """The RunOptions fields of add_target_options, checked; {} without --target."""
    if not args.target:
        for option in ("ca", "servername", "netns"):
            if getattr(args, option):
                raise BadInput(f"--{option}", "applies with --target only")
        return {}
    # --rate is the link's bandwidth on the emulated link; a target's link is real, so there it is the pace
    rate = units.number("--rate", args.rate or DEFAULT_RATE, minimum=0.01, maximum=MAX_RATE)
    args.rate = None
    target = make("--target", args.target, ca=args.ca, server_name=args.servername, sig=getattr(args, "sig", None),
                  protocol=protocol)
    return {"target": target, "rate": rate, "netns": args.netns}


def sampling_config(args) -> dict:
    """The RunOptions fields of add_sampling_options, checked."""
    link, tcp, emulator = parse_link_options(args)
    return dict(link=link, tcp=tcp, emulator=emulator, backend=args.backend,
                n=units.integer("-n", args.n, minimum=1, maximum=10_000_000),
                parallel="auto" if args.parallel == "auto" else units.integer("--parallel", args.parallel, minimum=1,
                                                                                maximum=256),
                max_bias=units.fraction("--max-bias", args.max_bias, minimum=0.001, maximum=0.5),
                timeout_ms=int(units.duration_ms("--timeout", args.timeout, allow_zero=False)))


def run_and_print(cell, options: single.RunOptions, args, tag: str) -> dict:
    """Runs the cell with progress on stderr (unless --json) and prints the result; returns it. The run
    folder stays when asked (--keep), when a sample failed, or when interrupted (Ctrl-C: the samples
    so far are summarised, and the folder holds them)."""
    progress = None if args.json else (lambda msg: print(f"[{tag}] {msg}", file=sys.stderr, flush=True))
    run_dir = new_run_dir()
    try:
        result = single.run(cell, options, run_dir, progress=progress)
    except KeyboardInterrupt:
        result = single.interrupted(cell, options, run_dir)
        _print(result, args)
        raise
    if getattr(args, "samples", None):
        args.samples.write_text((run_dir / "samples.jsonl").read_text())
    if not args.keep and result["summary"]["failures"] == 0:
        shutil.rmtree(run_dir, ignore_errors=True)
        result["run_dir"] = None
    _print(result, args)
    return result


def _print(result: dict, args) -> None:
    if args.json:
        print_json(result)
    else:
        print(single.format_summary(result))


def config_from_args(args):
    """(the Cell, the RunOptions) of the command line, checked: the cell a spec would make of these options."""
    mode = "handshake"
    requests = 1
    if args.resume:
        mode = "resume"
    if args.page:
        mode = "resume_page" if args.resume else "page"
    if args.requests is not None:
        requests = units.integer("--requests", args.requests, minimum=1, maximum=100000)
        mode = "requests"
        if args.resume:
            raise BadInput("--resume", "cannot be combined with --requests")
    if args.early_data:
        if args.requests is not None or args.resume:
            raise BadInput("--early-data", "resumes and sends one GET itself: not with --resume or --requests")
        mode = "early"
    protocol = proto.get(args.protocol, "--protocol")
    target = target_config(args, protocol.name)
    if not args.sig and not target:
        if protocol.is_default:
            raise BadInput("--sig", "is required (a signature algorithm, e.g. mldsa44), unless --target names a server")
        args.sig = protocol.classical[1]  # DTLS, IKEv2: the key exchange is the question; the chain the classical one
    page = None
    if args.page or mode in ("requests", "early"):
        page = units.page("--page", args.page or "1k")
    axes = axis_options.values(args, own=OWN_AXES)
    offer = parse_offer(axes["offer"], "--offer") if "offer" in axes else None
    if offer is None and not args.kex:
        raise BadInput("--kex", "is required (a key exchange group, e.g. X25519MLKEM768), unless --offer names the groups")
    if axes.get("chain") is not None and "chain_bytes" in axes:
        raise BadInput("--chain-bytes", f"pads a plain chain: not with --chain {args.chain}")
    cert_compression = parse_cert_compression(args.cert_compression, "--cert-compression")
    server_compression = args.server_compression or ("off" if cert_compression == "none" else "on")
    axes.update(offer=offer.notation() if offer else None,
                compress=None if cert_compression == "none" else cert_compression)
    options = single.RunOptions(**target, warmup=units.integer("--warmup", args.warmup, minimum=0, maximum=100000),
                                compress_certs=server_compression == "on", **sampling_config(args))
    cell = single.cell_of(args.kex or offer.shares[0], args.sig or "", options, protocol=protocol.name,
                          server=args.server or protocol.default_pair[0], client=args.client or protocol.default_pair[1],
                          mode=mode, page=page, requests=requests, values=axes)
    return cell, options


def handle(args) -> int:
    result = run_and_print(*config_from_args(args), args, "handshake")
    return 1 if result["summary"]["ok"] == 0 else 0
