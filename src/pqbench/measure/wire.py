"""Wire timestamps: the emulator's per-connection records joined to the client's samples.

pqlink records, per connection, what a capture at the client side of the link would show (see
native/pqlink/README.md): when the SYN left, the flights of each direction, packets, bytes,
retransmissions and its own drops. Each sample names its local port; a sample is joined to the
connection from that port whose opening lies closest to the sample's start. The two clocks differ
(pqtimer reads CLOCK_MONOTONIC_RAW, pqlink CLOCK_MONOTONIC); their offset is read here, and it
drifts by at most a few parts per million, microseconds over a cell.

A sample's wire time runs from its SYN to the milestone that ends its metric on the client, which
each client names per mode (a `Milestone`): for TLS the client's Finished (first packet of its second
flight) for a handshake, the last packet of the last server flight for a page or requests.

A QUIC connection is a UDP flow: its wire time runs from the client's first datagram to the datagram
the sample names (`wire_milestone`: the bytes its direction sent before it), and its record adds the
datagram counts and whether the server stalled at QUIC's anti-amplification limit (measure.quic_wire).
"""

from __future__ import annotations

import bisect
import time

from pqbench import stats, transport
from pqbench.measure import quic_wire
from pqbench.sample import TIMELINES, TLS_MILESTONES, Milestone, Phase  # noqa: F401  (TLS_MILESTONES: where they were)

MATCH_WINDOW_NS = 2_000_000_000  # a connection opened further than this from a sample's start is not its own
TOLERANCE_MS = 0.25  # client and wire times of one sample further apart than this disagree
DISAGREE_SHARE = 0.05  # the report warns when more samples than this disagree
MIN_AGREEMENT_SAMPLES = 10  # fewer samples joined to the wire say nothing of a cell's clock


# How a client's process is scheduled, for the floor that judges its clock: as the measured processes are
# (real-time where allowed), or at normal priority (a browser must not run real-time), whose wake-ups a busy
# machine delays further. A run measures the emulator floor from a process of each (the calibration's "normal").
PRIORITIES = ("measured", "normal")


def allowance_ms(floor, priority: str = "measured") -> float:
    """How far a client's median may stand from the wire's on the machine that measured: the tolerance, plus the
    spread of the emulator's floor (p95 - p50 of a TCP connect at 0 ms by a process at the client's priority: the
    emulator's read latency and such a process's wake-up latency, as this machine shows them), and for a
    normal-priority client the p95 of its CPU stalls (testbed.probe.cpu_stalls). A run stores it
    with its calibration (`agreement_allowance_ms`, and under "normal" for normal-priority clients); runs from
    before are given it from their floor, and a normal-priority client of a run that measured no floor of its
    own the measured processes' (the stricter)."""
    floor = floor if isinstance(floor, dict) else {}  # a run on a real path has no floor
    if priority not in PRIORITIES:
        raise ValueError(f"priority {priority!r} is not one of {PRIORITIES}")
    if priority != "measured" and isinstance(floor.get(priority), dict):
        floor = floor[priority]
    if floor.get("agreement_allowance_ms") is not None:
        return float(floor["agreement_allowance_ms"])
    p50, p95 = floor.get("p50_ms"), floor.get("p95_ms")
    spread = p95 - p50 if p50 is not None and p95 is not None and p95 >= p50 else 0.0
    return round(TOLERANCE_MS + spread + (floor.get("stall_p95_ms") or 0.0), 4)


def clock(w: dict | None, allowance: float) -> str | None:
    """Why a cell's client clock is not to be believed (its median stands further from the wire's than this
    machine allows), or None: the client's own clock holds."""
    w = w or {}
    if (w.get("n") or 0) < MIN_AGREEMENT_SAMPLES or w.get("median_diff_ms") is None:
        return None
    if abs(w["median_diff_ms"]) <= allowance:
        return None
    return (f"the client's clock stands {w['median_diff_ms']:+.3f} ms (median) from the wire's, beyond the "
            f"{allowance:.3f} ms this machine allows")


def clock_offset_ns() -> int:
    """CLOCK_MONOTONIC minus CLOCK_MONOTONIC_RAW, now."""
    raw0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
    mono = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    raw1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
    return mono - (raw0 + raw1) // 2


def _port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def end_ns(flow: dict, milestone: Milestone) -> int | None:
    """When the milestone passed the client side of the link, or None if the connection lacks it."""
    flights = [f for f in flow.get("flights") or [] if f["dir"] == milestone.dir]
    if not -len(flights) <= milestone.index < len(flights):
        return None
    return flights[milestone.index][f"{milestone.edge}_ns"]


