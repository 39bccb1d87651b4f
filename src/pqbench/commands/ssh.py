"""`pqbench ssh`: SSH handshakes over an emulated link, the contract of `pqbench handshake`."""

import sys

from pqbench import endpoints, handshake, units
from pqbench.cli import print_json
from pqbench.commands.net import add_linkspec_options, parse_link_options


def register(sub):
    p = sub.add_parser("ssh", help="measure SSH handshakes (to the client's NEWKEYS) for one key exchange and host "
                                   "key over an emulated link")
    p.add_argument("--kex", required=True, help="SSH key exchange (e.g. mlkem768x25519-sha256)")
    p.add_argument("--hostkey", required=True, help="host key algorithm (e.g. ssh-ed25519, ssh-mldsa-44)")
    p.add_argument("-n", default="100", help="samples in total (default 100)")
    p.add_argument("--parallel", default="1", help="client processes at once (default 1), or auto")
    p.add_argument("--max-bias", dest="max_bias", default="0.02",
                   help="with --parallel auto: the most CPU queueing may add, as a fraction of the clean time")
    p.add_argument("--server", help="server stack: gossh (Go x/crypto/ssh, the only one with ML-DSA host keys) "
                                    "or openssh (default: openssh, gossh for ML-DSA host keys)")
    p.add_argument("--client", default="gossh", help="client stack: gossh (sshtimer) or openssh (ssh, timed by "
                                                     "sshtimer's relay); default gossh")
    p.add_argument("--timeout", default="10s", help="per-sample timeout (default 10s)")
    p.add_argument("--json", action="store_true", help="print the result object (the handshake contract)")
    add_linkspec_options(p)
    p.set_defaults(func=handle)


def config_from_args(args) -> handshake.HandshakeConfig:
    spec, tcp, emulator = parse_link_options(args)
    server = args.server or endpoints.default_pair("ssh", args.hostkey)[0]
    return handshake.HandshakeConfig(
        kex=args.kex, sig=args.hostkey, protocol="ssh", server=server, client=args.client, spec=spec, tcp=tcp,
        emulator=emulator, backend=args.backend, n=units.integer("-n", args.n, minimum=1, maximum=10_000_000),
        parallel="auto" if args.parallel == "auto" else units.integer("--parallel", args.parallel, minimum=1,
                                                                        maximum=256),
        max_bias=units.fraction("--max-bias", args.max_bias, minimum=0.001, maximum=0.5),
        timeout_ms=int(units.duration_ms("--timeout", args.timeout, allow_zero=False)))


def handle(args) -> int:
    cfg = config_from_args(args)
    progress = None if args.json else (lambda msg: print(f"[ssh] {msg}", file=sys.stderr, flush=True))
    result = handshake.run(cfg, progress=progress)
    if args.json:
        print_json(result)
    else:
        print(handshake.format_summary(result))
    return 1 if result["summary"]["ok"] == 0 else 0
