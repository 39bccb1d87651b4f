"""The report's tables as plain data (title, headers, rows), rendered by html.py and markdown.py alike."""

from __future__ import annotations

import collections
import dataclasses
import json
import math

from pqbench import axis
from pqbench import protocol as proto
from pqbench.analysis.cells import CONDITION_FIELDS
from pqbench.experiment.condition import condition as cell_condition, describe
from pqbench.analysis import Analysis, CellStats, page_bytes
from pqbench.analysis.paired import value as paired_value
from pqbench.analysis.warnings import TITLES


@dataclasses.dataclass
class Table:
    id: str
    title: str
    headers: list
    rows: list  # lists of strings
    note: str = ""


def ms(x) -> str:
    """Milliseconds with precision that suits their size."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    x = float(x)
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"


def with_ci(est_lo_hi) -> str:
    est, lo, hi = est_lo_hi
    return f"{ms(est)} [{ms(lo)}, {ms(hi)}]"


def pct(p) -> str:
    if p is None or not math.isfinite(p):
        return "–"
    return f"{100 * p:.1f} %" if p >= 0.001 or p == 0 else f"{100 * p:.2g} %"


def condition(c: CellStats) -> str:
    return cell_condition(c.row)


def ordered(a: Analysis) -> list[CellStats]:
    """Cells by link condition (numerically: 5.6 ms before 31.1 ms), then algorithm in spec order."""
    labels = a.labels()

    def key(c):
        r = c.row
        return (r.get("scenario") or "", r.get("rtt_ms") or 0, r.get("loss") or 0, r.get("rate_mbit") or 0,
                r.get("mtu") or 0, r.get("initcwnd") or 0, r.get("mode") or "", page_bytes(r.get("page")) or 0,
                r.get("requests") or 0, r.get("pad") or 0, labels.index(a.label(c)) if a.label(c) in labels else 0)
    return sorted(a.cells, key=key)


def summary(a: Analysis) -> Table:
    run = a.run
    done = len(a.cells)
    skipped = sum(1 for r in a.not_run if r.get("status") == "skipped")
    failed = len(a.not_run) - skipped
    samples = sum(c.n for c in a.cells)
    spec = run.get("spec") if isinstance(run.get("spec"), dict) else {}
    rows = [["run", str(run.get("run_id"))], ["name", str(run.get("name") or "")],
            ["status", str(run.get("status"))], ["created", str(run.get("created"))],
            ["finished", str(run.get("finished") or "–")],
            ["cells", f"{done} measured, {skipped} skipped, {failed} failed without samples"
                      + (f", {len(a.load)} load cells" if a.load else "") + _not_yet(run, done + len(a.not_run) + len(a.load))],
            ["samples", f"{samples:,} ({sum(c.failures for c in a.cells):,} failed)"],
            ["TCP congestion control", congestion_control(a)]]
    if spec.get("description"):
        rows.insert(2, ["description", str(spec["description"])])
    return Table("summary", "Run", ["", ""], rows)


def congestion_control(a: Analysis) -> str:
    """The congestion control both ends' connections really used, per cell as the kernel reported it
    ("cubic at both ends in all 18 cells"); it changes what loss costs, and a host's default (bbr
    here) is not what the published studies ran (cubic)."""
    pairs = collections.Counter((c.row.get("cc_client"), c.row.get("cc_server")) for c in a.cells)
    if not pairs:
        return "–"
    parts = []
    for (client, server), n in pairs.most_common():
        which = "not recorded (a run from before pqbench recorded it)" if client is None else \
            f"{client} at both ends" if client == server else f"client {client}, server {server}"
        parts.append(f"{which} in {'all ' if len(pairs) == 1 and n > 1 else ''}{n} cell{'s' * (n != 1)}")
    asked = sorted({c.row.get("congctl") for c in a.cells if c.row.get("congctl")})
    return "; ".join(parts) + (f" (the spec asked for {', '.join(asked)})" if asked else " (the host's default)")


def _not_yet(run: dict, stored: int) -> str:
    """How many of the run's cells were never reached (an interrupted run, to be resumed)."""
    remaining = len(run.get("cell_order") or []) - stored
    return f", {remaining} not yet measured (`pqbench run SPEC --resume` continues)" if remaining > 0 else ""


