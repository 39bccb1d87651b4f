"""What deployed clients and servers do, measured with nginx and pqtimer over an emulated link: two key
shares, a wrong key-share prediction (HelloRetryRequest), certificate compression (RFC 8879) and 0-RTT
early data on resumption. One testbed and one nginx with a site per server configuration."""

import pytest

from pqbench import endpoints, stats
from pqbench.algorithms import certs
from pqbench.endpoints.base import DEFAULT_PAGES, ClientJob, Serving, Site
from pqbench.endpoints.openssl.pqtimer import Pqtimer
from pqbench.measure import sampler
from pqbench.measure.rig import Rig
from pqbench.testbed import LinkSpec

pytestmark = [pytest.mark.root, pytest.mark.slow]

RTT = 20  # ms: the round trips these tests count stand well above the emulator's and the CPU's noise
GROUPS = ["X25519MLKEM768", "X25519"]
CLIENT_CHOICE, HYBRID_FIRST, X25519_FIRST, COMPRESSING, EARLY = 4433, 4434, 4435, 4436, 4437
X25519MLKEM768_SHARE = 1184 + 32  # ML-KEM-768 encapsulation key + X25519 public key


@pytest.fixture(scope="module")
def bed(built_stack, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("deployment")
    chain = certs.make_chain("ecdsap256", run_dir / "certs")
    sites = [Site(CLIENT_CHOICE, chain),  # the run's groups, one tuple: the client's preference decides
             Site(HYBRID_FIRST, chain, server_groups="X25519MLKEM768/X25519"),  # the hybrid strictly first
             Site(X25519_FIRST, chain, server_groups="X25519:X25519MLKEM768"),  # one tuple, the server's order
             Site(COMPRESSING, chain, compress_certs=True),
             Site(EARLY, chain, early_data=True)]
    serving = Serving(run_dir / "nginx", sites, GROUPS, dict(DEFAULT_PAGES), 4)
    with Rig(endpoints.get("openssl"), serving, LinkSpec.symmetric(rtt_ms=RTT)) as rig:
        yield {"rig": rig, "chain": chain, "dir": run_dir}


def measure(bed, port, n=10, group="X25519", **job) -> list[dict]:
    rig, chain = bed["rig"], bed["chain"]
    j = ClientJob(host=rig.tb.server_addr, port=port, groups=[group], cafile=str(chain.root_cert),
                  servername=chain.server_name, **job)
    samples = sampler.run(Pqtimer(), j, n, 1, rig.place("client"), bed["dir"])
    assert all(s["ok"] for s in samples), [s["error"] for s in samples if not s["ok"]][:3]
    return samples


def p50(samples, phase="handshake_done") -> float:
    return stats.median([s["t_ns"][phase] / 1e6 for s in samples])


def shares(sample, hello=0) -> list[tuple[str, int]]:
    return [(k["group"].lower(), k["bytes"]) for k in sample["client_hellos"][hello]["key_shares"]]


def test_two_key_shares_travel_in_one_client_hello_and_the_server_chooses_as_configured(bed):
    one = measure(bed, CLIENT_CHOICE, n=3, group="X25519")
    two = measure(bed, CLIENT_CHOICE, n=3, offer="X25519MLKEM768+X25519")
    assert all(shares(s) == [("x25519", 32)] for s in one)
    assert all(shares(s) == [("x25519mlkem768", X25519MLKEM768_SHARE), ("x25519", 32)] for s in two)
    # the message callback's size: one more share (group, length, key) and one more supported group
    grown = two[0]["client_hellos"][0]["bytes"] - one[0]["client_hellos"][0]["bytes"]
    assert X25519MLKEM768_SHARE + 4 <= grown <= X25519MLKEM768_SHARE + 4 + 8, grown
    assert all(s["msg_bytes_sent"]["client_hello"] == s["client_hellos"][0]["bytes"] for s in one + two)
    # one tuple: the client's first share wins; with the server's order, X25519; no retry either way
    assert {s["group"].lower() for s in two} == {"x25519mlkem768"}
    x_first = measure(bed, X25519_FIRST, n=3, offer="X25519MLKEM768+X25519")
    assert {s["group"].lower() for s in x_first} == {"x25519"}
    assert not any(s["hrr"] for s in one + two + x_first)
    # the hybrid strictly first, and shared: no retry
    assert not any(s["hrr"] for s in measure(bed, HYBRID_FIRST, n=3, offer="X25519MLKEM768+X25519"))


@pytest.mark.solo  # per-sample times against the RTT: beside four workers a flight came 10-14 ms late
def test_a_wrong_prediction_costs_one_hello_retry_and_one_round_trip(bed):
    right = measure(bed, HYBRID_FIRST, offer="X25519MLKEM768 / X25519")
    rig = bed["rig"]
    rig.begin_cell(LinkSpec.symmetric(rtt_ms=RTT))
    wrong = measure(bed, HYBRID_FIRST, offer="X25519 / X25519MLKEM768")
    rig.end_cell(wrong, "handshake", bed["dir"])
    if all(s.get("wire") for s in wrong):  # the emulator's record (pqlink; netem keeps none) finds the Finished
        for s in wrong:
            assert abs(s["wire"]["ms"] - s["t_ns"]["handshake_done"] / 1e6) < 1, s["wire"]
            assert [f[0] for f in s["wire"]["flights_ms"]][:5] == ["c2s", "s2c", "c2s", "s2c", "c2s"]
    assert not any(s["hrr"] for s in right)
    for s in wrong:
        assert s["hrr"] and len(s["client_hellos"]) == 2, s["client_hellos"]
        assert s["group"].lower() == "x25519mlkem768"
        assert shares(s, 0) == [("x25519", 32)] and shares(s, 1) == [("x25519mlkem768", X25519MLKEM768_SHARE)]
        assert s["msg_bytes_sent"]["client_hello"] == sum(h["bytes"] for h in s["client_hellos"])
        # from the retry request to the ServerHello: the second ClientHello's round trip
        assert RTT - 1 <= (s["t_ns"]["server_hello_received"] - s["hrr_received_ns"]) / 1e6 <= RTT + 5
    penalty = p50(wrong) - p50(right)
    assert RTT - 2 <= penalty <= RTT + 5, penalty
    assert RTT - 2 <= p50(wrong, "server_hello_received") - p50(right, "server_hello_received") <= RTT + 5


@pytest.mark.parametrize("algorithm", ["zlib", "brotli", "zstd"])
def test_a_compressed_certificate_is_smaller_on_the_wire_and_verifies(bed, algorithm):
    plain = measure(bed, COMPRESSING, n=3)  # the client offers nothing: the chain goes as it is
    packed = measure(bed, COMPRESSING, n=3, cert_compression=algorithm)
    size = plain[0]["msg_bytes_received"]["certificate"]
    assert all(s["cert_compression"] is None for s in plain)
    for s in packed:
        c = s["cert_compression"]
        assert c["algorithm"] == algorithm
        assert "certificate" not in s["msg_bytes_received"]
        assert c["compressed_bytes"] == s["msg_bytes_received"]["compressed_certificate"]
        assert c["certificate_bytes"] == size  # the Certificate message it stands for
        assert c["compressed_bytes"] < size  # an ECDSA chain: names and extensions repeat
        assert s["verify"] == "ok" and s["peer_chain_count"] == plain[0]["peer_chain_count"]


def test_a_site_without_compression_sends_its_chain_as_it_is_to_a_client_that_offers(bed):
    for s in measure(bed, CLIENT_CHOICE, n=3, cert_compression="all"):
        assert s["cert_compression"] is None and "certificate" in s["msg_bytes_received"]


def test_early_data_is_accepted_and_the_response_comes_one_round_trip_sooner(bed):
    early = measure(bed, EARLY, mode="early", path="/1k")
    resumed = measure(bed, EARLY, mode="resume_page", path="/1k")
    assert all(s["resumed"] and s["early_data"] == "accepted" and s["http_status"] == 200 for s in early)
    assert all(s["resumed"] and s["early_data"] is None for s in resumed)
    # between the fastest of each (their clean times): a busy machine only adds time, and beside other workers'
    # real-time processes the medians' saving ranged from 17.5 ms (a CI first pass) to 23.1 ms (a real-time loop
    # at the measured priority on each CPU, 5 ms of every 10), the fastest's 20.8-21.1 ms
    fastest = lambda samples: min(s["t_ns"]["first_byte"] / 1e6 for s in samples)  # noqa: E731
    saving = fastest(resumed) - fastest(early)
    assert RTT - 2 <= saving <= RTT + 5, (saving, p50(resumed, "first_byte") - p50(early, "first_byte"))
    # a server without early data: the ticket allows none, and pqtimer says so
    r = sampler.run(Pqtimer(), ClientJob(host=bed["rig"].tb.server_addr, port=CLIENT_CHOICE, groups=["X25519"],
                                         cafile=str(bed["chain"].root_cert), servername=bed["chain"].server_name,
                                         mode="early", path="/1k"), 1, 1, bed["rig"].place("client"), bed["dir"])
    assert not any(s.get("ok") for s in r)
