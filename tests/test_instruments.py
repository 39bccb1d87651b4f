"""The measurement instruments on a real testbed: pqtimer against nginx through the emulated link."""

import json
import subprocess
import threading
import time

import pytest

from conftest import assert_client_leads_the_wire, processes_mentioning, run_pqbench
from pqbench import endpoints, paths, stats
from pqbench.algorithms import catalog, certs, microbench, openssl_build
from pqbench.measure import sampler
from pqbench.endpoints.base import STUDY_PAGES, DEFAULT_WORKERS, ClientJob, Place, Serving, Site
from pqbench.endpoints.openssl.pqtimer import Pqtimer
from pqbench.measure.rig import Rig
from pqbench.testbed import LinkSpec

pytestmark = pytest.mark.root

NATIVE_GROUPS = [a.name for a in catalog.algorithms("kem") if a.source == "openssl" and a.tls]
PORT = 4433


@pytest.fixture(scope="module")
def bed(built_stack, tmp_path_factory):
    """One testbed and one nginx (ECDSA P-256 chain, every native group) for the whole module."""
    run_dir = tmp_path_factory.mktemp("instruments")
    chain = certs.make_chain("ecdsap256", run_dir / "certs")
    serving = Serving(run_dir / "nginx", [Site(PORT, chain)], NATIVE_GROUPS, STUDY_PAGES, DEFAULT_WORKERS)
    with Rig(endpoints.get("openssl"), serving, LinkSpec.symmetric(rtt_ms=10)) as rig:
        yield {"tb": rig.tb, "rig": rig, "chain": chain, "dir": run_dir}


def measure(bed, n=20, group="X25519", parallel=1, **job) -> list[dict]:
    tb, chain = bed["tb"], bed["chain"]
    j = ClientJob(host=tb.server_addr, port=job.pop("port", PORT), groups=[group],
                  cafile=job.pop("cafile", str(chain.root_cert)), servername=chain.server_name, **job)
    return sampler.run(Pqtimer(), j, n, parallel, bed["rig"].place("client"), bed["dir"])


def p50_ms(samples, phase="handshake_done") -> float:
    assert all(s["ok"] for s in samples), [s["error"] for s in samples if not s["ok"]][:3]
    return stats.median([s["t_ns"][phase] / 1e6 for s in samples])


def compute_ms(kex: str, sig: str) -> float:
    """Crypto time on the critical path: client keygen + decaps, server encaps + sign, verifies."""
    k = microbench.measure(catalog.find(kex), seconds=0.1)["ops"]
    s = microbench.measure(catalog.find(sig), seconds=0.1)["ops"]
    us = k["keygen"]["median_us"] + k["encaps"]["median_us"] + k["decaps"]["median_us"] \
        + s["sign"]["median_us"] + 2 * s["verify"]["median_us"]
    return us / 1000


@pytest.mark.parametrize("rtt", [10, 50])
def test_handshake_time_is_two_rtts_plus_compute(bed, rtt):
    """Two round trips on top of what the same handshake costs at 0 ms, measured just before (so a
    slow moment of the machine moves both alike). 1.5 ms covers the emulator's per-RTT error
    (+0.2-0.3 ms) and processes waking after a long wait."""
    tb = bed["tb"]
    # Up to three tries: a try taken while other processes hog both cores may sit above the bound;
    # the instrument must show 2 RTT + compute when the machine lets it.
    for _ in range(3):
        tb.reconfigure(LinkSpec.symmetric(rtt_ms=0))
        at_zero = p50_ms(measure(bed, n=30, warmup=2))
        tb.reconfigure(LinkSpec.symmetric(rtt_ms=rtt))
        samples = measure(bed, n=30, warmup=2)
        t = p50_ms(samples)
        bound = 2 * rtt + at_zero + 1.5
        if t <= bound:
            break
    assert compute_ms("X25519", "ecdsap256") < at_zero < 10, at_zero
    assert 2 * rtt + at_zero * 0.5 <= t <= bound, (t, at_zero)
    order = ["start", "tcp_connected", "client_hello_sent", "server_hello_received", "server_finished_received",
             "handshake_done"]
    for s in samples:
        ts = [s["t_ns"][p] for p in order]
        assert ts == sorted(ts) and ts[0] == 0, s["t_ns"]
        assert s["t_ns"]["tcp_connected"] >= rtt * 1e6  # the SYN/SYN-ACK round trip
        # the client's own wait for a CPU within the handshake (the kernel's schedstat): part of its time
        assert 0 <= s["cpu_wait_ns"] < s["t_ns"]["handshake_done"] - 2 * rtt * 1e6, s["cpu_wait_ns"]


