"""pqbench.measure.quic_wire on synthetic UDP records in pqlink's format: datagram counts, the QUIC
sample's wire milestone, and the anti-amplification stall (RFC 9000 §8.1) with its look-alikes (loss,
the handshake ending, a Retry)."""

import heapq

import pytest

from pqbench.measure.quic_wire import amplification, datagram_counts, milestone_ns

MS = 1_000_000
OPEN = 5_000 * MS  # pqlink's clock when the connection opened
RTT = 31_100_000


def record(rows, *, s2c_lost=0, overflow=0):
    """A UDP flow record from [dir, t_ns since open, bytes, fate] rows (fate defaults to delivered)."""
    dgrams = [[d, OPEN + t, n, fate[0] if fate else "delivered"] for d, t, n, *fate in rows]
    dgrams.sort(key=lambda r: r[1])
    side = {d: {"packets": sum(1 for r in dgrams if r[0] == d), "payload_bytes": sum(r[2] for r in dgrams if r[0] == d),
                "lost": sum(1 for r in dgrams if r[0] == d and r[3] == "lost"),
                "queue_drops": sum(1 for r in dgrams if r[0] == d and r[3] == "queue_drop")} for d in ("c2s", "s2c")}
    side["s2c"]["lost"] += s2c_lost
    return {"proto": "udp", "client": "10.9.0.1:40000", "server": "10.9.0.2:443", "open_ns": dgrams[0][1],
            "syn_ns": None, "synack_ns": None, "fin_ns": None, **side, "flights": [], "flights_overflow": 0,
            "datagrams": dgrams, "datagrams_overflow": overflow}


def simulate(flight, *, rtt=RTT, initial=(1200,), ack=1200, handshake_ack=True, retry=False, server_ns=500_000,
             client_ns=200_000, post=300, mtu=1200, factor=3):
    """A QUIC handshake over a link of round trip `rtt` without a rate limit, recorded at the client side.
    The client sends its Initial datagrams at 0. The server answers server_ns after the last arrives
    (with a 150-byte Retry first if `retry`, then it needs no address validation), sending `flight`
    bytes in datagrams of at most `mtu`, never more than factor × what it has received until the
    client's address is validated (a Retry token, or an ACK carrying a Handshake packet when
    `handshake_ack`). The client acknowledges each server datagram 10 µs after it arrives with an
    `ack`-byte datagram and sends its 90-byte Finished client_ns after the whole flight; the server
    answers it with `post` bytes. Returns (record, the Finished's time in pqlink's clock)."""
    one_way = rtt // 2
    events, rows, seq = [], [], [0]

    def at(t, what, *args):
        seq[0] += 1
        heapq.heappush(events, (t, seq[0], what, args))

    server = {"received": 0, "sent": 0, "validated": False, "pending": 0, "ready": None, "free": 0, "initials": 0}
    client = {"got": 0, "finished": None}

    def client_send(t, n, kind):
        rows.append(("c2s", t, n))
        at(t + one_way, "server_recv", n, kind)

    def server_send(t):
        s = server
        while s["pending"] and s["ready"] is not None and t >= s["ready"]:
            n = min(mtu, s["pending"])
            if not s["validated"] and s["sent"] + n > factor * s["received"]:
                return  # blocked by the amplification limit
            s["free"] = max(t, s["free"]) + 10_000  # 10 µs between datagrams
            s["pending"] -= n
            s["sent"] += n
            at(s["free"] + one_way, "client_recv", n, "flight")

    for n in initial:
        client_send(0, n, "initial")
    while events:
        t, _, what, args = heapq.heappop(events)
        if what == "server_recv":
            n, kind = args
            server["received"] += n
            if kind == "initial":
                server["initials"] += 1
                if server["initials"] == len(initial):
                    if retry:
                        at(t + one_way, "client_recv", 150, "retry")
                        continue
                    server["pending"], server["ready"] = flight, t + server_ns
                    at(t + server_ns, "server_wake")
            elif kind == "token":
                server["validated"] = True
                server["initials"] += 1
                if server["initials"] == 2 * len(initial):
                    server["pending"], server["ready"] = flight, t + server_ns
                    at(t + server_ns, "server_wake")
            elif kind == "ack":
                server["validated"] |= handshake_ack
            elif kind == "finished":
                at(t + 10_000 + one_way, "client_recv", post, "post")
            server_send(t)
        elif what == "server_wake":
            server_send(t)
        else:
            n, kind = args
            rows.append(("s2c", t, n))
            if kind == "retry":
                for m in initial:
                    client_send(t + 50_000, m, "token")
            elif kind == "flight":
                client["got"] += n
                client_send(t + 10_000, ack, "ack")
                if client["got"] == flight:
                    client["finished"] = t + client_ns
                    client_send(client["finished"], 90, "finished")
    return record(rows), OPEN + client["finished"]


