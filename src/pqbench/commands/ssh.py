"""`pqbench ssh`: SSH handshakes over an emulated link, the contract of `pqbench handshake`."""

from pqbench import endpoints
from pqbench.analysis import single
from pqbench.commands import axis_options
from pqbench.commands.handshake import add_sampling_options, add_target_options, run_and_print, sampling_config, \
    target_config
from pqbench.errors import BadInput


def register(sub):
    p = sub.add_parser("ssh", help="measure SSH handshakes (to the client's NEWKEYS) for one key exchange and host "
                                   "key over an emulated link")
    p.add_argument("--kex", required=True, help="SSH key exchange (e.g. mlkem768x25519-sha256)")
    p.add_argument("--hostkey", help="host key algorithm (e.g. ssh-ed25519, ssh-mldsa-44); with --target: optional, "
                                     "a label (the server chooses among what sshtimer offers)")
    p.add_argument("--server", help="server stack: gossh (Go x/crypto/ssh, the only one with ML-DSA host keys) "
                                    "or openssh (default: openssh, gossh for ML-DSA host keys)")
    p.add_argument("--client", default="gossh", help="client stack: gossh (sshtimer) or openssh (ssh, timed by "
                                                     "sshtimer's relay); default gossh")
    add_sampling_options(p)
    axis_options.add(p, protocol="ssh")
    add_target_options(p, "ssh://HOST:PORT")
    p.set_defaults(func=handle)


def config_from_args(args):
    """(the Cell, the RunOptions) of the command line, checked."""
    args.sig = args.hostkey  # a target's label, as --sig is for TLS
    target = target_config(args, "ssh")
    if not target and not args.hostkey:
        raise BadInput("--hostkey", "is required (a host key algorithm, e.g. ssh-ed25519), unless --target names a server")
    server = args.server or endpoints.default_pair("ssh", args.hostkey or "")[0]  # a target's overrides it
    options = single.RunOptions(**target, **sampling_config(args))
    return single.cell_of(args.kex, args.hostkey or "", options, protocol="ssh", server=server, client=args.client,
                          values=axis_options.values(args, protocol="ssh")), options


def handle(args) -> int:
    result = run_and_print(*config_from_args(args), args, "ssh")
    return 1 if result["summary"]["ok"] == 0 else 0
