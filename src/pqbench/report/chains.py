"""The report's section on certificate chains (the chain and chain_bytes axes, pqbench.algorithms.chains) and on
each cell's distance to its ideal time.

  chain parts      per cell with a chain shape or a padded size: the bytes the server sent by part (public keys,
                   certificate signatures, SCTs and their signatures, a stapled OCSP response, padding, an MTC's
                   inclusion proof, X.509 framing), the first flight, the round trips the staircase predicts and
                   the headroom before the next, p50 with its CI; stand-ins say "size-only"
  trust anchors    per trust anchor negotiation cell (pqbench.algorithms.trust_anchors): the chain its case got,
                   bytes both ways, the connections it took, p50 against the case that matched
  staircase        per condition (RTT, initcwnd, transport): the predicted steps, where the measured sweep steps,
                   and the figure of handshake time against the server's first-flight bytes with the predicted
                   staircase on top
  distance         per cell: the ideal time (round trips × RTT + serialisation + crypto on the critical path from the
                   run's microbenchmarks + the extra flights the model predicts) and the gap to the measured median
                   split into an extra flight the model did not predict, stack CPU beyond the crypto, and the rest
                   (scheduling)
"""

from __future__ import annotations

import json

from matplotlib.figure import Figure

from pqbench import transport as transportmod
from pqbench.algorithms import chains, trust_anchors
from pqbench.analysis import model, staircase
from pqbench.report.tables import Table, condition, ms, with_ci
from pqbench.report.sections import Section, register


def _parts(c) -> dict:
    p = c.row.get("chain_parts")
    if isinstance(p, str):
        try:
            return json.loads(p)
        except ValueError:
            return {}
    return p or {}


LEVELS = (("root_sig", "root"), ("intermediate_sig", "intermediate"), ("client_sig", "client cert"))


def _chained(a) -> list:
    return [c for c in a.cells if c.row.get("chain") or c.row.get("chain_bytes")
            or any(c.row.get(k) for k, _ in LEVELS)]


def _cond(c) -> staircase.Condition:
    r = c.row
    hello = c.bound.flights.client_hello if c.bound else 1400
    return staircase.Condition(r.get("rtt_ms") or 0.0, r.get("initcwnd") or 10, r.get("mtu") or 1500,
                               r.get("transport") or None, hello, r.get("initial_size"))


def _flight(c) -> int | None:
    """The server's first flight (bytes) as the model counts it from the cell's measured message sizes."""
    return c.bound.flights.server_flight if c.bound else None


def _shape(c) -> str:
    """The chain's shape, with the levels not of the leaf's algorithm and a mutual-TLS client's certificate."""
    shape = (chains.label(c.row.get("chain"), c.row.get("chain_bytes")) or "root → leaf").removeprefix("chain ")
    return " · ".join([shape, *(f"{word} {c.row[k]}" for k, word in LEVELS if c.row.get(k))])


def _stacks(c) -> str:
    """The server and client stacks of a cell (the first flight's framing is the server's own)."""
    return f"{c.row.get('server') or c.row.get('stack') or '?'} → {c.row.get('client') or c.row.get('stack') or '?'}"


def _transport(c) -> str:
    return transportmod.get(c.row.get("transport") or None).name


def _headroom(cond, flight: int) -> str:
    room = staircase.headroom(cond, flight)
    return "no further step known" if room is None else f"{room:,}"