# ---- counts and milestones ------------------------------------------------------------------------

def test_datagram_counts_come_from_the_counters():
    flow = record([("c2s", 0, 1200), ("s2c", RTT, 1200), ("s2c", RTT + 10_000, 900), ("c2s", RTT + 20_000, 50, "lost")],
                  s2c_lost=2, overflow=5)
    flow["c2s"]["packets"] += 5  # listed or not, the counters hold every datagram
    assert datagram_counts(flow) == {"c2s": {"datagrams": 7, "bytes": 1250, "lost": 1, "queue_drops": 0},
                                     "s2c": {"datagrams": 2, "bytes": 2100, "lost": 2, "queue_drops": 0}}
    with pytest.raises(ValueError, match="flow.s2c"):
        datagram_counts({"c2s": {}})


def test_milestone_is_the_datagram_that_begins_at_the_offset():
    flow = record([("c2s", 0, 1200), ("s2c", 31 * MS, 1200), ("s2c", 32 * MS, 1000), ("c2s", 33 * MS, 1200, "lost"),
                   ("c2s", 34 * MS, 90, "queue_drop"), ("c2s", 35 * MS, 40), ("s2c", 66 * MS, 300)])
    assert milestone_ns(flow, "c2s", 0) == OPEN
    # c2s: every datagram the client sent counts, dropped by the link or not
    assert milestone_ns(flow, "c2s", 1200 + 1200) == OPEN + 34 * MS
    assert milestone_ns(flow, "c2s", 1200 + 1200 + 90) == OPEN + 35 * MS
    assert milestone_ns(flow, "s2c", 2200) == OPEN + 66 * MS
    assert milestone_ns(flow, "c2s", 600) is None  # no datagram begins inside another
    assert milestone_ns(flow, "s2c", 2500) is None  # past the end
    # a server datagram the link dropped never reached the client: not in the list, not in the offset
    assert milestone_ns(record([("s2c", 1, 1000), ("s2c", 3, 500)], s2c_lost=1), "s2c", 1000) == OPEN + 3


@pytest.mark.parametrize("args, field", [(("up", 0), "dir"), (("c2s", -1), "offset"), (("c2s", 1.5), "offset")])
def test_milestone_bad_input_names_the_field(args, field):
    with pytest.raises(ValueError, match=field):
        milestone_ns(record([("c2s", 0, 1200)]), *args)


def test_a_record_without_datagrams_is_refused():
    tcp = {"proto": "tcp", "c2s": {}, "s2c": {}, "flights": []}
    with pytest.raises(ValueError, match="datagrams"):
        amplification(tcp)
    with pytest.raises(ValueError, match=r"datagrams\[0\]"):
        milestone_ns({"datagrams": [["c2s", 1, 1200, "gone"]]}, "c2s", 0)


# ---- the amplification stall ----------------------------------------------------------------------

def test_a_small_chain_fits_under_the_limit():
    flow, fin = simulate(2300)  # an ECDSA chain's flight
    r = amplification(flow, rtt_ns=RTT, finished_ns=fin)
    assert r["stalled"] is False and r["count"] == 0 and r["limit_bytes"] is None and r["uncertain"] is False