def paired(a: Analysis) -> Table:
    rows = []
    rank = {id(c): i for i, c in enumerate(ordered(a))}
    for p in sorted(a.paired, key=lambda p: (p.axis, rank.get(id(p.other), 0))):
        sig = "yes" if p.significant else "no"
        where = condition(p.other)
        if p.axis in ("server", "client"):  # what the stacks were compared on
            other_side = "client" if p.axis == "server" else "server"
            where = f"{p.other.row.get('kex')} + {p.other.row.get('sig')} ({other_side} {p.other.row.get(other_side)}), {where}"
        elif p.axis == "transport":
            where = f"{p.other.row.get('kex')} + {p.other.row.get('sig')}, {where}"
        medians = p.medians or (p.baseline.p50, p.other.p50)
        where += " (on the wire's clock)" if p.clock == "wire" else ""
        rows.append([p.axis, where,
                     str(paired_value(p.baseline, p.axis)), str(paired_value(p.other, p.axis)), ms(medians[0]),
                     ms(medians[1]),
                     f"{'+' if p.diff[0] >= 0 else ''}{ms(p.diff[0])} [{ms(p.diff[1])}, {ms(p.diff[2])}]",
                     f"{100 * p.relative:+.1f} %" if math.isfinite(p.relative) else "–", sig])
    return Table("paired", "Paired differences (same link condition and loss seed)",
                 ["differs in", "condition", "baseline", "algorithm", "baseline p50", "p50", "Δ median ms [95 % CI]",
                  "Δ %", "CI excludes 0"], rows,
                 "Cells equal in everything but the key exchange (or the signature, the server stack, the client "
                 "stack) are compared with the group's classical baseline (for stacks: openssl); the CI is a "
                 "bootstrap of the difference of medians." + (
                     " Where either cell is reported on the wire's clock (its client stood beyond what this machine "
                     "allows), both are compared on the wire's." if any(p.clock == "wire" for p in a.paired) else ""))


def stacks(a: Analysis) -> Table | None:
    """Per cell of a run that measures other stacks than openssl's: what each server × client pair
    negotiated, and how the server's first flight crossed the link (segments; PSH segments = the
    writes the server's library flushed it in: the buffering effect)."""
    pairs = {(c.row.get("server") or "openssl", c.row.get("client") or "openssl") for c in a.cells}
    if pairs <= {("openssl", "openssl")}:
        return None
    rows = []
    for c in ordered(a):
        w = c.wire
        rows.append([str(c.row.get("server") or "openssl"), str(c.row.get("client") or "openssl"),
                     f"{c.row.get('kex')} + {c.row.get('sig')}", cell_condition(c.row, short=True),
                     ", ".join(c.groups) or "–", ", ".join(c.sigalgs) or "–",
                     f"{w['server_flight_packets']:.0f}" if w.get("server_flight_packets") is not None else "–",
                     f"{w['server_flight_pushes']:.0f}" if w.get("server_flight_pushes") is not None else "–",
                     ms(c.p50)])
    return Table("stacks", "Stacks: what each server × client pair negotiated, and the server's first flight",
                 ["server", "client", "asked", "condition", "negotiated group", "negotiated signature",
                  "server flight segments", "… in writes (PSH)", "p50"], rows,
                 "Segments and writes are medians over the cell's samples, from the emulator's record at the "
                 "client side of the link (no record with netem). A library that writes its flight in more "
                 "pieces than needed can spread it over more segments and round trips.")


