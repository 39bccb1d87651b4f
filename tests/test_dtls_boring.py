"""BoringSSL's DTLS 1.3 (the dtlsboring stack: pqboring --transport udp) beside pion/dtls: each pair of the two
negotiates X25519MLKEM768 and X25519 with ECDSA (and BoringSSL with itself ML-DSA-44 and ML-KEM-1024), the clients
agree with the wire, its stateful server takes one round trip and sends no cookie (a cell that asks for one is
skipped naming it), and a lost datagram costs BoringSSL's 400 ms timer."""

import pytest

from udploss import late_by_a_timer

from pqbench import endpoints
from pqbench.endpoints import ondemand
from pqbench.measure import single
from pqbench.testbed import LinkSpec

RTT = 31.1


@pytest.fixture(scope="module")
def stacks_built(built_stack):
    ondemand.ensure(["dtlsgo", "dtlsboring"])  # built on first use, as a command naming them would
    return True


def measure(server, client, kex, sig="ecdsap256", *, n=5, link=None, ok=True, **kw) -> single.Measured:
    m = single.measure(*single.one_cell(kex, sig, n=n, protocol="dtls", server=server, client=client, cookie=False,
                                        link=link or LinkSpec.symmetric(RTT), **kw))
    assert not ok or all(s["ok"] for s in m.samples), [s.get("error") for s in m.samples if not s["ok"]][:3]
    return m


@pytest.mark.root
@pytest.mark.solo  # per-sample times against the RTT
@pytest.mark.parametrize("server,client,kex,sig", [
    ("dtlsboring", "dtlsboring", "X25519MLKEM768", "ecdsap256"), ("dtlsboring", "dtlsboring", "MLKEM1024", "mldsa44"),
    ("dtlsgo", "dtlsboring", "X25519MLKEM768", "ecdsap256"), ("dtlsboring", "dtlsgo", "X25519", "ecdsap256")])
def test_each_pair_negotiates_in_one_round_trip_and_the_client_agrees_with_the_wire(stacks_built, server, client, kex,
                                                                                      sig):
    m = measure(server, client, kex, sig, n=8)
    sigalg = "mldsa44" if sig == "mldsa44" else "ecdsa_secp256r1_sha256"
    assert {(s["group"], s["sigalg"], s["transport"]) for s in m.samples} == {(kex, sigalg, "udp")}
    for s in m.samples:
        t = s["t_ns"]
        assert 0 < t["client_hello_sent"] < t["server_hello_received"] <= t["handshake_done"], t
        assert s["dtls"]["client_hellos"] == 1 and not s["hrr"] and not s["dtls"]["cookie"], s["dtls"]
        # one round trip on the wire from the first datagram to the client's Finished (the CPU's share only adds)
        assert s["wire"]["ms"] >= RTT, s["wire"]
    assert sorted(s["wire"]["ms"] for s in m.samples)[4] < 2 * RTT
    agree = m.record["wire"]
    assert agree["n"] == 8 and abs(agree["median_diff_ms"]) < 0.25, agree


@pytest.mark.root
@pytest.mark.solo  # a clean handshake's median against the RTT
def test_a_lost_datagram_costs_boringssl_s_timer(stacks_built):
    """10 % seeded loss each way: a sample the link took a datagram from and that came late waited for BoringSSL's
    first retransmission timer (400 ms, RFC 9147's suggestion for real-time protocols), and its client says so."""
    m = measure("dtlsboring", "dtlsboring", "X25519MLKEM768", n=20, ok=False,
                link=LinkSpec.symmetric(RTT, loss=0.10, seed=48))
    base, late = late_by_a_timer(m.samples, 400, 50)  # BoringSSL's first timer
    # the client's own count: a late sample whose client lost a datagram it sent waited for its timer
    assert any(s["dtls"]["timer_expiries"] >= 1 for s in late), [s["dtls"] for s in late]
    assert RTT <= base < 2 * RTT