def parts_table(a) -> Table | None:
    cells = [c for c in _chained(a) if c.ok]
    if not cells:
        return None
    rows = []
    for c in sorted(cells, key=lambda c: (c.row.get("rtt_ms") or 0, _transport(c), c.row.get("initcwnd") or 0,
                                          str(c.row.get("sig")), _parts(c).get("sent") or 0)):
        p, flight = _parts(c), _flight(c)
        cond = _cond(c)
        extra = staircase.extra_round_trips(cond, flight) if flight and cond.rtt_ms else None
        stand_in = p.get("stand_in") or {}
        rows.append([str(c.row.get("sig")), _shape(c), _stacks(c), condition(c), f"{p.get('sent', 0):,}",
                     f"{p.get('public_keys', 0):,}", f"{p.get('signatures', 0):,}",
                     f"{p.get('scts', 0):,} ({p.get('sct_signatures', 0):,})",
                     f"{p.get('ocsp', 0):,}" if p.get("ocsp") else "–", f"{p.get('padding', 0):,}",
                     f"{p['mtc_proof']:,}" if p.get("mtc_proof") else "–", f"{p.get('framing', 0):,}",
                     f"{stand_in['keys_and_signatures']:,}" if stand_in else "–",
                     f"{p['client']['sent']:,}" if p.get("client") else "–",
                     f"{flight:,}" if flight else "–", "–" if extra is None else str(extra),
                     _headroom(cond, flight) if extra is not None else "–", with_ci(c.pct[50])])
    return Table("chains-table", "Certificate chains: bytes by part, round trips and headroom",
                 ["signature", "chain", "server → client", "condition", "sent B", "public keys", "signatures",
                  "SCTs (their signatures)",
                  "OCSP", "padding", "MTC proof", "X.509 framing", "proposal's keys+sigs", "client cert B",
                  "first flight B", "extra RTs (model)",
                  "headroom B", "p50 ms [95 % CI]"], rows,
                 "Bytes counted from the DER the server sent (leaf first; the root is never sent); a stapled OCSP "
                 "response is counted apart. A real Merkle Tree Certificate (mtc-standalone, mtc-landmark) is sent "
                 "alone: its cosignatures under 'signatures', its inclusion proof under 'MTC proof'. 'size-only': a "
                 "stand-in for a proposed shape, a root → leaf chain padded to the proposal's bytes and verified "
                 "normally (docs/chains.md); its "
                 "'proposal's keys+sigs' counts the keys, signatures and proof hashes of the whole handshake, "
                 "CertificateVerify included, as published figures do. Client cert: the certificate a mutual-TLS "
                 "client sent (client_sig). First flight: ServerHello … Finished as the "
                 "lower-bound model counts it from the cell's measured messages; extra RTs: round trips beyond one "
                 "that the staircase predicts for it; headroom: bytes that still fit before the next one.")


def _conditions(a) -> dict:
    """(rtt, initcwnd, transport, mtu) -> the swept cells (chain_bytes) of that condition, by flight."""
    out: dict = {}
    for c in a.cells:
        if c.row.get("chain_bytes") and c.ok and _flight(c):
            r = c.row
            out.setdefault((r.get("rtt_ms"), r.get("initcwnd") or 10, _transport(c), r.get("mtu") or 1500), []).append(c)
    return {k: sorted(v, key=_flight) for k, v in sorted(out.items(), key=lambda kv: tuple(map(str, kv[0])))}


