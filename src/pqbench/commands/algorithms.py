from pqbench import endpoints
from pqbench.algorithms import catalog
from pqbench.cli import print_json

# A stack answers for pairs (kex, sig); an algorithm is shown against a partner every stack has.
PARTNER = {"tls": {"kem": "ecdsap256", "sig": "X25519"}, "ssh": {"kem": "ssh-ed25519", "sig": "curve25519-sha256"}}


def register(sub):
    p = sub.add_parser("algorithms", help="the algorithm catalog with sizes, levels, code points, availability "
                                          "per stack")
    p.add_argument("--kind", choices=catalog.KINDS, help="only key exchange (kem) or signatures (sig)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=handle)


def stack_support(alg: catalog.Algorithm) -> dict:
    """Per stack: can its server and its client use alg (by its name in the stack's protocol, with a
    classical partner), and if not why. SSH stacks answer for the algorithm's first SSH name."""
    out = {}
    for name in endpoints.names():
        st = endpoints.get(name)
        own = alg.name if st.protocol == "tls" else next(iter(alg.ssh_names()), None)
        if own is None:
            continue
        partner = PARTNER[st.protocol]
        kex, sig = (own, partner["kem"]) if alg.kind == "kem" else (partner["sig"], own)
        why = {role: st.capabilities().unsupported(kex, sig, role) for role in ("server", "client")}
        out[name] = {"protocol": st.protocol, "name": own, "server": why["server"] is None,
                     "client": why["client"] is None,
                     **({"reason": why["server"] or why["client"]} if why["server"] or why["client"] else {})}
    return out


def _stacks_cell(support: dict, protocol: str) -> str:
    parts = []
    for name, s in support.items():
        if s["protocol"] != protocol:
            continue
        if s["server"] and s["client"]:
            parts.append(name)
        elif s["server"] or s["client"]:
            parts.append(f"{name} ({'server' if s['server'] else 'client'} only)")
    return ", ".join(parts) or "–"


def handle(args) -> int:
    rows = [(alg, catalog.availability(alg), stack_support(alg)) for alg in catalog.algorithms(args.kind)]
    if args.json:
        print_json([{**alg.to_json(), "available": a.available, "tls": a.tls,
                     **({"unavailable_reason": a.reason} if a.reason else {}), "stacks": st} for alg, a, st in rows])
        return 0
    head = f"{'name':<24} {'kind':<4} {'family':<22} {'lvl':>3} {'pk B':>7} {'ct/sig B':>8} " \
           f"{'code pt':>7}  {'source':<9} {'available here':<16} {'TLS stacks (server and client)':<40} SSH name: stacks"
    print(head)
    print("-" * len(head))
    for alg, a, st in rows:
        second = alg.ct if alg.kind == "kem" else alg.sig
        cp = f"0x{alg.codepoint:04x}" if alg.codepoint is not None else "-"
        state = ("yes" if a.tls else "yes (no TLS)") if a.available else f"no: {a.reason}"
        stacks = _stacks_cell(st, "tls") if a.available else ""
        ssh = ", ".join(alg.ssh_names())
        ssh += f": {_stacks_cell(st, 'ssh')}" if ssh else ""
        print(f"{alg.name:<24} {alg.kind:<4} {alg.family:<22} {alg.level:>3} {alg.pk:>7} {second:>8} "
              f"{cp:>7}  {alg.source:<9} {state:<16} {stacks:<40} {ssh}")
    n_avail = sum(a.available for _, a, _ in rows)
    print(f"\n{len(rows)} algorithms, {n_avail} available here; why a stack lacks one: --json (stacks.*.reason)")
    return 0