def _shared_condition(c: CellStats, side: list) -> tuple:
    """The cell's condition as the protocols table pairs it: its protocol's own transport as none named (TLS over
    TCP beside DTLS over UDP), and no axis that not every protocol of the table has (DTLS's cookie)."""
    *fields, seed = c.condition()
    row = dict(zip(CONDITION_FIELDS, fields))
    for a in axis.registered():
        if a.name in row and (not all(a.for_protocol(p.name) for p in side)
                              or a.default_for and row[a.name] == a.default_of(proto.of(c.row).name)):
            row[a.name] = None
    return (*row.values(), seed)


def protocols(a: Analysis) -> Table | None:
    """The protocols side by side where a run measured more than one on the same link (TLS and SSH): each key
    exchange's time in each protocol and what it costs over the protocol's classical baseline (the paired
    difference)."""
    measured = {proto.of(c.row).name for c in a.cells}
    side = [p for p in proto.registered() if p.name in measured]
    if len(side) < 2:
        return None
    kex_diff = {id(p.other): p for p in a.paired if p.axis == "kex"}
    groups: dict[tuple, dict] = {}
    for c in ordered(a):
        kex, sig = _catalog_name(c.row.get("kex"), "kem"), _catalog_name(c.row.get("sig"), "sig")
        groups.setdefault((_shared_condition(c, side), sig, kex), {})[proto.of(c.row).name] = c
    rows = []
    for (_, sig, kex), per in groups.items():
        if len(per) < len(side):
            continue
        row = [condition(per[side[0].name]), sig, kex]
        for p in side:
            c = per[p.name]
            d = kex_diff.get(id(c))
            delta = f"{'+' if d.diff[0] >= 0 else ''}{ms(d.diff[0])} [{ms(d.diff[1])}, {ms(d.diff[2])}]" if d else "baseline"
            row += [f"{c.row.get('kex')} + {c.row.get('sig')}", _pair(c), ms(c.p50), delta]
        rows.append(row)
    openssh = any("openssh" in _pair(c) for per in groups.values() for c in per.values())
    ends = f"{side[0].label}'s time ends at {side[0].handshake_end}, " + \
        ", ".join(f"{p.label}'s at {p.handshake_end}" for p in side[1:])
    return Table("protocols", f"{' vs '.join(p.label for p in side)}: the same key exchange and signature on the "
                              "same link, each with the stacks that measured it",
                 ["condition", "signature (catalog)", "key exchange (catalog)",
                  *(f"{p.label} {col}" for p in side for col in ("cell", "server/client", "p50",
                                                                  "Δ vs classical [95 % CI]"))], rows,
                 f"{ends}. The Δ columns are each protocol's paired difference against its classical key "
                 "exchange at the same signature and link; a size-only host key (sizeonly-…) has only the "
                 "signature's sizes. The times compare stacks as much as protocols: read each with the stacks "
                 "named beside it." + (OPENSSH_NOTE if openssh else ""))


# Where OpenSSH's sshd spends its extra round trip and milliseconds, from the phases and the wire record
# (curve25519-sha256 + ssh-ed25519 at 31.1 ms RTT, medians: 134.0 ms against Go's server's 95.2 ms).
OPENSSH_NOTE = (" OpenSSH's sshd takes one round trip and about 8 ms more than Go's SSH server, whatever the "
                "algorithms: it sends its KEXINIT only after the client's has arrived (Go's server sends it with "
                "its identification, so the two cross: one round trip saved); it starts a process per connection "
                "(sshd forks and executes sshd-session, which loads its configuration and host keys: about 5 ms "
                "before its identification leaves); and its key exchange reply is about 3 ms slower (the host key "
                "signature comes from its privilege-separation monitor). Compare protocols between the same "
                "kind of stacks, or read the SSH Δ columns, which cancel what the stack adds to every handshake.")


def _pair(c: CellStats) -> str:
    """"server/client" stacks of a cell."""
    return f"{c.row.get('server') or 'openssl'}/{c.row.get('client') or 'openssl'}"


