from pqbench.machine import doctor
from pqbench.cli import print_json


def register(sub):
    p = sub.add_parser("doctor", help="what this machine can do: root, netns, TUN, netem, builds, versions")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=handle)


def handle(args) -> int:
    rep = doctor.report()
    if args.json:
        print_json(rep)
    else:
        print(doctor.format_report(rep))
    return 0
