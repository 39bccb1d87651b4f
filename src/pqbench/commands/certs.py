from pathlib import Path

from pqbench.algorithms import certs
from pqbench.cli import print_json
from pqbench.endpoints import ondemand
from pqbench.units import integer


def register(sub):
    p = sub.add_parser("certs", help="make a root → intermediates → leaf certificate chain")
    p.add_argument("--sig", required=True, help="signature algorithm of the leaf (e.g. mldsa44)")
    p.add_argument("--ca-sig", help="signature algorithm of the root and intermediates (default: --sig)")
    p.add_argument("--intermediates", default="0", help="number of intermediate CAs (0..8)")
    p.add_argument("--server-name", default=certs.DEFAULT_SERVER_NAME, help="DNS name in the leaf's SAN")
    p.add_argument("--out", required=True, type=Path, help="directory for keys and certificates")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=handle)


def handle(args) -> int:
    n = integer("--intermediates", args.intermediates, minimum=0, maximum=8)
    ondemand.ensure([], algorithms=[args.sig, args.ca_sig])  # liboqs's catalog, the first time it is needed
    chain = certs.make_chain(args.sig, args.out, ca_sig=args.ca_sig, intermediates=n,
                             server_name=args.server_name)
    if args.json:
        print_json(chain.to_json())
        return 0
    parts = " + ".join(f"{k} {v}" for k, v in chain.der_sizes.items() if k != "root")
    print(f"chain {chain.ca_sig} root → {n} intermediate(s) → {chain.sig} leaf in {chain.directory}")
    print(f"  sent by the server: {chain.sent_bytes} bytes DER ({parts}); root {chain.der_sizes['root']} bytes")
    print(f"  server: {chain.chain_file} + {chain.leaf_key} (0600); clients trust {chain.root_cert}")
    return 0