def test_page_time_grows_as_serialisation_predicts(bed):
    rate = 10.0
    bed["tb"].reconfigure(LinkSpec.symmetric(rtt_ms=10, rate_mbit=rate))
    small = p50_ms(measure(bed, n=5, mode="page", path="/100k"), "last_byte")
    large = p50_ms(measure(bed, n=5, mode="page", path="/1000k"), "last_byte")
    # 900 kB more payload, plus TCP/IP headers (52 B per 1448 B segment) and TLS records (22 B per 16 kB)
    wire = 900_000 * (1500 / 1448) * (1 + 22 / 16384)
    predicted = wire * 8 / (rate * 1e6) * 1000
    assert predicted * 0.9 <= large - small <= predicted * 1.1, (small, large, predicted)


def test_requests_amortise_one_rtt_each(bed):
    rtt = 20
    bed["tb"].reconfigure(LinkSpec.symmetric(rtt_ms=rtt))
    single = measure(bed, n=8, mode="requests", path="/1k", requests=1)
    one = p50_ms(single, "last_byte")
    ten = p50_ms(measure(bed, n=8, mode="requests", path="/1k", requests=10), "last_byte")
    extra_rtts = (ten - one) / rtt
    assert 8.5 <= extra_rtts <= 10.5, extra_rtts
    # The first request costs one round trip after the handshake (no Nagle wait behind Finished).
    first = stats.median([(s["t_ns"]["last_byte"] - s["t_ns"]["handshake_done"]) / 1e6 for s in single])
    assert rtt <= first <= rtt + 3, first


def test_resumption_skips_the_certificate(bed):
    bed["tb"].reconfigure(LinkSpec.symmetric(rtt_ms=2))
    full = measure(bed, n=5)
    resumed = measure(bed, n=5, mode="resume")
    assert all(s["ok"] and s["resumed"] for s in resumed), resumed[0]
    assert all("certificate" not in s["msg_bytes_received"] for s in resumed)
    assert all("certificate" in s["msg_bytes_received"] for s in full)
    server_bytes = lambda ss: stats.median([s["tcp_handshake"]["bytes_received"] for s in ss])  # noqa: E731
    assert server_bytes(resumed) < server_bytes(full) - 300  # the P-256 chain alone is over 400 bytes


def test_negotiated_group_and_signature_for_every_native_group(bed):
    bed["tb"].reconfigure(LinkSpec.symmetric(rtt_ms=1))
    for group in NATIVE_GROUPS:
        samples = measure(bed, n=2, group=group)
        alg = catalog.find(group)
        for s in samples:
            assert s["ok"], s
            assert s["group"].lower() in (n.lower() for n in alg.names()), (group, s["group"])
            assert s["sigalg"] == "ecdsa_secp256r1_sha256"


def test_padded_client_hello_sends_more_packets(bed):
    bed["tb"].reconfigure(LinkSpec.symmetric(rtt_ms=1))
    plain = measure(bed, n=5)
    padded = measure(bed, n=5, pad=10_000)
    segs = lambda ss: stats.median([s["tcp_handshake"]["segs_out"] for s in ss])  # noqa: E731
    ch = lambda ss: ss[0]["msg_bytes_sent"]["client_hello"]  # noqa: E731
    assert ch(padded) - ch(plain) == 10_000 + 4  # the padding and its extension header
    # 10 kB more over a 1448-byte MSS: at least 6 more segments (ACK coalescing may save one)
    assert segs(padded) - segs(plain) >= 6, (segs(plain), segs(padded))


def test_workers_share_the_samples_each_index_once(bed):
    # long enough a cell (40 samples of 50 ms round trips) that a worker started late still gets some: at 2 ms,
    # beside other tests, three workers had taken all 40 before the fourth began
    bed["tb"].reconfigure(LinkSpec.symmetric(rtt_ms=50))
    samples = measure(bed, n=40, parallel=4)
    assert sorted(s["i"] for s in samples) == list(range(40))
    assert all(s["ok"] for s in samples)
    assert {s["worker"] for s in samples} == {0, 1, 2, 3}


