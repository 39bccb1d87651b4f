"""Warm browser loads (the resumption axis) through a real testbed: in one browser context (Firefox: container) a
priming load, its connections closed, then the timed load, which resumes with the priming load's session ticket
(mode resume_page) or also sends its GET as 0-RTT early data (mode early). Whether it resumed and whether its
early data came is the server's word (nginx's access log), and on the wire a resumed server flight carries no
certificate chain."""

import json
import time

import pytest

from pqbench import endpoints
from pqbench.algorithms import certs
from pqbench.endpoints.base import DEFAULT_PAGES, Serving, Site
from pqbench.endpoints.browsers import warm
from pqbench.measure import wire
from pqbench.measure.rig import Rig
from pqbench.testbed import LinkSpec
from test_browsers import BROWSERS, need_root_and_browsers

# The browser must write its GET before the server's first flight comes back, or the GET leaves after the
# handshake and no early data carries it: beside busy workers Chromium took over 10 ms from its ClientHello to
# the GET (1 of 3 loads under `make test-slower`'s load), never 50
RTT_MS = 50
PORTS = {"plain": 4443, "early": 4444}  # the server's 0-RTT off (a resumed cell's site) and on (a 0-RTT cell's)
# The client's second flight without a request (EndOfEarlyData, Finished, in one or two packets with their headers:
# 84 B measured) and with one (a browser's GET: 500 B and more)
EARLY_SECOND_FLIGHT = 300


def test_the_servers_log_decides_whether_a_warm_load_resumed(tmp_path):
    log = tmp_path / "nginx-access.log"
    log.write_text('10.0.0.1:5000 TLSv1.3 X25519 TLS_AES_128_GCM_SHA256 "GET /html/1k HTTP/1.1" 200 1000 0.000 1 r 1\n'
                   '10.0.0.1:5001 TLSv1.3 X25519 TLS_AES_128_GCM_SHA256 "GET /html/1k HTTP/1.1" 200 1000 0.000 1 . -\n'
                   '10.0.0.1:5002 TLSv1.3 X25519 TLS_AES_128_GCM_SHA256 "GET /html/1k HTTP/1.1" 200 1000 0.000 1 r -\n')
    s = lambda port, mode="early": {"ok": True, "mode": mode, "local_port": port, "browser": {}}  # noqa: E731
    # the browser did not say which of its two sockets carried the document: the log names one of them
    backup = {"ok": True, "mode": "early", "local_port": None, "browser": {"requests_detail": [
        {"document": True, "connection": {"candidate_ports": [5000, 5004]}}]}}
    samples = [s(5000), s(5001), s(5002), s(5003), s(5001, "page"), backup]
    warm.check(samples, [log], "10.0.0.1")
    accepted, full, late, unseen, cold, backup = samples
    assert (backup["ok"], backup["resumed"], backup["early_data"]) == (True, True, "accepted")
    assert (accepted["ok"], accepted["resumed"], accepted["early_data"]) == (True, True, "accepted")
    assert (full["ok"], full["error_class"], full["resumed"]) == (False, "not_resumed", False)
    assert (late["ok"], late["resumed"], late["early_data"]) == (True, True, "not_accepted")
    # no line for its port: kept, but flagged, never counted as resumed
    assert unseen["ok"] and unseen["resumed"] is None and "unverified" in unseen["resumption_check"]
    assert "resumed" not in cold  # a cold load is not checked


@pytest.fixture(scope="module")
def bed(built_stack, tmp_path_factory):
    need_root_and_browsers()
    run_dir = tmp_path_factory.mktemp("warm")
    chain = certs.make_chain("ecdsap256", run_dir / "certs")
    sites = [Site(PORTS["plain"], chain), Site(PORTS["early"], chain, early_data=True)]
    serving = Serving(run_dir / "openssl", sites, ["X25519MLKEM768", "X25519"], DEFAULT_PAGES, 2)
    with Rig.pairs({"openssl": serving}, ["openssl", *BROWSERS], LinkSpec.symmetric(rtt_ms=RTT_MS)) as rig:
        yield {"rig": rig, "chain": chain, "dir": run_dir}


def load(bed, browser, mode, site, n=2):
    rig = bed["rig"]
    scratch = bed["dir"] / f"{browser}-{mode}-{time.monotonic_ns()}"
    scratch.mkdir()
    # a warm sample is two loads and a close: beside six test workers one took over 20 s (browser_hung)
    job = rig.job(PORTS[site], "X25519MLKEM768", bed["chain"], mode=mode, path="/1k", timeout_ms=60_000)
    rig.begin_cell(rig.link)
    samples = rig.sample(job, n, 1, scratch, client=browser)
    rig.end_cell(samples, mode, scratch, client=browser)
    return samples, [json.loads(line) for line in open(scratch / "flows.jsonl")]


def connection(sample, flows) -> dict:
    """The sample's connection in the emulator's record: the flow from its local port, and where the kernel gave
    that port to more than one connection in the record (an earlier test's, a priming load's), the one opened
    nearest the sample's start, as measure.wire.join matches them (a CI run's solo pass met a reused port: the
    first flow on it, an earlier connection's, had no flight)."""
    on_port = [f for f in flows if f["proto"] == "tcp" and f["client"].endswith(f":{sample['local_port']}")]
    if len(on_port) == 1:
        return on_port[0]
    # the sample's start (CLOCK_MONOTONIC_RAW) on the record's clock (CLOCK_MONOTONIC)
    start = sample["start_mono_ns"] + sample.get("mono_minus_raw_ns", wire.clock_offset_ns())
    return min(on_port, key=lambda f: abs(f["open_ns"] - start))