def summary(flow: dict, milestone: Milestone) -> dict:
    """The wire fields a sample keeps: its wire time, and what crossed and was lost each way."""
    c2s, s2c = flow.get("c2s") or {}, flow.get("s2c") or {}
    start, end = flow.get("syn_ns") or flow.get("open_ns"), end_ns(flow, milestone)
    server_flight = next((f for f in flow.get("flights") or [] if f["dir"] == "s2c"), {})
    since = lambda t: round((t - start) / 1e6, 4) if start is not None and t is not None else None  # noqa: E731
    return {"ms": (end - start) / 1e6 if start is not None and end is not None and end >= start else None,
            # where the time went, as the capture shows it: SYN-ACK and each flight's first and last
            # packet since the SYN (ms), so a slow sample can be split into client, link and server
            "synack_ms": since(flow.get("synack_ns")),
            # [dir, first, last, packets, pushes] per flight
            "flights_ms": [[f["dir"], since(f["first_ns"]), since(f["last_ns"]), f.get("packets"), f.get("pushes")]
                           for f in flow.get("flights") or []],
            "packets_c2s": c2s.get("packets"), "packets_s2c": s2c.get("packets"),
            "bytes_c2s": c2s.get("bytes"), "bytes_s2c": s2c.get("bytes"),
            "retrans_c2s": c2s.get("retrans", 0), "retrans_s2c": s2c.get("retrans", 0),
            "drops_c2s": c2s.get("lost", 0) + c2s.get("queue_drops", 0),
            "drops_s2c": s2c.get("lost", 0) + s2c.get("queue_drops", 0),
            "flights": len(flow.get("flights") or []),
            # the most the emulator released one of this connection's packets after its deadline (ms;
            # None from a pqlink that did not record it)
            "link_late_ms": _late_ms(c2s, s2c),
            # the server's first flight (TLS: ServerHello … Finished): segments, and writes (PSH) it came in
            "server_flight_packets": server_flight.get("packets"), "server_flight_pushes": server_flight.get("pushes")}


def quic_summary(flow: dict, sample: dict, rtt_ns: int | None) -> dict:
    """summary() of a connection over datagrams (QUIC, DTLS): its wire time ends at the datagram the sample
    names (its client's Finished, or the one that completed the response), and the record says how many
    datagrams crossed and, over QUIC, whether the server stalled at the amplification limit before the client
    finished."""
    m = sample.get("wire_milestone") or {}
    end = quic_wire.milestone_ns(flow, m["dir"], m["offset"]) \
        if m.get("dir") in ("c2s", "s2c") and isinstance(m.get("offset"), int) else None
    finished = end if m.get("dir") == "c2s" else None
    out = summary(flow, Milestone("c2s", 1, "first"))
    start = flow.get("open_ns")
    out["ms"] = (end - start) / 1e6 if start is not None and end is not None and end >= start else None
    counts = quic_wire.datagram_counts(flow)
    out.update({"datagrams_c2s": counts["c2s"]["datagrams"], "datagrams_s2c": counts["s2c"]["datagrams"]})
    if transport.of_sample(sample).amplification_factor is None:  # no address-validation limit to stall at
        return out
    amp = quic_wire.amplification(flow, rtt_ns=rtt_ns or None, finished_ns=finished)
    out.update({"stalls": amp["count"], "stall_ms": amp["stall_ms"],
                "amplification": {k: amp[k] for k in ("stalled", "limit_bytes", "sent_before_stall", "stall_ms",
                                                     "unblocked_by_ms", "count", "uncertain", "complete", "rtt_ms")}})
    return out


def _late_ms(*sides: dict) -> float | None:
    late = [s["late_max_ns"] for s in sides if s.get("late_max_ns") is not None]
    return max(late) / 1e6 if late else None


def sample_milestone(s: dict, flow: dict) -> Milestone | None:
    """The milestone a sample names itself (`wire_milestone`: the direction and how many payload bytes
    that direction sent before it), where a protocol's flights vary from connection to connection (SSH:
    the server's identification and KEXINIT come as one flight or two); None if it names none or the
    record has no flight starting there."""
    m = s.get("wire_milestone")
    if not isinstance(m, dict) or m.get("offset") is None:
        return None
    sent = 0
    for k, f in enumerate(f for f in flow.get("flights") or [] if f["dir"] == m.get("dir")):
        if sent == m["offset"]:
            return Milestone(m["dir"], k, m.get("edge", "first"))
        sent += f.get("bytes") or 0
    return None