def _catalog_name(name, kind: str) -> str:
    from pqbench.algorithms import catalog
    from pqbench.errors import BadInput
    try:
        return catalog.find(str(name), kind).name
    except BadInput:
        return str(name)


def cells(a: Analysis) -> Table:
    rows = []
    by_node = len({c.row.get("node") for c in a.cells}) > 1  # a run measured on several machines
    for c in ordered(a):
        bound = c.bound.total_ms if c.bound else None
        rows.append([a.label(c), condition(c) + (f" on {c.row.get('node')}" if by_node else ""), str(c.n),
                     f"{pct(c.failure_rate[0])} [{pct(c.failure_rate[1])}, {pct(c.failure_rate[2])}]",
                     ms(c.pct[5][0]), ms(c.pct[25][0]), with_ci(c.pct[50]), ms(c.pct[75][0]), with_ci(c.pct[95]),
                     ms(c.pct[99][0]), ms(c.mean), ms(bound),
                     f"{c.p50 / bound:.2f}" if bound and math.isfinite(c.p50) else "–", workers(c)])
    return Table("cells", "Per cell (ms; 95 % bootstrap CIs in brackets)",
                 ["algorithm", "condition", "n", "failed [Wilson CI]", "p5", "p25", "p50", "p75", "p95", "p99",
                  "mean", "lower bound", "p50 / bound", "workers"], rows,
                 "Times are the cell's metric: handshake completion for handshakes, the last byte of the "
                 "(last) response for page and request cells, from before TCP connect. Workers: pqtimer "
                 "processes at once (the most; with parallel = \"auto\" also the mean CPU load they made)."
                 + SIZE_ONLY_NOTE * any(_size_only(c) for c in a.cells))


SIZE_ONLY_NOTE = (" Size-only: an SSH host key named sizeonly-ALG has only ALG's sizes: an ed25519 host certificate "
                  "padded so that host key and signature take ALG's public key + signature bytes on the wire; "
                  "nothing computes ALG.")


def _size_only(c: CellStats) -> bool:
    from pqbench.algorithms import catalog
    return catalog.is_size_only(str(c.row.get("sig")))


def workers(c: CellStats) -> str:
    conc = c.row.get("concurrency")
    if not isinstance(conc, dict):
        return "–"
    load = conc.get("load_mean")
    return f"{conc.get('workers')}" + (f" (load {load:.0%})" if load is not None else "")


def wire(a: Analysis) -> Table:
    rows = []
    for c in ordered(a):
        w = c.wire
        rows.append([a.label(c), condition(c)] + [f"{w[k]:,.0f}" if w.get(k) is not None else "–"
                                                  for k in ("bytes_c2s", "bytes_s2c", "packets_c2s", "packets_s2c")]
                    + [f"{w['retransmits_mean']:.2f}" if w.get("retransmits_mean") is not None else "–"])
    return Table("wire-table", "Bytes and packets per handshake (medians, client TCP_INFO at completion; "
                 "the emulator's record for clients without TCP_INFO)",
                 ["algorithm", "condition", "bytes c→s", "bytes s→c", "packets c→s", "packets s→c",
                  "retransmits (mean)"], rows)