def test_a_killed_worker_leaves_its_sample_as_client_lost(bed):
    """Worker 1 is killed in the middle of a handshake: the index it claimed is reported lost,
    the others finish the cell, and no index is missing or doubled."""
    tb = bed["tb"]
    tb.reconfigure(LinkSpec.symmetric(rtt_ms=200))

    claims = bed["dir"] / "pqtimer-claims"

    def kill_in_first_handshake(proc):
        # once both workers have claimed their first index (a loaded machine starts them late), worker 1 is
        # 0.1 s into a handshake that takes 400 ms
        deadline = time.monotonic() + 30
        while int.from_bytes(claims.read_bytes()[:8], "little") < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        proc.kill()

    def popen(argv, **kw):
        proc = tb.popen("client", argv, **kw)
        if argv[argv.index("--worker") + 1] == "1":
            threading.Thread(target=kill_in_first_handshake, args=(proc,), daemon=True).start()
        return proc

    place = Place(tb.server_addr, popen, lambda: tb.socket("client"))
    samples = sampler.run(Pqtimer(), _job(bed), 6, 2, place, bed["dir"])
    assert sorted(s["i"] for s in samples) == list(range(6))
    lost = [s for s in samples if not s["ok"]]
    assert len(lost) == 1 and lost[0]["error_class"] == "client_lost"
    assert "worker 1 exited with -9" in lost[0]["error"]


def _job(bed) -> ClientJob:
    tb, chain = bed["tb"], bed["chain"]
    return ClientJob(host=tb.server_addr, port=PORT, groups=["X25519"], cafile=str(chain.root_cert),
                     servername=chain.server_name)


def test_tail_is_signalled_after_every_sample_is_claimed_before_the_run_ends(bed):
    """2 workers on a 200 ms link (400 ms per handshake, a look every 250 ms): the tail event comes
    once the 6 indices are all claimed and while the last handshakes are still running."""
    tb = bed["tb"]
    tb.reconfigure(LinkSpec.symmetric(rtt_ms=200))
    seen = {}

    class Tail(threading.Event):
        def set(self):  # what held when run() set it, recorded in its own thread
            seen.setdefault("claimed", int.from_bytes((bed["dir"] / "pqtimer-claims").read_bytes()[:8], "little"))
            seen.setdefault("at", time.monotonic())
            super().set()

    tail = Tail()
    samples = sampler.run(Pqtimer(), _job(bed), 6, 2, bed["rig"].place("client"), bed["dir"], tail=tail)
    ended = time.monotonic()
    assert len(samples) == 6 and all(s["ok"] for s in samples)
    assert tail.is_set() and seen["claimed"] >= 6  # every index taken (a claim past the end counts too)
    assert seen["at"] < ended - 0.1  # the last handshakes were still running


def test_stop_kills_the_workers_and_cancels_the_run(bed):
    tb = bed["tb"]
    tb.reconfigure(LinkSpec.symmetric(rtt_ms=200))
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    t0 = time.monotonic()
    with pytest.raises(sampler.Cancelled):
        sampler.run(Pqtimer(), _job(bed), 1000, 4, bed["rig"].place("client"), bed["dir"], stop=stop)
    assert time.monotonic() - t0 < 3  # not the 100 s the 1000 samples would take
    # none of its workers is left (they name their claims file in this test's folder, as the server its logs)
    assert [p for p in processes_mentioning(bed["dir"] / "pqtimer-claims")] == []


def test_stopped_server_gives_failure_samples_and_exit_1(bed):
    bed["tb"].reconfigure(LinkSpec.symmetric(rtt_ms=1))
    samples = measure(bed, n=3, port=PORT + 1)  # nothing listens there
    assert [s["ok"] for s in samples] == [False] * 3
    assert {s["error_class"] for s in samples} == {"connect_refused"}
    tb = bed["tb"]
    job = ClientJob(host=tb.server_addr, port=PORT + 1, groups=["X25519"], cafile=str(bed["chain"].root_cert),
                    servername="x")
    proc = tb.run("client", Pqtimer().argv(job, 2, 0, None),
                  env=openssl_build.openssl_env(), capture_output=True, timeout=30)
    assert proc.returncode == 1 and len(proc.stdout.splitlines()) == 2


