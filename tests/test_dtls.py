"""DTLS 1.3 as a protocol of the endpoint seam (issue 48), through pqbench's one-cell path over the emulated link:
pion/dtls (the dtlsgo stack) negotiates X25519MLKEM768 with itself and X25519 when post-quantum is off; the
server's cookie costs one round trip and, on the wire, a second ClientHello (the post-quantum key share sent
twice); the client's clock agrees with the wire's; what the stack cannot do is a reason. Times are judged on the
emulator's record and against the link's round trip, far above the CPU's share."""

import pytest

from udploss import late_by_a_timer

from pqbench import endpoints
from pqbench.endpoints import ondemand
from pqbench.endpoints.base import ClientJob
from pqbench.endpoints.dtlsgo import build
from pqbench.errors import BadInput, MissingCapability
from pqbench.measure import single
from pqbench.testbed import LinkSpec

RTT = 31.1
MLKEM768_SHARE = 1184 + 32  # X25519MLKEM768's client key share (ML-KEM-768 encapsulation key + X25519)


@pytest.fixture(scope="module")
def dtlsgo_built(built_stack):
    ondemand.ensure(["dtlsgo"])  # built on first use, as a command naming the stack would
    assert build.binary().exists(), f"not built: {build.binary()}"
    return build.binary()


def measure(kex, *, n=5, **kw) -> single.Measured:
    m = single.measure(*single.one_cell(kex, "ecdsap256", n=n, protocol="dtls", server="dtlsgo", client="dtlsgo",
                                        link=LinkSpec.symmetric(RTT), **kw))
    assert all(s["ok"] for s in m.samples), [s.get("error") for s in m.samples if not s["ok"]][:3]
    return m


