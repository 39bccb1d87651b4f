from pqbench import protocol as proto
from pqbench import endpoints
from pqbench.algorithms import catalog
from pqbench.cli import print_json

# A stack answers for pairs (kex, sig); an algorithm is shown against a partner every stack has.


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
        p = proto.get(st.protocol)
        own = next(iter(alg.names_in(p.name)), None)
        if own is None:
            continue
        classical_kex, classical_sig = p.classical
        kex, sig = (own, classical_sig) if alg.kind == "kem" else (classical_kex, own)
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


def aligned(header: list[str], rows: list[list[str]], numeric=frozenset()) -> list[str]:
    """The table's lines, each column as wide as its widest entry (numbers right-aligned), the last
    column left free, a rule under the header."""
    widths = [max(len(r[k]) for r in [header, *rows]) for k in range(len(header) - 1)]

    def line(r):
        cells = [c.rjust(w) if k in numeric else c.ljust(w) for k, (c, w) in enumerate(zip(r, widths))]
        return "  ".join(cells + [r[-1]]).rstrip()
    head = line(header)
    return [head, "-" * len(head), *map(line, rows)]


def handle(args) -> int:
    rows = [(alg, catalog.availability(alg), stack_support(alg)) for alg in catalog.algorithms(args.kind)]
    if args.json:
        print_json([{**alg.to_json(), "available": a.available, "tls": a.tls,
                     **({"unavailable_reason": a.reason} if a.reason else {}), "stacks": st} for alg, a, st in rows])
        return 0
    header = ["name", "kind", "family", "lvl", "pk B", "ct/sig B", "code pt", "source", "available here",
              "TLS stacks (server and client)", "SSH name: stacks"]
    table = []
    for alg, a, st in rows:
        ssh = ", ".join(alg.ssh_names())
        table.append([alg.name, alg.kind, alg.family, str(alg.level), str(alg.pk),
                      str(alg.ct if alg.kind == "kem" else alg.sig),
                      f"0x{alg.codepoint:04x}" if alg.codepoint is not None else "-", alg.source,
                      ("yes" if a.tls else "yes (no TLS)") if a.available else f"no: {a.reason}",
                      _stacks_cell(st, "tls") if a.available else "",
                      ssh + (f": {_stacks_cell(st, 'ssh')}" if ssh else "")])
    print("\n".join(aligned(header, table, numeric={3, 4, 5})))
    n_avail = sum(a.available for _, a, _ in rows)
    print(f"\n{len(rows)} algorithms, {n_avail} available here; why a stack lacks one: --json (stacks.*.reason)")
    return 0