def test_wrong_ca_gives_cert_verify_failures(bed, tmp_path):
    other = certs.make_chain("ecdsap256", tmp_path / "other")
    samples = measure(bed, n=2, cafile=str(other.root_cert))
    assert [s["error_class"] for s in samples] == ["cert_verify"] * 2


def test_unresponsive_server_times_out_as_failure(bed):
    """A server behind 100 % loss: the sample fails with a timeout, it does not hang."""
    bed["tb"].reconfigure(LinkSpec.symmetric(rtt_ms=1, loss=1.0))
    try:
        samples = measure(bed, n=1, timeout_ms=1500)
    finally:
        bed["tb"].reconfigure(LinkSpec.symmetric(rtt_ms=1))
    assert samples[0]["error_class"] == "connect_timeout"


@pytest.mark.parametrize("args,field", [
    (["--host", "10.0.0.1"], "--port"),
    (["--host", "nowhere", "--port", "1"], "--host"),
    (["--host", "10.0.0.1", "--port", "70000"], "--port"),
    (["--host", "10.0.0.1", "--port", "1", "--mode", "dance"], "--mode"),
    (["--host", "10.0.0.1", "--port", "1", "--count", "-3"], "--count"),
    (["--host", "10.0.0.1", "--port", "1", "--claim", "/dev/null"], "--claim"),  # no room for the counter
])
def test_pqtimer_bad_options_exit_2(built_stack, args, field):
    proc = subprocess.run([str(paths.native_binary("pqtimer")), *args], capture_output=True, text=True,
                          env=openssl_build.openssl_env(), timeout=10)
    assert proc.returncode == 2 and field in proc.stderr


@pytest.mark.parametrize("args,field", [
    (["--kex", "X25519", "--sig", "ecdsap256", "-n", "zero"], "-n"),
    (["--kex", "X25519", "--sig", "ecdsap256", "--rtt", "-5ms"], "rtt"),
    (["--kex", "X25519", "--sig", "ecdsap256", "--loss", "120%"], "loss"),
    (["--kex", "X25519", "--sig", "ecdsap256", "--page", "ten"], "--page"),
    (["--kex", "X25519x", "--sig", "ecdsap256"], "--kex"),
    (["--kex", "X25519", "--sig", "mldsa45"], "--sig"),  # (SLH-DSA is now a TLS signature scheme via pqprov)
    (["--kex", "X25519", "--sig", "ecdsap256", "--parallel", "lots"], "--parallel"),
    (["--kex", "X25519", "--sig", "ecdsap256", "--parallel", "auto", "--max-bias", "90%"], "--max-bias"),
])
def test_handshake_command_bad_input(built_stack, args, field):
    proc = run_pqbench("handshake", *args)
    assert proc.returncode in (2, 3) and field in proc.stderr, proc.stderr
    if field != "--sig":  # SLH-DSA is a missing capability (no TLS sigalg), not bad input
        assert proc.returncode == 2