def test_a_large_chain_stalls_at_three_times_the_initial_for_a_round_trip():
    flow, fin = simulate(8000)  # ML-DSA-44 root + leaf
    r = amplification(flow, rtt_ns=RTT, finished_ns=fin)
    assert r["stalled"] is True and r["count"] == 1
    assert r["limit_bytes"] == 3 * 1200 and r["sent_before_stall"] == 3600
    # the gap at the client: a round trip, less the 20 µs from the first server datagram to the last
    # before the stall, plus the client's 10 µs to answer and the server's 10 µs to send
    assert r["stall_ms"] == pytest.approx(RTT / 1e6, abs=0.05)
    # the unblocking ACK answered the first server datagram: RTT + the server's 0.5 ms + 10 + 10 µs
    assert r["unblocked_by_ms"] == pytest.approx((RTT + 500_000 + 20_000) / 1e6, abs=0.001)
    assert r["rtt_ms"] == RTT / 1e6 and r["complete"] is True


@pytest.mark.parametrize("initial, limit, sent", [((1200,), 3600, 3600), ((1472,), 4416, 3600),
                                                  ((1200, 1200), 7200, 7200)])
def test_the_client_initial_moves_the_threshold(initial, limit, sent):
    flow, fin = simulate(9000, initial=initial)
    r = amplification(flow, rtt_ns=RTT, finished_ns=fin)
    assert r["stalled"] and (r["limit_bytes"], r["sent_before_stall"]) == (limit, sent)


def test_a_flight_that_fits_two_initials_does_not_stall():
    flow, fin = simulate(7000, initial=(1200, 1200))
    assert amplification(flow, rtt_ns=RTT, finished_ns=fin)["stalled"] is False


def test_a_retry_validates_the_address_first():
    flow, fin = simulate(8000, retry=True)
    assert amplification(flow, rtt_ns=RTT, finished_ns=fin)["stalled"] is False


def test_acks_of_initial_packets_only_can_meet_the_limit_again():
    flow, fin = simulate(20000, handshake_ack=False)
    r = amplification(flow, rtt_ns=RTT, finished_ns=fin)
    assert r["count"] >= 2 and len(r["stalls"]) == r["count"]
    assert r["stalls"][0]["limit_bytes"] == 3600 and r["stalls"][1]["limit_bytes"] > 3600
    assert all(s["stall_ms"] > RTT / 2e6 for s in r["stalls"])


def test_the_round_trip_estimated_from_the_finished():
    flow, fin = simulate(8000)
    r = amplification(flow, finished_ns=fin)
    assert r["stalled"] and r["limit_bytes"] == 3600
    assert RTT / 1e6 <= r["rtt_ms"] < RTT / 1e6 + 0.05  # the server answers the Finished at once


def test_a_factor_other_than_three():
    flow, fin = simulate(8000, factor=5)
    r = amplification(flow, 5, rtt_ns=RTT, finished_ns=fin)
    assert r["stalled"] and r["limit_bytes"] == 6000 and r["sent_before_stall"] == 6000
    assert amplification(flow, 3, rtt_ns=RTT, finished_ns=fin)["stalled"] is False  # it sent past 3×
    with pytest.raises(ValueError, match="factor"):
        amplification(flow, 0)
    with pytest.raises(ValueError, match="rtt_ns"):
        amplification(flow, rtt_ns=-5)


# Hand-made records, times in ns since the connection opened; R = 31.1 ms.
A = 31_600_000  # the server's first datagram at the client: R + 0.5 ms of server time


def test_the_handshake_ending_near_the_limit_is_no_stall():
    """The whole flight (3500 bytes) fits under 3600; the server speaks again only to answer the
    Finished, with a full datagram of response."""
    rows = [("c2s", 0, 1200), ("s2c", A, 1200), ("s2c", A + 10_000, 1200), ("s2c", A + 20_000, 1100),
            ("c2s", A + 10_000, 1200), ("c2s", A + 20_000, 1200), ("c2s", A + 30_000, 1200),
            ("c2s", A + 220_000, 90),  # Finished
            ("s2c", A + 220_000 + RTT + 10_000, 1200), ("s2c", A + 220_000 + RTT + 20_000, 1200)]
    r = amplification(record(rows), rtt_ns=RTT, finished_ns=OPEN + A + 220_000)
    assert r["stalled"] is False and r["count"] == 0
    # by bytes and times alone it looks like one: the documented reason to give finished_ns
    assert amplification(record(rows), rtt_ns=RTT)["stalled"] is True
    # no more server data at all: nothing resumed
    assert amplification(record(rows[:-2]), rtt_ns=RTT)["stalled"] is False


