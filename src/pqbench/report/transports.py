"""The report's section on transports (cells over QUIC): each QUIC cell beside the TCP cell of the same
algorithms on the same link (same loss seed), with what the server's certificate chain met.

  per cell   chain bytes, datagrams each way, the share of handshakes whose server stalled at QUIC's
             anti-amplification limit (RFC 9000 §8.1: 3 × the client's bytes until its address is
             validated) and the stall's length, the extra round trips the stall cost, p50 over TCP and
             over QUIC and their paired difference
The stall comes from the emulator's datagram record (pqbench.measure.quic_wire); the budget is the model's
(3 × the Initial datagrams that carried the ClientHello)."""

from __future__ import annotations

from pqbench import stats, transport
from pqbench.analysis import model
from pqbench.analysis.paired import WITH_AXIS
from pqbench.report.tables import Table, ms, with_ci
from pqbench.report.sections import Section, register

# What a TCP cell and a QUIC cell share to be compared: everything but the transport's own axes.
SAME = ("kex", "sig", "scenario", "rtt_ms", "loss", "rate_mbit", "mtu", "mode", "page", "server", "client", "trace",
        "queue", "cross", "offer", "server_groups", "compress", "pad")


def _key(c) -> tuple:
    seed = (c.row.get("link") or {}).get("seed") if isinstance(c.row.get("link"), dict) else None
    return tuple(c.row.get(f) for f in SAME) + (seed,)


def _over(c) -> transport.Transport:
    return transport.get(c.row.get("transport") or None)


def _quic(c) -> bool:
    """A cell over a transport whose server meets an amplification limit (QUIC): one this section is about."""
    return _over(c).amplification_factor is not None


def _setting(c) -> str:
    parts = [f"Initial {c.row['initial_size']}" if c.row.get("initial_size") else "default Initial"]
    return ", ".join(parts + (["Retry"] if c.row.get("quic_retry") else []))


def table(a) -> Table | None:
    quic = [c for c in a.cells if _quic(c) and c.ok]
    if not quic:
        return None
    tcp = {_key(c): c for c in a.cells
           if _over(c).is_default and c.ok and not any(c.row.get(k) for k in WITH_AXIS["transport"])}
    rows = []
    for c in sorted(quic, key=lambda c: (c.row.get("rtt_ms") or 0, c.row.get("loss") or 0,
                                          c.tls.get("certificate_bytes") or 0, c.row.get("sig"), _setting(c))):
        base = tcp.get(_key(c))
        w, rtt = c.wire, c.row.get("rtt_ms") or 0
        stall = w.get("stall_ms")
        budget = model.amplification_budget(int(c.tls["client_hello_bytes"]), c.row.get("initial_size") or
                                            model.QUIC_DATAGRAM) if c.tls.get("client_hello_bytes") else None
        rows.append([str(c.row.get("sig")), str(c.row.get("kex")), _condition(c), _setting(c),
                     _int(c.tls.get("certificate_bytes")), _int(budget),
                     f"{_int(w.get('packets_c2s'))} / {_int(w.get('packets_s2c'))}",
                     f"{w['stall_share']:.0%}" if w.get("stall_share") is not None else "–",
                     ms(stall) if stall is not None else "–",
                     f"{stall / rtt:.1f}" if stall is not None and rtt else "–",
                     ms(base.p50) if base else "–", ms(c.p50),
                     with_ci(stats.bootstrap_diff(base.durations, c.durations, 50)) if base else "–"])
    return Table("transports", "TCP vs QUIC: the same algorithms on the same link, and QUIC's amplification limit",
                 ["signature", "key exchange", "condition", "QUIC", "chain bytes", "3× budget", "datagrams c→s / s→c",
                  "stalled", "stall ms", "stall in RTTs", "TCP p50", "QUIC p50", "QUIC − TCP ms [95 % CI]"], rows,
                 "QUIC saves TCP's handshake round trip. Until the client's address is validated a server sends at "
                 "most 3 × the bytes it received (RFC 9000 §8.1): the client's Initial datagrams carrying the "
                 "ClientHello, each padded to the Initial size (the budget column, from the model). A chain that "
                 "does not fit waits for the client's next datagram, about one round trip: 'stalled' is the share "
                 "of handshakes whose server stopped at the limit, from the emulator's datagram record at the "
                 "client side, and 'stall ms' the median gap it left. A Retry validates the address first (one "
                 "more round trip, then no limit). Datagrams are medians per handshake; the difference is of "
                 "medians with a bootstrap CI, against the TCP cell with the same loss seed.")


def _condition(c) -> str:
    from pqbench.experiment.condition import condition
    row = {k: v for k, v in c.row.items() if k not in ("transport", "quic_retry", "initial_size")}
    return condition(row, short=True)


def _int(v) -> str:
    return "–" if v is None else f"{v:.0f}"


register(Section("transports", 18, lambda con, run_id, a: [table(a)]))