def wire_p50(m) -> float:
    times = sorted(s["wire"]["ms"] for s in m.samples)
    return times[len(times) // 2]


@pytest.mark.root
@pytest.mark.solo  # per-sample times against the RTT: beside four workers a clean handshake took 151 ms (C22)
@pytest.mark.parametrize("kex", ["X25519MLKEM768", "X25519"])
def test_dtlsgo_negotiates_the_asked_group_over_udp_and_the_client_agrees_with_the_wire(dtlsgo_built, kex):
    m = measure(kex, n=8)
    assert {(s["group"], s["sigalg"], s["transport"]) for s in m.samples} == {(kex, "ecdsa_secp256r1_sha256", "udp")}
    for s in m.samples:
        t = s["t_ns"]
        assert 0 < t["client_hello_sent"] < t["server_hello_received"] <= t["handshake_done"], t
        # every datagram it wrote to its Finished crossed the link, then its close_notify
        assert s["wire"]["datagrams_c2s"] == s["dtls"]["datagrams_sent"] + 1, (s["wire"], s["dtls"])
    # the cookie's round trip and the server's flight: two round trips on the wire, from the first datagram (the
    # CPU's share only adds: judged from below, and the median not a third round trip)
    assert all(s["wire"]["ms"] >= 2 * RTT for s in m.samples) and wire_p50(m) < 3 * RTT
    agree = m.record["wire"]
    assert agree["n"] == 8 and abs(agree["median_diff_ms"]) < 0.25, agree


@pytest.mark.root
@pytest.mark.solo  # per-sample times against the RTT (C21: +10 ms on the cookie's round trip beside four workers)
def test_a_cookie_costs_a_round_trip_and_sends_the_post_quantum_client_hello_twice_on_the_wire(dtlsgo_built):
    on, off = measure("X25519MLKEM768", cookie=True), measure("X25519MLKEM768", cookie=False)
    assert {s["dtls"]["client_hellos"] for s in on.samples} == {2} and all(s["hrr"] for s in on.samples)
    assert {s["dtls"]["client_hellos"] for s in off.samples} == {1} and not any(s["hrr"] for s in off.samples)
    # on the wire: the ClientHello, its ML-KEM share in it, crossed twice
    extra = [a["wire"]["bytes_c2s"] - b["wire"]["bytes_c2s"] for a, b in zip(on.samples, off.samples)]
    assert all(MLKEM768_SHARE < e < 2 * MLKEM768_SHARE for e in extra), extra
    # the ServerHello one round trip after the ClientHello without the cookie, two with it (a CPU's delay only
    # adds: each judged from below, the median without it not a second round trip)
    hello = lambda s: (s["t_ns"]["server_hello_received"] - s["t_ns"]["client_hello_sent"]) / 1e6  # noqa: E731
    assert all(hello(s) >= 2 * RTT for s in on.samples) and all(hello(s) >= RTT for s in off.samples)
    assert sorted(map(hello, off.samples))[len(off.samples) // 2] < 2 * RTT


@pytest.mark.root
@pytest.mark.solo  # a clean handshake's median against the RTT (C22: 151 ms beside four workers)
def test_a_lost_datagram_costs_its_sender_s_timer_not_a_round_trip(dtlsgo_built):
    """10 % seeded loss each way: a sample the link took a datagram from (the emulator's record) and that came late
    waited for a retransmission timer (pion's first is 1 s), never only a round trip or two as TCP's fast
    retransmit or QUIC's packet threshold would; the clean ones take their two round trips."""
    m = single.measure(*single.one_cell("X25519MLKEM768", "ecdsap256", n=20, protocol="dtls", server="dtlsgo",
                                        client="dtlsgo", link=LinkSpec.symmetric(RTT, loss=0.10, seed=48)))
    base, _ = late_by_a_timer(m.samples, 1000, 100)  # pion's first timer, 1 s
    assert 2 * RTT <= base < 3 * RTT


def test_what_dtlsgo_cannot_do_is_a_reason_and_a_bad_axis_names_its_option(dtlsgo_built):
    caps = endpoints.get("dtlsgo").capabilities()
    assert caps.protocol == "dtls" and caps.transports == ("udp",)
    assert "ML-DSA" in (caps.unsupported("X25519", "mldsa44", "server") or "").upper().replace("MLDSA", "ML-DSA")
    assert caps.unsupported("X25519MLKEM768", "ecdsap256", "client") is None
    client = endpoints.get("dtlsgo").client()
    j = ClientJob(host="10.0.0.2", port=4433, groups=["X25519"], cafile=None, servername="s", transport="udp")
    assert client.argv(j, 1, 0, None)[1] == "client"
    with pytest.raises(MissingCapability, match="only DTLS over UDP"):
        client.argv(ClientJob(**{**j.__dict__, "transport": "tcp"}), 1, 0, None)
    with pytest.raises(BadInput) as e:  # DTLS runs over UDP alone
        single.one_cell("X25519", "ecdsap256", protocol="dtls", server="dtlsgo", client="dtlsgo", transport="tcp")
    assert e.value.field == "--transport" and "DTLS does not run over TCP" in str(e.value)
    from pqbench.cli import main
    assert main(["handshake", "--protocol", "dtls", "--kex", "X25519", "--sig", "ecdsap256", "--target",
                 "dtls://127.0.0.1:4433"]) == 3  # no DTLS target: said, with what to do instead
    with pytest.raises(BadInput) as e:  # the cookie is DTLS's
        single.one_cell("X25519", "ecdsap256", cookie=False)
    assert e.value.field == "--cookie"


def test_go_unit_tests_pass_offline(dtlsgo_built):
    """native/dtlsgo's own tests (the ServerHello and HelloRetryRequest read off the datagrams, a loopback
    handshake with and without the cookie)."""
    from conftest import assert_go_unit_tests_pass
    assert_go_unit_tests_pass("dtlsgo")


def test_the_udp_preset_sets_dtls_and_ike_over_their_own_transport_beside_tls_over_tcp_and_quic():
    from pathlib import Path
    from pqbench.experiment import cells, spec
    got = cells.expand(spec.read(Path(__file__).parent.parent / "experiments" / "udp.toml"))
    by = {}
    for c in got:
        by.setdefault((c.protocol, c.transport_name), []).append(c)
    # IKEv2's with 0, 1 or 2 ML-KEMs (additional_ke)
    assert {k: len(v) for k, v in by.items()} == {("dtls", "udp"): 36, ("ike", "udp"): 72, ("tls", "tcp"): 36,
                                                  ("tls", "quic"): 36}
    assert {c.cookie for c in by["dtls", "udp"]} == {True} and {c.cookie for c in by["tls", "tcp"]} == {None}
    assert {c.cookie for c in by["ike", "udp"]} == {None} and {c.server for c in by["ike", "udp"]} == {"strongswan"}
    # each DTLS and IKEv2 cell has its TLS partners on the same link (the report's protocol table pairs them)
    link = lambda c: (c.kex, c.scenario.rtt_ms, c.scenario.loss, c.mtu)  # noqa: E731
    assert {link(c) for c in by["dtls", "udp"]} == {link(c) for c in by["tls", "tcp"]}
    assert {link(c) for c in by["ike", "udp"]} == {link(c) for c in by["tls", "tcp"]}


def test_the_protocols_table_pairs_dtls_over_udp_with_tls_over_tcp_on_the_same_link():
    """DTLS's own transport and its cookie do not keep a DTLS cell from its TLS partner over TCP; TLS over QUIC
    stays apart (the transports table sets it beside TCP)."""
    from pqbench import protocol as proto
    from pqbench.analysis.cells import CONDITION_FIELDS
    from pqbench.report.tables import _shared_condition

    class Row:  # what the table reads of a cell: its row and its condition
        def __init__(self, **given):
            self.row = {f: None for f in CONDITION_FIELDS} | {"rtt_ms": 31.1, "loss": 0.01} | given

        def condition(self):
            return tuple(self.row.get(f) for f in CONDITION_FIELDS) + (1,)

    side = [proto.get("tls"), proto.get("dtls")]
    tls = _shared_condition(Row(protocol="tls"), side)
    assert _shared_condition(Row(protocol="dtls", transport="udp", cookie=True), side) == tls
    assert _shared_condition(Row(protocol="tls", transport="quic"), side) != tls
    assert _shared_condition(Row(protocol="dtls", transport="udp", cookie=True, rtt_ms=78.6), side) != tls