def staircase_table(a) -> Table | None:
    conds = _conditions(a)
    if not conds:
        return None
    rows = []
    for (rtt, initcwnd, tr, mtu), cells in conds.items():
        cond = _cond(cells[0])
        sizes = [_flight(c) for c in cells]
        predicted = [t for t in staircase.thresholds(cond, sizes[-1]) if t < sizes[-1]]
        measured = staircase.step_at(sizes, [c.p50 for c in cells], rtt or 0)
        datagram = transportmod.get(tr).datagram
        unit = model.QUIC_DATAGRAM if datagram else mtu - model.IP_TCP_HEADER
        # each predicted step against the measured step nearest to it
        offs = [min((staircase.off_by(m, t) for m in measured), default=None) for t in predicted]
        rows.append([f"RTT {rtt:g} ms, initcwnd {initcwnd}, {tr}", ", ".join(f"{t:,}" for t in predicted) or "none",
                     ", ".join(f"{lo:,}–{hi:,}" for lo, hi in measured) or "none",
                     ", ".join("no step" if o is None else f"{o:,}" for o in offs) or "–",
                     f"{'datagram' if datagram else 'MSS'} {unit} B: "
                     + ("yes" if offs and all(o is not None and o <= unit for o in offs) else "no"),
                     str(len(cells)), _headroom(cond, sizes[0])])
    return Table("staircase-table", "The byte staircase: predicted and measured steps of the size sweep",
                 ["condition", "predicted steps (largest flight, B)", "measured steps (flight below–at, B)",
                  "off by B", "within one", "cells", "headroom at the smallest flight B"], rows,
                 "Predicted: the largest first flight that still costs k extra round trips (pqbench.analysis.staircase: "
                 "TCP from initcwnd, the MSS and slow start; QUIC from the 3× anti-amplification budget, after which the "
                 "model knows no further step). Measured: neighbouring sizes of the sweep between which the medians' "
                 "floor (the least median at that size or larger) rises by more than a quarter of a round trip. Off by: bytes "
                 "between a predicted step and the nearest measured one (0: within its bracket). The sweep's chains "
                 "are padded size-only chains.")


