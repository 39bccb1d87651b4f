from pqbench.cluster import security, worker
from pqbench.errors import BadInput


def register(sub):
    p = sub.add_parser("worker", help="serve as a measuring node of a Dask cluster (`run --cluster` sends it cells)")
    p.add_argument("scheduler", metavar="SCHEDULER", help="the Dask scheduler's address, e.g. tcp://10.0.0.1:8786 "
                                                          "(tls://… with the TLS options)")
    p.add_argument("--slots", type=int, default=1, help="cells this node measures at once (default 1: one cell at "
                                                        "a time, as a local run without loss does)")
    p.add_argument("--name", help="the worker's name at the scheduler (default: the host name, the node's name in "
                                  "the store); names must be unique")
    security.add_arguments(p)
    p.set_defaults(func=handle)


def handle(args) -> int:
    if args.slots < 1:
        raise BadInput("--slots", f"{args.slots} is not a positive number of cells")
    return worker.serve(args.scheduler, slots=args.slots, name=args.name,
                        security=security.from_arguments(args, role="worker"))