def test_a_cell_with_the_cookie_exchange_is_refused_naming_it(stacks_built):
    why = endpoints.unsupported("dtlsboring", "dtlsboring", "X25519MLKEM768", "ecdsap256", "handshake",
                                {"cookie": True, "transport": "udp"})
    assert why and "dtlsboring server" in why and "cookie" in why, why
    assert endpoints.unsupported("dtlsboring", "dtlsboring", "X25519MLKEM768", "ecdsap256", "handshake",
                                 {"cookie": False, "transport": "udp"}) is None
    # pion sends one, and can leave it out
    assert endpoints.unsupported("dtlsgo", "dtlsboring", "X25519MLKEM768", "ecdsap256", "handshake",
                                 {"cookie": True, "transport": "udp"}) is None


@pytest.mark.root
@pytest.mark.parametrize("server,client", [("dtlsboring", "dtlsboring"), ("dtlsgo", "dtlsboring"),
                                           ("dtlsboring", "dtlsgo")])
def test_the_mtu_axis_sets_each_side_s_datagrams(stacks_built, server, client):
    """dtls_mtu at both ends: an X25519MLKEM768 ClientHello (about 1.45 kB) takes two datagrams of 1200 bytes and one
    of 1500; the server's flight, an ML-DSA-44 chain from BoringSSL (ECDSA from pion), fewer datagrams at 1500."""
    sig = "mldsa44" if server == "dtlsboring" and client == "dtlsboring" else "ecdsap256"
    small, large = (measure(server, client, "X25519MLKEM768", sig, n=3, dtls_mtu=m) for m in (1200, 1500))
    for m, mtu, hello in ((small, 1200, 2), (large, 1500, 1)):
        for s in m.samples:
            assert (s["dtls"]["mtu"], s["dtls"]["client_hello_datagrams"]) == (mtu, hello), s["dtls"]
    per = lambda m: sorted(s["wire"]["datagrams_s2c"] for s in m.samples)[1]  # noqa: E731
    assert per(large) <= per(small), (per(large), per(small))
    if sig == "mldsa44":  # 7.8 kB from the server: at least one datagram fewer
        assert per(large) < per(small), (per(large), per(small))


@pytest.mark.root
def test_a_classical_key_share_before_the_hybrid_costs_a_hello_retry(stacks_built):
    """The key-share strategy through the offer axis: the hybrid listed first with only an X25519 share makes
    BoringSSL's server (which follows the client's order) ask for the hybrid's share: a second ClientHello, its
    ML-KEM share in it, one more round trip on the wire; the hybrid's share in the first ClientHello needs none."""
    retry = measure("dtlsboring", "dtlsboring", "X25519MLKEM768", n=3, offer="X25519 / X25519MLKEM768:X25519")
    direct = measure("dtlsboring", "dtlsboring", "X25519MLKEM768", n=3, offer="X25519MLKEM768 / X25519MLKEM768:X25519")
    for s in retry.samples:
        assert s["group"] == "X25519MLKEM768" and s["hrr"] and s["dtls"]["client_hellos"] == 2, s["dtls"]
        assert s["wire"]["ms"] >= 2 * RTT, s["wire"]  # the retry's round trip (the CPU's share only adds)
    for s in direct.samples:
        assert s["group"] == "X25519MLKEM768" and not s["hrr"] and s["dtls"]["client_hellos"] == 1, s["dtls"]
    assert min(s["dtls"]["bytes_sent"] for s in retry.samples) > max(s["dtls"]["bytes_sent"] for s in direct.samples)


@pytest.mark.root
def test_the_server_s_own_order_overrides_the_client_s(stacks_built):
    """server_groups in OpenSSL's tuple syntax as BoringSSL's server preference: a client that prefers X25519 (and
    shares it) gets X25519 from a server that follows it, and a retry for the hybrid from one that puts it first."""
    offer = "X25519 / X25519:X25519MLKEM768"
    follows = measure("dtlsboring", "dtlsboring", "X25519MLKEM768", n=2, offer=offer)
    leads = measure("dtlsboring", "dtlsboring", "X25519MLKEM768", n=2, offer=offer, server_groups="X25519MLKEM768/X25519")
    assert {(s["group"], s["hrr"]) for s in follows.samples} == {("X25519", False)}
    assert {(s["group"], s["hrr"]) for s in leads.samples} == {("X25519MLKEM768", True)}