def staircase_figure(a) -> Figure | None:
    conds = _conditions(a)
    if not conds:
        return None
    n = len(conds)
    cols = min(2, n)
    rows_n = (n + cols - 1) // cols
    fig = Figure(figsize=(5.2 * cols, 3.6 * rows_n), layout="constrained")
    axes = fig.subplots(rows_n, cols, squeeze=False).ravel()
    for ax, ((rtt, initcwnd, tr, _), cells) in zip(axes, conds.items()):
        cond = _cond(cells[0])
        xs = [_flight(c) for c in cells]
        ax.errorbar(xs, [c.p50 for c in cells], yerr=[[c.p50 - c.pct[50][1] for c in cells],
                                                      [c.pct[50][2] - c.p50 for c in cells]],
                    fmt="o", ms=3, color="C0", label="measured p50 (95 % CI)")
        base = min(c.p50 - staircase.extra_round_trips(cond, x) * cond.rtt_ms for c, x in zip(cells, xs))
        grid = list(range(min(xs), max(xs) + 1, max(1, (max(xs) - min(xs)) // 400 or 1)))
        ax.step(grid, [staircase.predicted_ms(cond, x, base) for x in grid], where="post", color="C3",
                label="predicted staircase")
        for t in staircase.thresholds(cond, max(xs)):  # dotted: each predicted step
            if min(xs) <= t <= max(xs):
                ax.axvline(t, color="C3", lw=0.5, ls=":")
        ax.set_title(f"RTT {rtt:g} ms, initcwnd {initcwnd}, {tr}", fontsize=9)
        ax.set_xlabel("server's first flight (bytes)")
        ax.set_ylabel("handshake p50 (ms)")
    for ax in axes[n:]:
        ax.set_visible(False)
    axes[0].legend(fontsize=7)
    return fig


def _gap_parts(c) -> dict | None:
    """The cell's ideal time and the gap to its median in parts (ms)."""
    b = c.bound
    if b is None or not c.ok:
        return None
    rtt = c.row.get("rtt_ms") or 0
    ideal = b.total_ms
    gap = c.p50 - ideal
    flights = rtt * max(0, round(gap / rtt)) if rtt and gap > rtt / 2 else 0.0
    rest = gap - flights
    ph = c.phases
    endpoint = ph.get("ClientHello ready", 0) + max(0.0, ph.get("ClientHello→ServerHello", rtt) - rtt) \
        + ph.get("server Finished→done", 0)
    cpu = min(max(0.0, endpoint - b.parts["crypto_ms"]), max(0.0, rest))
    return {"ideal": ideal, "round_trips_ms": b.parts["rtt_ms"], "serialisation_ms": b.parts["serialisation_ms"],
            "predicted_flights_ms": b.parts["slow_start_ms"], "crypto_ms": b.parts["crypto_ms"], "gap": gap,
            "unpredicted_flights_ms": flights, "stack_cpu_ms": cpu, "scheduling_ms": rest - cpu}


def distance_table(a) -> Table | None:
    if not _chained(a):  # a run of the chain axes (other runs' reports stay as they were: tests/test_compat.py)
        return None
    rows = []
    for c in sorted(a.cells, key=lambda c: (c.row.get("rtt_ms") or 0, _transport(c), c.row.get("initcwnd") or 0,
                                            a.label(c), _parts(c).get("sent") or 0)):
        g = _gap_parts(c)
        if g is None:
            continue
        rows.append([a.label(c), _shape(c), condition(c), with_ci(c.pct[50]), ms(g["ideal"]), ms(g["round_trips_ms"]),
                     ms(g["serialisation_ms"]), ms(g["crypto_ms"]), ms(g["predicted_flights_ms"]), ms(g["gap"]),
                     ms(g["unpredicted_flights_ms"]), ms(g["stack_cpu_ms"]), ms(g["scheduling_ms"])])
    if not rows:
        return None
    return Table("distance-table", "Distance to the limit: each cell's ideal time and its gap, in parts (ms)",
                 ["algorithm", "chain", "condition", "p50 [95 % CI]", "ideal", "round trips", "serialisation",
                  "crypto", "predicted extra flights", "gap", "unpredicted flights", "stack CPU beyond crypto",
                  "scheduling and rest"], rows,
                 "Ideal: the lower-bound model (pqbench.analysis.model) with the crypto on the critical path from this "
                 "run's own microbenchmarks. Gap = p50 − ideal: whole round trips the model did not predict (a gap of "
                 "more than half an RTT, rounded to RTTs); stack CPU: the endpoints' compute phases (ClientHello "
                 "ready, ClientHello→ServerHello less one RTT, server Finished→done) beyond the crypto; the rest is "
                 "scheduling, timers and what no phase accounts for. A negative gap: the ideal lies above the "
                 "measurement, its crypto (the microbenchmarks) slower than the handshake's own (slow signatures "
                 "benchmarked on a busy machine), or a flight the model counts whole that went in fewer rounds.")


def distance_figure(a) -> Figure | None:
    if not _chained(a):
        return None
    cells = [(c, g) for c in a.cells if (c.row.get("chain") or not c.row.get("chain_bytes"))
             and (g := _gap_parts(c)) is not None]
    if not cells:
        return None
    cells = sorted(cells, key=lambda cg: (cg[0].row.get("rtt_ms") or 0, _transport(cg[0]), cg[0].row.get("initcwnd") or 0,
                                          a.label(cg[0]), _parts(cg[0]).get("sent") or 0))[:40]
    fig = Figure(figsize=(9, 0.28 * len(cells) + 2.0), layout="constrained")
    ax = fig.subplots()
    keys = [("round_trips_ms", "round trips"), ("serialisation_ms", "serialisation"), ("crypto_ms", "crypto"),
            ("predicted_flights_ms", "predicted extra flights"), ("unpredicted_flights_ms", "unpredicted flights"),
            ("stack_cpu_ms", "stack CPU beyond crypto"), ("scheduling_ms", "scheduling and rest")]
    ys = range(len(cells))
    left = [0.0] * len(cells)
    for k, (key, name) in enumerate(keys):
        widths = [max(0.0, g[key]) for _, g in cells]
        ax.barh(list(ys), widths, left=left, color=f"C{k}", label=name, height=0.7)
        left = [l + w for l, w in zip(left, widths)]
    ax.plot([c.p50 for c, _ in cells], list(ys), "k|", ms=10, label="measured p50")
    ax.set_yticks(list(ys), [f"{a.label(c)}, {condition(c)}" for c, _ in cells], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("ms")
    fig.legend(fontsize=7, loc="outside lower center", ncols=4)
    return fig


FIGURES = (
    ("staircase", "Handshake time vs the server's first-flight bytes, with the predicted staircase", staircase_figure),
    ("distance", "Distance to the limit: ideal time and the gap in parts", distance_figure),
)
CAPTIONS = {
    "staircase": "One panel per condition of the size sweep (padded size-only chains): the measured median with its "
                 "95 % CI at each first-flight size, and the staircase the model predicts (TCP: initcwnd, MSS, slow "
                 "start; QUIC: the 3× anti-amplification budget), placed at the sweep's "
                 "smallest flight; dotted lines mark each predicted step.",
    "distance": "Stacked: the ideal time's parts (round trips, serialisation, crypto from the run's microbenchmarks, "
                "the extra flights the model predicts), then the gap to the measured median in parts; the tick is "
                "the median. The size sweep's cells are in the distance table only.",
}


def anchors_table(a) -> Table | None:
    """Trust anchor negotiation (pqbench.algorithms.trust_anchors): per case, which chain crossed, the bytes both
    ways and the connections it took, against the case that matched under the same condition."""
    cells = [c for c in a.cells if c.row.get("trust_anchors") and c.ok]
    if not cells:
        return None
    key = lambda c: (c.row.get("rtt_ms") or 0, c.row.get("initcwnd") or 0, str(c.row.get("sig")), _shape(c),  # noqa: E731
                     _stacks(c))
    matched = {key(c): c for c in cells if c.row["trust_anchors"] == "match"}
    rows = []
    for c in sorted(cells, key=lambda c: (key(c), trust_anchors.VALUES.index(c.row["trust_anchors"]))):
        case, p, ref = c.row["trust_anchors"], _parts(c), matched.get(key(c))
        own = case in ("match", "retry")
        sent = p.get("sent") if own else (p.get("fallback") or {}).get("sent")
        rtt = c.row.get("rtt_ms") or 0
        vs = "–" if ref is None or ref is c else \
            f"{c.p50 - ref.p50:+.1f}" + (f" ({(c.p50 - ref.p50) / rtt:+.1f} RTT)" if rtt else "")
        rows.append([str(c.row.get("sig")), _shape(c), _stacks(c), condition(c), case,
                     f"the cell's ({c.row.get('sig')})" if own else f"fallback ({chains.FALLBACK_SIG})",
                     f"{sent:,}" if sent else "–", "2" if case == "retry" else "1",
                     f"{c.wire['bytes_c2s']:,.0f}" if c.wire.get("bytes_c2s") else "–",
                     f"{c.wire['bytes_s2c']:,.0f}" if c.wire.get("bytes_s2c") else "–", with_ci(c.pct[50]), vs])
    return Table("anchors-table", "Trust anchor negotiation: the chain each case got, its bytes and connections",
                 ["signature", "chain", "server → client", "condition", "case", "chain sent", "chain B",
                  "connections", "client → server B", "server → client B", "p50 ms [95 % CI]", "vs match ms"], rows,
                 "draft-ietf-tls-trust-anchor-ids-06 as BoringSSL implements it: the server holds the cell's chain, "
                 "sent when the client's trust_anchors names its root, and a classical fallback chain from another "
                 "root. match: the client names the cell's root; fallback: it names a root the server lacks and has "
                 "the fallback's; retry: it names a root the server lacks, has only the cell's, fails on the fallback "
                 "chain and connects again naming the ID the server listed in its EncryptedExtensions (bytes and "
                 "time of both connections); unsent: no extension, the fallback's root at hand. Bytes per handshake "
                 "from the client's TCP_INFO (median).")


def tables(a) -> list[Table]:
    return [t for t in (parts_table(a), anchors_table(a), staircase_table(a), distance_table(a)) if t is not None]


register(Section("chains", 20, lambda con, run_id, a: tables(a), lambda con, run_id: FIGURES, figure_order=60,
                 captions=CAPTIONS))
