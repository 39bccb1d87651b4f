"""The report's section on handshakes over datagrams with a timer of their own (DTLS, IKEv2; pqbench.udp): what a
lost datagram costs, in the unit it is paid in.

  loss penalty   per protocol, stack pair, algorithms and link: p50 and p95, the share of handshakes that came late
                 (beyond the same cell without loss by half a round trip) and how late (median), in the shorter of
                 the two stacks' first retransmission timers (Capabilities.first_timer_ms, or the cell's
                 retransmit_timeout):
                 a lost datagram costs a timer there, where TCP and QUIC pay about a round trip; datagrams each way
"""

from __future__ import annotations

import numpy as np

from pqbench import axis, endpoints
from pqbench import protocol as proto
from pqbench import transport
from pqbench.report.tables import Table, condition, ms
from pqbench.report.sections import Section, register

# What a lossy cell and its clean partner share: everything but the loss (and the link's seed, which the loss sets).
_SAME = ("protocol", "server", "client", "kex", "sig", "rtt_ms", "rate_mbit", "trace", "queue", "mode")


def _timed_over_datagrams(c) -> bool:
    """A cell of a protocol other than the default one (TLS) over a datagram transport: DTLS, IKEv2."""
    return not proto.get(c.row.get("protocol")).is_default and transport.get(c.row.get("transport") or None).datagram


def _key(c) -> tuple:
    return tuple(c.row.get(f) for f in _SAME) + tuple(c.row.get(n) for n in axis.names())


def _timer_ms(c, side: str) -> float | None:
    """The first retransmission timer of the cell's stack on side ("server", "client"): the cell's
    retransmit_timeout where it sets one."""
    if c.row.get("retransmit_timeout"):
        return float(c.row["retransmit_timeout"])
    try:
        return endpoints.get(str(c.row.get(side))).capabilities().first_timer_ms
    except Exception:  # a stack this build no longer knows
        return None


def loss_table(a) -> Table | None:
    cells = [c for c in a.cells if c.ok and _timed_over_datagrams(c)]
    lossy = [c for c in cells if c.row.get("loss")]
    if not lossy:
        return None
    clean = {_key(c): c for c in cells if not c.row.get("loss")}
    rows = []
    for c in sorted(lossy, key=lambda c: (str(c.row.get("protocol")), str(c.row.get("server")),
                                          str(c.row.get("client")), c.row.get("rtt_ms") or 0, str(c.row.get("kex")),
                                          c.row.get("loss") or 0)):
        base, timers = clean.get(_key(c)), (_timer_ms(c, "server"), _timer_ms(c, "client"))
        # a lost datagram waits for the side that sends again first: the client's ClientHello, or the server's flight
        timer = min((t for t in timers if t), default=None)
        rtt = c.row.get("rtt_ms") or 0
        late = c.durations[c.durations > base.p50 + rtt / 2] - base.p50 if base is not None else np.array([])
        extra = float(np.median(late)) if late.size else None
        w = c.wire
        rows.append([proto.get(c.row.get("protocol")).label, f"{c.row.get('server')} → {c.row.get('client')}",
                     str(c.row.get("kex")), condition(c), f"{c.ok} / {c.n}", ms(base.p50) if base else "–",
                     ms(c.p50), ms(float(np.percentile(c.durations, 95))),
                     f"{late.size / c.durations.size:.0%}" if base is not None and c.durations.size else "–",
                     ms(extra) if extra is not None else "–", " / ".join(f"{t:g}" if t else "–" for t in timers),
                     f"{extra / timer:.2f}" if extra is not None and timer else "–",
                     f"{rtt and extra / rtt:.1f}" if extra is not None and rtt else "–",
                     f"{w.get('packets_c2s') or 0:.0f} / {w.get('packets_s2c') or 0:.0f}"])
    return Table("loss-penalty", "Loss over datagrams: what a lost datagram costs DTLS and IKEv2, in timers",
                 ["protocol", "server → client", "key exchange", "condition", "ok / n", "p50 without loss", "p50",
                  "p95", "late", "late by ms (median)", "first timers ms (server / client)", "in the shorter timer",
                  "in RTTs",
                  "datagrams c→s / s→c"], rows,
                 "Each lossy cell against the same cell without loss (same stacks, algorithms, round trip and "
                 "axes): 'late' is the share of its handshakes slower than that cell's median by more than half a "
                 "round trip, 'late by' their median excess. DTLS and IKEv2 retransmit a flight when their own timer "
                 "expires (each stack's first timeout: pion/dtls 1 s, BoringSSL 400 ms, strongSwan 4 s or the cell's "
                 "retransmit_timeout), so a loss costs about one timer of the side that sends again first (the "
                 "client for its ClientHello; for the server's flight, whichever fires first), not the round trip "
                 "TCP's fast retransmit or QUIC's packet threshold would; a loss of the retransmission too costs the "
                 "doubled timer after it. Datagrams are medians per handshake from the emulator's record.")


register(Section("datagrams", 19, lambda con, run_id, a: [loss_table(a)]))