def test_handshake_command_json_contract(built_stack):
    proc = run_pqbench("handshake", "--kex", "X25519MLKEM768", "--sig", "mldsa44", "--rtt", "5ms",
                       "-n", "20", "--parallel", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert set(r["summary"]) >= {"n", "failures", "mean_ms", "p5_ms", "p25_ms", "p50_ms", "p75_ms", "p95_ms",
                                 "p99_ms"}
    assert r["summary"]["n"] == 20 and r["summary"]["failures"] == 0
    assert r["negotiated"] == {"group": "X25519MLKEM768", "sigalg": "mldsa44"}
    for key in ("packets", "bytes"):
        assert set(r[key]) == {"client_to_server", "server_to_client"}
    # An ML-DSA-44 chain is several kB: the server sends more than the client, in more packets.
    assert r["bytes"]["server_to_client"] > r["bytes"]["client_to_server"] + 5000
    assert r["packets"]["server_to_client"] >= 5


@pytest.mark.parametrize("rtt,grows", [("0ms", False), ("200ms", True)])
def test_auto_parallel_adds_workers_only_where_they_cannot_queue_the_crypto(built_stack, rtt, grows):
    """At 0 ms a second worker would wait for the first one's crypto; at 200 ms they mostly wait
    for the link, so auto adds them (and says how many it used)."""
    proc = run_pqbench("handshake", "--kex", "X25519", "--sig", "ecdsap256", "--rtt", rtt, "-n", "60",
                       "--parallel", "auto", "--json")
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert r["summary"]["n"] == 60 and r["summary"]["failures"] == 0
    conc = r["concurrency"]
    assert conc["policy"] == "auto" and conc["max_bias"] == 0.02
    if not grows:
        assert conc["workers"] == 1, conc
    elif conc["load_mean"] is not None and conc["load_mean"] > conc["load_target"]:
        # a busy machine (a CPU hog beside the suite): auto counts the machine's load as its own
        # workers' cost, and a load already past its target admits no more of them
        assert conc["workers"] <= 2, conc
    else:
        assert conc["workers"] > 2, conc


def test_concurrent_synthetic_handshakes_do_not_queue_at_the_server(built_stack):
    """sikep434like sleeps 13.8 + 22.1 + 23.7 ms (keygen, encaps on the server, decaps): 16 clients
    at once must see what one client alone sees (2 RTT + 59.6 ms + the real crypto), not a handshake queued
    behind another's 22.1 ms encapsulation. With 2 nginx workers, each blocked 22 ms per handshake, they
    queued (p50 +36 ms at 30.9 ms RTT). Judged against one client alone in the same test, not a fixed few ms:
    under `make test-slower` the real crypto and scheduling took 10.9 ms beyond the sleeps."""
    def p50(parallel: str, n: str) -> float:
        proc = run_pqbench("handshake", "--kex", "sikep434like", "--sig", "ecdsap256", "--rtt", "30ms",
                           "-n", n, "--parallel", parallel, "--json")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["summary"]["p50_ms"]
    alone, together = p50("1", "16"), p50("16", "96")
    assert 2 * 30 + 13.8 + 22.1 + 23.7 < alone, alone
    assert together < alone + 22.1 / 2, (together, alone)


def test_pqtimer_agrees_with_the_wire(bed):
    """pqtimer's handshake time against the same connection's on the wire (SYN to the client's
    Finished, from pqlink's record): measured here +0.06…+0.18 ms (p5…p95, median +0.10 ms at 30.9 ms
    RTT): the client starts before its SYN and stops after writing Finished (conftest.assert_client_leads_the_wire)."""
    from pqbench.measure import wire
    rig, link = bed["rig"], LinkSpec.symmetric(rtt_ms=10)
    rig.begin_cell(link)
    samples = rig.sample(_job(bed), 40, 1, bed["dir"])
    rig.end_cell(samples, "handshake", bed["dir"])
    w = wire.agreement(samples, "handshake_done")
    assert_client_leads_the_wire(w, rig.tb)


def test_pqtimer_outlives_a_server_that_resets_while_it_writes(built_stack):
    """pqtimer ignores SIGPIPE: a server killed while pqtimer writes (a chaos test's nginx) makes the write fail with
    EPIPE, a failed sample with its class; by SIGPIPE pqtimer died and its claimed samples came back client_lost. Here a
    loopback listener that never answers keeps pqtimer waiting for a ServerHello while its signals are read."""
    import signal
    import socket
    from pathlib import Path
    listener = socket.create_server(("127.0.0.1", 0))
    proc = subprocess.Popen([str(paths.native_binary("pqtimer")), "--host", "127.0.0.1", "--port",
                             str(listener.getsockname()[1]), "--timeout-ms", "20000"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=openssl_build.openssl_env())
    try:
        # past its start-up once it has connected (C22: beside four test workers, 0.5 s after the start it had not
        # reached its signal set-up yet): then it waits on the socket for a ServerHello
        listener.settimeout(30)
        conn, _ = listener.accept()
        assert proc.poll() is None
        ignored = int(next(line.split()[1] for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                           if line.startswith("SigIgn:")), 16)
        assert ignored & (1 << (signal.SIGPIPE - 1)), hex(ignored)
        conn.close()
    finally:
        proc.kill()
        proc.wait()
        listener.close()