def flight_bytes(sample, flows, direction: str, k: int) -> int:
    """The bytes of the k-th flight (0-based) in direction on the sample's connection, on the wire."""
    return [f["bytes"] for f in connection(sample, flows)["flights"] if f["dir"] == direction][k]


def sent_before_the_response(sample, flows, page_bytes=1000) -> int:
    """The bytes the client sent after the server's handshake flight and before the server's flight carrying
    the page (its Finished, and its GET unless that went as early data)."""
    flights = connection(sample, flows)["flights"]
    first = next(k for k, f in enumerate(flights) if f["dir"] == "s2c")
    sent = 0
    for f in flights[first + 1:]:
        if f["dir"] == "s2c" and f["bytes"] >= page_bytes:
            break
        sent += f["bytes"] if f["dir"] == "c2s" else 0
    return sent


def test_the_request_is_counted_wherever_its_flight_falls():
    """The GET with the client's Finished, or alone after the server's tickets: the same bytes before the page."""
    hello, server = {"dir": "c2s", "bytes": 1800}, {"dir": "s2c", "bytes": 1300}
    page = {"dir": "s2c", "bytes": 1400}
    sample = {"local_port": 5000}
    flow = lambda *flights: [{"proto": "tcp", "client": "10.0.0.1:5000", "flights": list(flights)}]  # noqa: E731
    together = flow(hello, server, {"dir": "c2s", "bytes": 580}, page)
    apart = flow(hello, server, {"dir": "c2s", "bytes": 80}, {"dir": "s2c", "bytes": 250}, {"dir": "c2s", "bytes": 500},
                 page)
    early = flow({"dir": "c2s", "bytes": 2300}, server, {"dir": "c2s", "bytes": 80}, page)
    assert sent_before_the_response(sample, together) == sent_before_the_response(sample, apart) == 580
    assert sent_before_the_response(sample, early) == 80


@pytest.mark.root
@pytest.mark.parametrize("browser", BROWSERS)
def test_a_warm_load_resumes_by_the_servers_log_and_its_server_flight_carries_no_chain(bed, browser):
    warm_samples, warm_flows = load(bed, browser, "resume_page", "plain")
    cold, cold_flows = load(bed, browser, "page", "plain")
    assert all(s["ok"] for s in warm_samples + cold), [s.get("error") for s in warm_samples + cold]
    assert [s["resumed"] for s in warm_samples] == [True, True]
    assert {s["group"] for s in warm_samples} == {"X25519MLKEM768"}  # psk_dhe_ke: the key exchange still runs
    # the timed load is one connection of its own (the priming load's was closed, not reused)
    assert all(s["browser"]["connections"] == 1 for s in warm_samples)
    # a resumption sends no Certificate and CertificateVerify: the server's flight is smaller by about the chain
    chain = bed["chain"].sent_bytes
    hot = [flight_bytes(s, warm_flows, "s2c", 0) for s in warm_samples]
    full = [flight_bytes(s, cold_flows, "s2c", 0) for s in cold]
    assert max(hot) + chain * 3 // 4 < min(full), (hot, full, chain)
    # no early data in a resumed cell: the GET goes after the handshake (with the client's Finished, or in a flight
    # of its own once the server's session tickets came first: a slower machine's browser wrote it that late)
    assert all(sent_before_the_response(s, warm_flows) > EARLY_SECOND_FLIGHT for s in warm_samples), \
        [sent_before_the_response(s, warm_flows) for s in warm_samples]


@pytest.mark.root
# alone: whether the GET leaves with the ClientHello depends on the browser writing it within a round trip, and a
# browser runs at normal priority, which other workers' real-time processes (servers, crypto benchmarks at the
# measured priority) hold off for up to the kernel's real-time share of each second: in a CI run's first pass
# Chromium's GET left 50 ms late, as early data still (nginx's log) but after the server's flight, 816 B
@pytest.mark.solo
@pytest.mark.parametrize("browser", BROWSERS)
def test_zero_rtt_sends_the_request_as_early_data_the_server_accepts(bed, browser):
    samples, flows = load(bed, browser, "early", "early")
    assert all(s["ok"] for s in samples), [s.get("error") for s in samples]
    assert [(s.get("resumed"), s.get("early_data")) for s in samples] == [(True, "accepted")] * 2, \
        [(s.get("resumed"), s.get("early_data"), s.get("resumption_check"), s.get("browser")) for s in samples]
    # Chromium 156 sends early data only with its feature switched on; the sample says so
    assert {s.get("early_data_switch") for s in samples} == \
        ({"--enable-features=EnableTLS13EarlyData"} if browser == "chromium" else {None})
    # on the wire: the GET left with the ClientHello, so the client's second flight is EndOfEarlyData and Finished
    # alone (a resumed cell's carries the GET: the test above)
    assert all(flight_bytes(s, flows, "c2s", 1) <= EARLY_SECOND_FLIGHT for s in samples), \
        [flight_bytes(s, flows, "c2s", 1) for s in samples]


def test_a_warm_load_over_quic_is_a_skipped_cell_with_its_reason():
    for browser in BROWSERS:
        why = endpoints.unsupported("openssl", browser, "X25519MLKEM768", "ecdsap256", "resume_page",
                                    {"transport": "quic"})
        assert why and "resume_page" in why and "QUIC" in why, why
        assert endpoints.unsupported("openssl", browser, "X25519MLKEM768", "ecdsap256", "resume_page") is None