def test_a_lost_server_datagram_retransmitted_later_is_no_stall():
    """Flight of 3 × 1000 bytes (under the limit); the second is lost on the link and the server sends
    it again when the client's ACKs tell it (about 9/8 R after it was first sent)."""
    rows = [("c2s", 0, 1200), ("s2c", A, 1000), ("s2c", A + 20_000, 1000),
            ("c2s", A + 10_000, 1200), ("c2s", A + 30_000, 1200),
            ("s2c", A + 10_000 + RTT + RTT // 8, 1000),  # the retransmission
            ("c2s", A + 10_000 + RTT + RTT // 8 + 200_000, 90)]
    r = amplification(record(rows, s2c_lost=1), rtt_ns=RTT, finished_ns=OPEN + rows[-1][1])
    assert r["stalled"] is False
    assert r["uncertain"] is True  # the server lost a datagram: a stall could have hidden behind it


def test_a_lost_client_ack_makes_the_next_one_unblock():
    """At the limit after 3 × 1200; the ACK of the first is lost on the link, the ACK of the second
    unblocks the server."""
    ack2 = A + 20_000
    rows = [("c2s", 0, 1200), ("s2c", A, 1200), ("s2c", A + 10_000, 1200), ("s2c", A + 20_000, 1200),
            ("c2s", A + 10_000, 1200, "lost"), ("c2s", ack2, 1200), ("c2s", A + 30_000, 1200),
            ("s2c", ack2 + RTT + 10_000, 1200), ("s2c", ack2 + RTT + 20_000, 1200)]
    r = amplification(record(rows), rtt_ns=RTT)
    assert r["stalled"] and r["limit_bytes"] == 3600 and r["sent_before_stall"] == 3600
    assert r["unblocked_by_ms"] == ack2 / 1e6
    assert r["stall_ms"] == pytest.approx((ack2 + RTT + 10_000 - (A + 20_000)) / 1e6)
    # had every ACK been lost, the server could only wait: a resumption without a client datagram
    # that reached it (its own timer) is no amplification stall
    silent = [row if row[0] == "s2c" or row[1] == 0 else (*row[:3], "lost") for row in rows]
    assert amplification(record(silent), rtt_ns=RTT)["stalled"] is False


def test_a_stall_hidden_behind_a_lost_server_datagram_is_reported_uncertain():
    rows = [("c2s", 0, 1200), ("s2c", A, 1200), ("s2c", A + 20_000, 1200),  # the one between was lost
            ("c2s", A + 10_000, 1200), ("c2s", A + 30_000, 1200), ("s2c", A + 10_000 + RTT + 10_000, 1200)]
    r = amplification(record(rows, s2c_lost=1), rtt_ns=RTT)
    assert r["stalled"] is False and r["uncertain"] is True


def test_a_short_pause_is_no_stall():
    """At the limit, but the server's next datagram came a tenth of R later: it did not go quiet."""
    rows = [("c2s", 0, 1200), ("s2c", A, 1200), ("s2c", A + 10_000, 1200), ("s2c", A + 20_000, 1200),
            ("c2s", A - RTT + 1_000_000, 1200),  # a client datagram the server got just after the third
            ("s2c", A + 20_000 + RTT // 10, 1200)]
    assert amplification(record(rows), rtt_ns=RTT)["stalled"] is False


def test_a_truncated_list_says_so():
    flow, fin = simulate(8000)
    flow["datagrams_overflow"] = 3
    r = amplification(flow, rtt_ns=RTT, finished_ns=fin)
    assert r["stalled"] and r["complete"] is False
