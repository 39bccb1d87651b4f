"""The lower-bound model against hand-computed timelines (no root)."""

import pytest

from pqbench.algorithms import catalog
from pqbench.analysis import model
from pqbench.analysis.model import Crypto, Flights, Link, lower_bound

SMALL = Flights(client_hello=1421, server_flight=1968)  # X25519MLKEM768 + ECDSA P-256, as measured
NO_CRYPTO = Crypto()


def test_handshake_is_two_round_trips_on_an_unlimited_link():
    b = lower_bound(Link.symmetric(10), SMALL, NO_CRYPTO)
    assert b.total_ms == pytest.approx(20.0)
    assert b.round_trips == 2
    assert b.parts == pytest.approx({"rtt_ms": 20.0, "serialisation_ms": 0, "slow_start_ms": 0, "crypto_ms": 0})


def test_crypto_on_the_critical_path_adds_up():
    c = Crypto(keygen=0.1, encaps=0.2, decaps=0.3, sign=0.4, verify=0.5, source="measured")
    b = lower_bound(Link.symmetric(10), SMALL, c)
    assert b.parts["crypto_ms"] == pytest.approx(0.1 + 0.2 + 0.3 + 0.4 + 2 * 0.5)
    assert b.total_ms == pytest.approx(20 + 2.0)
    resumed = lower_bound(Link.symmetric(10), SMALL, c, mode="resume")  # no signature, no verification
    assert resumed.total_ms == pytest.approx(20 + 0.1 + 0.2 + 0.3)
    three = lower_bound(Link.symmetric(10), SMALL, c, verifies=3)  # one intermediate
    assert three.total_ms == pytest.approx(22.5)


def test_serialisation_at_the_link_rate_counts_headers_per_segment():
    b = lower_bound(Link.symmetric(10, rate_mbit=1), SMALL, NO_CRYPTO)
    # 1 Mbit/s = 125 bytes/ms. SYN and SYN-ACK 60 B each; ClientHello 1421 B in one segment (+52 B
    # IP/TCP); server flight 1968 B in two segments (1448 + 520, +52 B each).
    wire = 60 + 60 + (1421 + 52) + (1968 + 2 * 52)
    assert b.parts["serialisation_ms"] == pytest.approx(wire / 125)
    assert b.total_ms == pytest.approx(20 + wire / 125)


