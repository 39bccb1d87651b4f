"""Statistics of one cell: percentiles with bootstrap CIs, failure rate, wire sizes, phase split and the
lower-bound model of its metric."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from pqbench import stats, units
from pqbench import protocol as proto
from pqbench.algorithms import catalog
from pqbench.analysis import model
from pqbench.analysis.data import CellData
from pqbench.errors import BadInput
from pqbench.measure.late import RTO_MIN_MS
from pqbench.measure.wire import TOLERANCE_MS, clock as wire_clock_of
from pqbench.sample import Phase

QS = stats.PERCENTILES
CONFIDENCE = 0.95

# What tells two cells' algorithms apart, and what makes up their link/workload condition.
ALG_FIELDS = ("kex", "sig", "pad", "server", "client")
CONDITION_FIELDS = ("scenario", "rtt_ms", "loss", "loss_model", "rate_mbit", "mtu", "initcwnd", "congctl", "mode",
                    "page", "requests", "trace", "queue", "cross", "offer", "server_groups", "compress", "transport",
                    "quic_retry", "initial_size", "chain", "chain_bytes", "cookie")


@dataclasses.dataclass
class CellStats:
    row: dict
    n: int
    ok: int
    failures: int
    durations: np.ndarray  # metric of successful samples, ms
    pct: dict  # q -> (estimate, lo, hi) ms
    mean: float
    failure_rate: tuple  # (p, lo, hi), Wilson interval
    failure_classes: dict
    wire: dict  # median bytes/packets per connection at handshake completion, per direction
    phases: dict  # label -> median ms
    bound: model.Bound | None
    bound_note: str  # why there is no bound, or what it rests on
    groups: list  # negotiated groups seen (distinct)
    sigalgs: list  # negotiated signature algorithms seen (distinct)
    warnings: list = dataclasses.field(default_factory=list)
    modes: dict = dataclasses.field(default_factory=dict)  # mode -> (share, lo, hi) of successful samples
    # medians of the ClientHello's and the Certificate's bytes (sent compressed), and the HRR share
    tls: dict = dataclasses.field(default_factory=dict)
    # why this cell's client clock is not to be believed on this machine (pqbench.measure.wire.clock), and which
    # clock its figures are on; None when it agrees
    wire_clock: str | None = None
    # the clock of durations, pct and mean: "client", or "wire" for a cell whose client stands beyond what this
    # machine allows and whose every successful sample has its wire time
    clock: str = "client"
    wire_durations: np.ndarray = dataclasses.field(default_factory=lambda: np.array([]))  # wire_ms, ok samples
    agreement_allowance_ms: float = TOLERANCE_MS  # what judged it: this machine's allowance for its client's priority

    def __getattr__(self, name):  # cell parameters read like attributes (c.kex, c.rtt_ms …)
        row = self.__dict__.get("row")
        if row is not None and name in row:
            return row[name]
        raise AttributeError(name)

    @property
    def p50(self) -> float:
        return self.pct[50][0]

    def condition(self) -> tuple:
        """Everything but the algorithms: cells with equal conditions (and link seed) pair up."""
        seed = (self.row.get("link") or {}).get("seed") if isinstance(self.row.get("link"), dict) else None
        return tuple(self.row.get(f) for f in CONDITION_FIELDS) + (seed,)


def page_bytes(page) -> int | None:
    if not page:
        return None
    try:
        return units.size_bytes("page", page)
    except BadInput:
        return None


def _median(x: np.ndarray) -> float | None:
    return float(np.median(x)) if x.size else None


def _phase_split(cd: CellData) -> dict:
    out = {}
    for label, a, b in proto.of(cd.row).splits:
        end = cd.values[f"{b}_ms"][cd.ok]
        start = cd.values[f"{a}_ms"][cd.ok] if a != Phase.START else np.zeros_like(end)
        d = end - start
        d = d[~np.isnan(d)]
        if d.size:
            out[label] = float(np.median(d))
    return out


def _crypto_costs(kex: str, sig: str, measured: dict) -> model.Crypto:
    """Per-operation ms: the run's microbenchmarks, else a synthetic algorithm's configured cost."""
    ops, sources = {}, []
    for name, kind, wanted in ((kex, "kem", ("keygen", "encaps", "decaps")), (sig, "sig", ("sign", "verify"))):
        got = measured.get(name)
        if got is None:
            try:
                alg = catalog.find(name, kind)
                got = measured.get(alg.name) or {k.removesuffix("_ms"): v for k, v in alg.timings_ms}
            except BadInput:
                got = {}
            sources.append("catalog" if got else "none")
        else:
            sources.append("measured")
        for op in wanted:
            ops[op] = float(got.get(op, 0.0))
    source = sources[0] if sources[0] == sources[1] else "+".join(sources)
    return model.Crypto(source=source, **ops)


def _flights(cd: CellData, row: dict, response: int) -> model.Flights | None:
    med = {f: _median(cd.ok_values(f)) for f in ("client_hello_bytes", "hs_bytes_received", "server_hello_bytes",
                                                  "certificate_bytes", "certificate_verify_bytes")}
    if med["client_hello_bytes"] and med["hs_bytes_received"] and med["server_hello_bytes"]:
        return model.measured_flights(int(med["client_hello_bytes"]), int(med["hs_bytes_received"]),
                                      int(med["server_hello_bytes"]), med["certificate_bytes"],
                                      med["certificate_verify_bytes"], response)
    try:
        kex, sig = catalog.find(row["kex"], "kem"), catalog.find(row["sig"], "sig")
    except (BadInput, KeyError, TypeError):
        return None
    return model.catalog_flights(kex, sig, pad=row.get("pad") or 0, response_payload=response,
                                 resume=row.get("mode") == "resume")


def cell_bound(cd: CellData, crypto: dict) -> tuple[model.Bound | None, str]:
    row = cd.row
    mode = row.get("mode") or "handshake"
    if not proto.of(row).modelled:
        known = " and ".join(f"{p.label}'s" for p in proto.registered() if p.modelled)
        return None, f"the model knows {known} flights, not {proto.of(row).label}'s"
    if mode not in ("handshake", "resume", "page", "requests"):
        return None, f"no model for mode {mode!r}"
    if row.get("rtt_ms") is None:
        return None, "the cell has no RTT"
    link = row.get("link")
    if isinstance(link, dict) and "client_to_server" in link:
        lk = model.Link.from_linkspec(link, row.get("initcwnd"))
    else:
        lk = model.Link.symmetric(row["rtt_ms"], row.get("rate_mbit"), row.get("mtu") or 1500, row.get("initcwnd"))
    response = 0
    if mode in ("page", "requests"):
        response = model.http_response(page_bytes(row.get("page")) or page_bytes("1k"))
    flights = _flights(cd, row, response)
    if flights is None:
        return None, "neither measured message sizes nor catalog sizes for this cell"
    if response and not flights.response:
        flights = dataclasses.replace(flights, response=response)
    costs = _crypto_costs(row.get("kex"), row.get("sig"), crypto)
    bound = model.lower_bound(lk, flights, costs, mode=mode, requests=row.get("requests") or 1,
                              transport=row.get("transport") or None, initial_size=row.get("initial_size"))
    return bound, f"flights from {flights.source} sizes, crypto {costs.source}"


MODES = ("clean", "fast", "timeout")


def modes(cd: CellData) -> dict:
    """The share of successful samples in each mode, with Wilson 95 % CIs: clean (no retransmission
    either way: the client's TCP_INFO and the wire record), recovered fast (retransmitted, and no more
    than RTO_MIN_MS over the clean time: fast retransmit or a tail-loss probe) and recovered after a
    timeout (RTO_MIN_MS or more over it). Where a percentile sits between modes its CI is wide at any
    sample count; these shares are what stays stable."""
    ok = cd.ok
    if not ok.size or not ok.any():
        return {}
    vals = lambda f: np.nan_to_num(cd.values[f][ok]) if f in cd.values else np.zeros(int(ok.sum()))  # noqa: E731
    touched = (vals("tcp_retransmits") + vals("wire_retrans_c2s") + vals("wire_retrans_s2c")) > 0
    times = cd.values["duration_ms"][ok]
    untouched = np.sort(times[~touched & np.isfinite(times)])
    clean = stats.percentile(untouched.tolist(), 5) if untouched.size else np.nanmin(times)
    timeout = touched & (times - clean >= RTO_MIN_MS)
    counts = {"clean": int((~touched).sum()), "fast": int((touched & ~timeout).sum()), "timeout": int(timeout.sum())}
    n = int(ok.sum())
    return {m: stats.binomial_ci(k, n, CONFIDENCE) for m, k in counts.items()}


def analyse_cell(cd: CellData, crypto: dict, *, resamples: int = 1000, seed: int = 0,
                 allowance_ms: float | None = None) -> CellStats:
    """allowance_ms: how far this machine lets a client's clock stand from the wire's (wire.allowance_ms); a cell
    beyond it is flagged with the wire's median beside its own (its figures stay the client's: a comparison must
    not mix one cell's clock with another's)."""
    row = cd.row
    n = int(cd.ok.size) if cd.ok.size else int(row.get("n") or 0)
    ok = int(cd.ok.sum()) if cd.ok.size else int(row.get("ok") or 0)
    durations = cd.ok_values("duration_ms")
    allowance_ms = allowance_ms if allowance_ms is not None else TOLERANCE_MS
    why = wire_clock_of(row.get("wire") if isinstance(row.get("wire"), dict) else None, allowance_ms)
    on_wire = cd.ok_values("wire_ms") if "wire_ms" in cd.values else np.array([])
    clock, wire_clock = "client", why
    if why and durations.size and on_wire.size == durations.size:  # reported on the wire's clock, with the reason
        wire_clock = (f"{why}; reported on the wire's clock (p50 {float(np.median(on_wire)):.3f} ms, its client's "
                      f"{float(np.median(durations)):.3f} ms)")
        clock, durations = "wire", on_wire
    elif why and on_wire.size:  # some samples have no wire time: the figures stay the client's
        wire_clock = f"{why}; on the wire its p50 is {float(np.median(on_wire)):.3f} ms ({on_wire.size} of " \
                     f"{durations.size} samples: the figures stay the client's)"
    pct = stats.bootstrap_percentiles(durations, QS, confidence=CONFIDENCE, resamples=resamples, seed=seed)
    classes = dict(row.get("failure_classes") or {}) if isinstance(row.get("failure_classes"), dict) else {}
    if not classes:
        for c in cd.error_classes:
            classes[c] = classes.get(c, 0) + 1
    # the client socket's TCP_INFO at handshake completion; the emulator's record where a client has none
    first = lambda *fields: next((m for f in fields if (m := _median(cd.ok_values(f))) is not None), None)  # noqa: E731
    wire = {"bytes_c2s": first("tcp_bytes_sent", "wire_bytes_c2s"),
            "bytes_s2c": first("tcp_bytes_received", "wire_bytes_s2c"),
            "packets_c2s": first("tcp_segs_out", "wire_packets_c2s"),
            "packets_s2c": first("tcp_segs_in", "wire_packets_s2c"),
            "retransmits_mean": float(np.mean(r)) if (r := cd.ok_values("tcp_retransmits")).size else None,
            "server_flight_packets": _median(cd.ok_values("wire_server_flight_packets")),
            "server_flight_pushes": _median(cd.ok_values("wire_server_flight_pushes")),
            # QUIC: the share of handshakes whose server stalled at the amplification limit, and for how long
            "stall_share": float((st > 0).mean()) if (st := cd.ok_values("wire_stalls")).size else None,
            "stall_ms": _median(cd.ok_values("wire_stall_ms"))}
    # what a deployed client's offer and a server's compression cost (pqbench.report.deployment)
    tls = {"client_hello_bytes": _median(cd.ok_values("client_hello_bytes")),
           "certificate_bytes": _median(cd.ok_values("certificate_bytes")),
           "certificate_compressed_bytes": _median(cd.ok_values("certificate_compressed_bytes")),
           "hrr_share": float(h.mean()) if (h := cd.ok_values("hrr")).size else None}
    bound, note = cell_bound(cd, crypto) if ok else (None, "no successful sample")
    return CellStats(row=row, n=n, ok=ok, failures=n - ok, durations=durations, pct=pct,
                     mean=float(durations.mean()) if durations.size else math.nan,
                     failure_rate=stats.binomial_ci(n - ok, n, CONFIDENCE), failure_classes=classes, wire=wire,
                     phases=_phase_split(cd), bound=bound, bound_note=note,
                     groups=sorted({str(g) for g in cd.groups if g}),
                     sigalgs=sorted({str(g) for g in cd.sigalgs if g}), modes=modes(cd), tls=tls,
                     wire_clock=wire_clock, agreement_allowance_ms=allowance_ms, clock=clock,
                     wire_durations=on_wire)