def quality(a: Analysis) -> Table:
    """Per cell: the late-sample detector and the client-vs-wire comparison (runs before them: –)."""
    rows = []
    on_wire = any(c.wire_clock for c in a.cells)
    for c in ordered(a):
        d = c.row.get("detector") if isinstance(c.row.get("detector"), dict) else {}
        w = c.row.get("wire") if isinstance(c.row.get("wire"), dict) else {}
        by_side = {k: v for k, v in (d.get("by_side") or {}).items() if v}
        late = (f"{d['late']} of {d['untouched']}" + ("" if d.get("wire") else " (no wire record)")
                + (": " + ", ".join(f"{k} {v}" for k, v in by_side.items()) if by_side else
                   f", {d['late_client_cpu']} the client's CPU wait" if d.get("late") and
                   d.get("late_client_cpu") is not None else "")
                if d.get("late") is not None else "–")
        rows.append([a.label(c), condition(c), ms(d.get("clean_ms")), late,
                     f"{w['median_diff_ms']:+.3f} [{w['p5_diff_ms']:+.3f}, {w['p95_diff_ms']:+.3f}]" if w.get("n") else "–",
                     f"{w['disagree']} of {w['n']}" if w.get("n") else
                     ("no wire record (netem)" if d and not d.get("wire") else "–")]
                    + (["beyond" if c.wire_clock else "within"] if on_wire else []))
    # the column of what this machine allows, where a cell's client stands beyond it (pqbench.measure.wire.clock)
    allowed = ", ".join(sorted({f"{c.agreement_allowance_ms:.3f} ms" for c in a.cells}))
    clock = (" Machine: whether the client's median stands within what this machine allows "
             f"({allowed}: ±0.25 ms plus the spread of the emulator floor it measured at the run's start, by a "
             "process scheduled as the cell's client is: real-time, or at normal priority for a browser); a cell "
             "beyond it is reported on the wire's clock, with the reason among the warnings.") if on_wire else ""
    return Table("quality", "Measurement quality per cell",
                 ["algorithm", "condition", "clean time", "late samples", "client − wire (p50 [p5, p95])",
                  "beyond ±0.25 ms"] + (["machine"] if on_wire else []), rows,
                 "Clean time: p5 of the samples no retransmission touched (client TCP_INFO, emulator record). "
                 "Late: such samples beyond the clean time by max_bias + 0.5 ms, i.e. waiting for a CPU; of "
                 "those, how many the client itself spent at least half the excess waiting for a CPU (its "
                 "run-queue wait from the kernel's schedstat; pqtimer reports it). "
                 "Client − wire: the client's time minus the same connection's time on the wire (SYN to the "
                 "client's Finished, or to the last byte), as the emulator recorded it." + clock)


def model(a: Analysis) -> Table:
    rows = []
    for c in ordered(a):
        if c.bound is None:
            rows.append([a.label(c), condition(c), "–", "–", "–", "–", "–", "–", c.bound_note])
            continue
        b = c.bound
        rows.append([a.label(c), condition(c), str(b.round_trips), ms(b.parts["rtt_ms"]), ms(b.parts["serialisation_ms"]),
                     ms(b.parts["slow_start_ms"]), ms(b.parts["crypto_ms"]), ms(b.total_ms),
                     f"{c.bound_note}; flights c→s {b.flights.client_hello:,} B, s→c {b.flights.server_flight:,} B"])
    return Table("model-table", "Lower-bound model per cell (ms)",
                 ["algorithm", "condition", "RTTs", "round trips", "serialisation", "slow start", "crypto", "bound",
                  "inputs"], rows,
                 "TCP handshake 1 RTT + TLS 1 RTT (+1 per HTTP request) + serialisation of each flight at the link "
                 "rate with IPv4/TCP headers per segment + extra rounds while slow start opens initcwnd + the "
                 "crypto on the critical path (client keygen, decaps, 2 verifies; server encaps, sign). ACKs are "
                 "taken as immediate, so measurements should sit above it.")


def not_run(a: Analysis) -> Table:
    rows = [[str(r.get("status")), describe(r), str(r.get("reason") or "–")]
            for r in sorted(a.not_run, key=lambda r: describe(r))]
    return Table("not-run", "Cells not measured", ["status", "cell", "reason"], rows)