def test_smaller_mtu_means_more_headers():
    b = lower_bound(Link.symmetric(10, rate_mbit=1, mtu=576), SMALL, NO_CRYPTO)
    mss = 576 - 52
    segs_c, segs_s = -(-1421 // mss), -(-1968 // mss)
    wire = 120 + 1421 + 52 * segs_c + 1968 + 52 * segs_s
    assert b.total_ms == pytest.approx(20 + wire / 125)


@pytest.mark.parametrize("initcwnd,extra_rounds", [(14, 0), (10, 1), (3, 2), (1, 3)])
def test_a_flight_larger_than_initcwnd_waits_for_acks(initcwnd, extra_rounds):
    # 20000 B = 14 segments of 1448 B. Slow start sends initcwnd, then twice that per round:
    # cwnd 10: 10 + 20 -> 1 extra round; 3: 3 + 6 + 12 -> 2; 1: 1 + 2 + 4 + 8 -> 3.
    big = Flights(client_hello=1421, server_flight=20000)
    b = lower_bound(Link.symmetric(10, initcwnd=initcwnd), big, NO_CRYPTO)
    assert b.total_ms == pytest.approx(20 + 10 * extra_rounds)
    assert b.parts["slow_start_ms"] == pytest.approx(10 * extra_rounds)


def test_a_large_client_hello_waits_too():
    big = Flights(client_hello=16000, server_flight=1968)  # 12 segments against cwnd 10
    assert lower_bound(Link.symmetric(10), big, NO_CRYPTO).total_ms == pytest.approx(30)


def test_page_fetch_adds_a_round_trip_and_slow_start_of_the_body():
    small = Flights(1421, 1968, response=model.http_response(1000))
    assert lower_bound(Link.symmetric(10), small, NO_CRYPTO, mode="page").total_ms == pytest.approx(30)
    # 100 kB: header 150 + body + 7 records x 22 = 100304 B = 70 segments. The server's cwnd grew
    # from 10 by its 2 handshake segments: 12, then 24, 48 -> 2 extra rounds.
    big = Flights(1421, 1968, response=model.http_response(100_000))
    assert big.response == 100_304
    b = lower_bound(Link.symmetric(10), big, NO_CRYPTO, mode="page")
    assert b.total_ms == pytest.approx(30 + 20)
    assert b.round_trips == 3


def test_requests_on_one_connection_cost_one_round_trip_each():
    f = Flights(1421, 1968, response=model.http_response(1000))
    assert lower_bound(Link.symmetric(10), f, NO_CRYPTO, mode="requests", requests=4).total_ms == pytest.approx(60)


def test_asymmetric_delays_add_to_the_rtt():
    link = Link(delay_c2s_ms=2, delay_s2c_ms=8)
    assert lower_bound(link, SMALL, NO_CRYPTO).total_ms == pytest.approx(20)


def test_link_from_a_stored_linkspec():
    from pqbench.testbed import LinkSpec
    spec = LinkSpec.symmetric(31.1, rate_mbit=10, mtu=1400)
    link = Link.from_linkspec(spec.to_dict(), initcwnd=4)
    assert (link.rtt_ms, link.rate_c2s_mbit, link.mtu, link.initcwnd) == (pytest.approx(31.1), 10, 1400, 4)


def test_measured_flights_reproduce_the_tcp_payload_of_a_real_handshake():
    # From a real X25519MLKEM768 + ECDSA P-256 sample: ClientHello 1416 B, ServerHello 1210 B,
    # EE 10, Certificate 518, CertificateVerify 79, Finished 52 (1869 B of messages); TCP_INFO
    # counted 1501 B sent and 1968 B received.
    f = model.measured_flights(1416, 1869, 1210, 518, 79)
    assert f.client_hello + f.client_finished == 1501
    assert f.server_flight == 1968


def test_catalog_flights_are_close_to_measured_ones():
    f = model.catalog_flights(catalog.find("X25519MLKEM768"), catalog.find("ecdsap256"))
    assert f.source == "catalog"
    assert f.client_hello == pytest.approx(1421, abs=40)
    assert f.server_flight == pytest.approx(1968, abs=60)
    resumed = model.catalog_flights(catalog.find("X25519MLKEM768"), catalog.find("ecdsap256"), resume=True)
    assert resumed.server_flight < f.server_flight - 500


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError):
        lower_bound(Link.symmetric(10), SMALL, NO_CRYPTO, mode="bogus")


def test_quic_skips_tcps_round_trip_and_pays_one_where_the_chain_outgrows_three_times_the_initial():
    """RFC 9000 §8.1: a server flight over 3 × the client's Initial bytes waits one round trip for the
    client's next datagram; one within it does not. A bigger Initial that carries the ClientHello in one
    datagram instead of two lowers the budget (3 × 1472 < 3 × 2 × 1200)."""
    lk = model.Link.symmetric(30.0)
    small = model.Flights(client_hello=1421, server_flight=2000)
    big = model.Flights(client_hello=1421, server_flight=7900)
    none = model.Crypto()
    assert model.lower_bound(lk, small, none, transport="tcp").total_ms == pytest.approx(60.0)
    assert model.lower_bound(lk, small, none, transport="quic").total_ms == pytest.approx(30.0)
    stalled = model.lower_bound(lk, big, none, transport="quic")
    assert stalled.total_ms == pytest.approx(60.0) and stalled.parts["slow_start_ms"] == pytest.approx(30.0)
    assert model.amplification_budget(1421) == 3 * 2 * 1200
    assert model.amplification_budget(1421, 1472) == 3 * 1472
    fits = model.Flights(client_hello=1421, server_flight=6000)  # within 7200, beyond 4416
    assert model.lower_bound(lk, fits, none, transport="quic").total_ms == pytest.approx(30.0)
    assert model.lower_bound(lk, fits, none, transport="quic", initial_size=1472).total_ms == pytest.approx(60.0)