def join(samples: list[dict], flows: list[dict], offset_ns: int, milestone: Milestone,
         rtt_ns: int | None = None) -> int:
    """Adds s["wire"] to every sample whose connection the recorder saw; returns how many. The wire
    time ends at `milestone`, or at the one a sample names itself (sample_milestone). A sample over QUIC
    joins its UDP flow (quic_summary; rtt_ns: the link's round trip, which the stall detector needs)."""
    by_port: dict[tuple, list] = {}  # (IP protocol, client port): a TCP and a UDP port may share a number
    for f in flows:
        if f.get("open_ns") is not None:  # a record without a packet at the client has no time to match
            by_port.setdefault((f.get("proto", "tcp"), _port(f["client"])), []).append(f)
    for lst in by_port.values():
        lst.sort(key=lambda f: f["open_ns"])
    joined = 0
    for s in samples:
        port, start, over = s.get("local_port"), s.get("start_mono_ns"), transport.of_sample(s)
        candidates = by_port.get((over.ip_proto, port)) if port is not None and start is not None else None
        if not candidates:
            continue
        t = start + offset_ns
        flow = _take_nearest(candidates, t)
        if flow is not None:
            s["wire"] = quic_summary(flow, s, rtt_ns) if over.datagram else \
                summary(flow, sample_milestone(s, flow) or milestone)
            # a recovery's failed first connection (Library::again in the Rust clients), which opened at its start
            first = _take_nearest(by_port.get((over.ip_proto, (s.get("first_attempt") or {}).get("local_port"))), t)
            if first is not None:
                s["wire"] = with_first_connection(s["wire"], first, flow)
            joined += 1
    return joined


def _take_nearest(candidates: list | None, t: int) -> dict | None:
    """The flow (by open time, sorted) that opened nearest to t, within MATCH_WINDOW_NS, taken from candidates."""
    if not candidates:
        return None
    opens = [f["open_ns"] for f in candidates]
    k = bisect.bisect_left(opens, t)
    best = min((j for j in (k - 1, k) if 0 <= j < len(candidates)), key=lambda j: abs(opens[j] - t))
    return candidates.pop(best) if abs(opens[best] - t) <= MATCH_WINDOW_NS else None


ADDED = ("packets_c2s", "packets_s2c", "bytes_c2s", "bytes_s2c", "retrans_c2s", "retrans_s2c", "drops_c2s",
         "drops_s2c", "flights")


def with_first_connection(second: dict, first: dict, second_flow: dict) -> dict:
    """A sample of two connections (the first failed, the second completed): its wire time from the first's SYN
    to the second's milestone, what crossed on both; the second's own timeline (flights_ms) as it was."""
    start1 = first.get("syn_ns") or first.get("open_ns")
    start2 = second_flow.get("syn_ns") or second_flow.get("open_ns")
    gap = (start2 - start1) / 1e6
    one = summary(first, Milestone("c2s", 1, "first"))
    out = {**second, "connections": 2, "first_connection_ms": round(gap, 4),
           **{k: (second.get(k) or 0) + (one.get(k) or 0) for k in ADDED}}
    out["ms"] = second["ms"] + gap if second.get("ms") is not None else None
    return out


def client_ms(s: dict, metric: str) -> float | None:
    """The client's time for what the wire record times: since its SYN over TCP (sent before any
    crypto), since its first datagram over QUIC, DTLS or IKE (which carries its key share, so leaves only after
    the key shares are made: the client's own time counts that keygen, the wire's cannot); to the metric, or to
    the phase its protocol's wire milestone marks (Timeline.wire_end)."""
    t = s.get("t_ns") or {}
    over = transport.of_sample(s)
    own = TIMELINES.get((s.get("protocol") or "tls", over.name))
    end = t.get(own.wire_end if own and own.wire_end else metric)
    if end is None:
        return None
    start = 0 if over.kernel_tcp else t.get(own.first_sent if own else Phase.CLIENT_HELLO_SENT.value)
    return (end - start) / 1e6 if start is not None else None


def agreement(samples: list[dict], metric: str) -> dict:
    """Client-measured vs wire-measured time of the samples the wire record covers."""
    diffs = sorted(client_ms(s, metric) - s["wire"]["ms"] for s in samples
                   if s.get("ok") and (s.get("wire") or {}).get("ms") is not None
                   and client_ms(s, metric) is not None)
    if not diffs:
        return {"n": 0}
    disagree = sum(1 for d in diffs if abs(d) > TOLERANCE_MS)
    return {"n": len(diffs), "median_diff_ms": round(stats.percentile(diffs, 50), 4),
            "p5_diff_ms": round(stats.percentile(diffs, 5), 4), "p95_diff_ms": round(stats.percentile(diffs, 95), 4),
            "tolerance_ms": TOLERANCE_MS, "disagree": disagree}
