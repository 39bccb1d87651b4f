from pqbench import catalog
from pqbench.cli import print_json


def register(sub):
    p = sub.add_parser("algorithms", help="the algorithm catalog with sizes, levels, code points, availability")
    p.add_argument("--kind", choices=catalog.KINDS, help="only key exchange (kem) or signatures (sig)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=handle)


def handle(args) -> int:
    rows = []
    for alg in catalog.algorithms(args.kind):
        avail = catalog.availability(alg)
        rows.append((alg, avail))
    if args.json:
        print_json([{**alg.to_json(), "available": a.available, "tls": a.tls,
                     **({"unavailable_reason": a.reason} if a.reason else {})} for alg, a in rows])
        return 0
    head = f"{'name':<24} {'kind':<4} {'family':<22} {'lvl':>3} {'pk B':>7} {'ct/sig B':>8} " \
           f"{'code pt':>7}  {'source':<9} available here"
    print(head)
    print("-" * len(head))
    for alg, a in rows:
        second = alg.ct if alg.kind == "kem" else alg.sig
        cp = f"0x{alg.codepoint:04x}" if alg.codepoint is not None else "-"
        state = ("yes" if a.tls else "yes (no TLS)") if a.available else f"no: {a.reason}"
        print(f"{alg.name:<24} {alg.kind:<4} {alg.family:<22} {alg.level:>3} {alg.pk:>7} {second:>8} "
              f"{cp:>7}  {alg.source:<9} {state}")
    n_avail = sum(a.available for _, a in rows)
    print(f"\n{len(rows)} algorithms, {n_avail} available here")
    return 0