def crypto(a: Analysis) -> Table:
    rows = []
    for name in sorted(a.crypto):
        ops = a.crypto[name]
        rows.append([name] + [_spread(ops[o]) if o in ops else "–" for o in ("keygen", "encaps", "decaps", "sign",
                                                                            "verify")])
    rounds = max((s.rounds for ops in a.crypto.values() for s in ops.values()), default=0)
    title = ("Crypto cost per operation (ms, median of the run's microbenchmark)" if rounds <= 1 else
             f"Crypto cost per operation (ms): median of the fastest – of the slowest of {rounds} microbenchmark "
             "rounds at the start and end of the run; the model uses the fastest")
    return Table("crypto", title,
                 ["algorithm", "keygen", "encaps", "decaps", "sign", "verify"], rows)


def _spread(s) -> str:
    return ms(s.fastest) if ms(s.fastest) == ms(s.slowest) else f"{ms(s.fastest)} – {ms(s.slowest)}"


def _flatten(prefix: str, value, out: list) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, v in enumerate(value):
            _flatten(f"{prefix}[{i}]", v, out)
    else:
        out.append([prefix, value if isinstance(value, str) else json.dumps(value)])


def provenance(a: Analysis) -> Table:
    rows: list = []
    prov = a.run.get("provenance")
    _flatten("", prov if isinstance(prov, (dict, list)) else {"provenance": prov}, rows)
    return Table("provenance", "Provenance", ["field", "value"], rows)


def calibration(a: Analysis) -> Table:
    start = a.run.get("calibration_start") if isinstance(a.run.get("calibration_start"), dict) else {}
    end = a.run.get("calibration_end") if isinstance(a.run.get("calibration_end"), dict) else {}
    keys = list(dict.fromkeys([*start, *end]))
    rows = [[k, _cal(start.get(k)), _cal(end.get(k))] for k in keys]
    prov = a.run.get("provenance") if isinstance(a.run.get("provenance"), dict) else {}
    return Table("calibration", "Calibration: emulator floor (TCP connect through the link set to 0 ms)",
                 ["", "start of run", "end of run"], rows,
                 note="No emulator: the run measured targets over the host's network, and each cell measured its "
                      "path instead (the targets table)." if prov.get("targets") and not rows else "")


def _cal(v) -> str:
    if v is None:
        return "–"
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def warnings(a: Analysis) -> list[tuple[str, list[str]]]:
    """Run-level warnings, then each cell check with the cells it hit: (headline, details). Cells hit
    by one check with different fixes (late samples held up by the server in some, by the client in
    others) get a line per fix. Notes are left to notes()."""
    out = [(w.text(), []) for w in a.warnings]
    by_check: dict[tuple, list] = {}
    for c, w in a.cell_warnings():
        if not w.note:
            by_check.setdefault((w.check, w.fix), []).append((c, w))
    for (check, _), hits in by_check.items():
        first = hits[0][1]
        if len(hits) == 1:
            c = hits[0][0]
            head = f"{a.label(c)}, {condition(c)}: {first.text()}"
        else:
            head = f"{len(hits)} cells: {TITLES.get(check, check)}" + (f"; {first.fix}" if first.fix else "")
        out.append((head, [f"{a.label(c)}, {condition(c)}: {w.message}" for c, w in hits] if len(hits) > 1 else []))
    return out


def notes(a: Analysis) -> Table | None:
    """What the checks saw that moves no reported number beyond its CI: information, not warnings."""
    rows = [[a.label(c), condition(c), TITLES.get(w.check, w.check), w.text()]
            for c, w in a.cell_warnings() if w.note]
    if not rows:
        return None
    return Table("notes", "Notes: seen, but moving no reported percentile beyond its CI",
                 ["algorithm", "condition", "what", "details"], rows,
                 "Late samples split by the side that held them up (the client's wait for a CPU, the server's "
                 "answer at the wire against its typical value, the emulator's late releases) whose removal would "
                 "leave p50 and p95 within their 95 % CIs; far samples at 0 % loss (beyond Q3 + 3×IQR) told the "
                 "same way; and p95s that sit between the modes of clean and "
                 "recovered handshakes (their CIs stay wide at any sample count: the mode shares are stable).")
