"""The report's loss table for handshakes over datagrams (pqbench.report.datagrams): each lossy DTLS or IKEv2 cell
against the same cell without loss, its late handshakes counted in the client stack's first retransmission timer
(or the cell's retransmit_timeout); TLS over QUIC is not in it (it has no such timer)."""

from types import SimpleNamespace

import numpy as np

from pqbench.report import datagrams


def cell(loss, durations, protocol="dtls", transport="udp", server="dtlsgo", client="dtlsboring", **row):
    d = np.array(durations, dtype=float)
    return SimpleNamespace(row={"protocol": protocol, "transport": transport, "server": server, "client": client,
                                "kex": "X25519MLKEM768", "sig": "ecdsap256", "rtt_ms": 31.1, "mode": "handshake",
                                "loss": loss, **row},
                           ok=d.size, n=d.size, durations=d, p50=float(np.median(d)),
                           wire={"packets_c2s": 4, "packets_s2c": 4})


def test_a_late_handshake_is_counted_in_the_client_s_timer():
    clean = cell(0, [32.0] * 20)
    lossy = cell(0.05, [32.0] * 17 + [432.0] * 3)
    t = datagrams.loss_table(SimpleNamespace(cells=[clean, lossy]))
    (row,) = t.rows
    got = dict(zip(t.headers, row))
    # pion's server (1 s) and BoringSSL's client (400 ms): the shorter fires first
    assert (got["late"], got["first timers ms (server / client)"], got["in the shorter timer"]) == \
        ("15%", "1000 / 400", "1.00"), got
    assert got["late by ms (median)"].startswith("400"), got


def test_ike_s_own_timeout_and_pion_s_timer_are_the_units():
    ike = [cell(0, [70.0] * 10, protocol="ike", server="strongswan", client="strongswan", retransmit_timeout=500.0),
           cell(0.03, [70.0] * 9 + [570.0], protocol="ike", server="strongswan", client="strongswan",
                retransmit_timeout=500.0)]
    pion = [cell(0, [33.0] * 10, client="dtlsgo"), cell(0.03, [33.0] * 8 + [1033.0] * 2, client="dtlsgo")]
    t = datagrams.loss_table(SimpleNamespace(cells=ike + pion))
    units = {r[1]: (r[10], r[11]) for r in t.rows}
    assert units == {"strongswan → strongswan": ("500 / 500", "1.00"), "dtlsgo → dtlsgo": ("1000 / 1000", "1.00")}, \
        t.rows


def test_tls_over_quic_has_no_timer_row():
    cells = [cell(0, [20.0] * 5, protocol="tls", transport="quic"), cell(0.05, [20.0, 60.0], protocol="tls",
                                                                          transport="quic")]
    assert datagrams.loss_table(SimpleNamespace(cells=cells)) is None
