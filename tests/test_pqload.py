"""pqload, the open-loop TLS load generator (native/pqload), against nginx through the emulated link.

Every bound here is a floor set by the link (round trips) or a count set by the seeded schedule, never a
speed: the suite runs beside other work on two cores."""

import json
import math
import signal
import subprocess
import time

import pytest

from pqbench import endpoints, paths
from pqbench.algorithms import certs, openssl_build
from pqbench.endpoints.base import Serving, Site
from pqbench.measure.rig import Rig
from pqbench.testbed import LinkSpec

PORT = 4433
CLOSED_PORT = 4499  # nothing listens there
MUTE_PORT = 4490  # accepts TCP, never answers the ClientHello
GROUPS = ["X25519", "X25519MLKEM768"]
PRINTED = {"X25519": "x25519", "X25519MLKEM768": "X25519MLKEM768"}  # as OpenSSL names the negotiated group
MASK = (1 << 64) - 1


def schedule_count(seed: int, rate: float, duration_ms: int) -> int:
    """Arrivals in pqload's schedule: splitmix64 from the seed, exponential gaps -log1p(-u)/rate, kept
    while before the end. The same arithmetic as the C, so the count must match exactly."""
    state, t, n = seed, 0.0, 0
    while True:
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        t += -math.log1p(-((z >> 11) * 2.0 ** -53)) / rate
        if t >= duration_ms / 1000:
            return n
        n += 1


def binary():
    b = paths.native_binary("pqload")
    assert b.exists(), f"{b} is not built (run `make native`)"
    return b


@pytest.fixture(scope="module")
def bed(built_stack, tmp_path_factory):
    """One testbed, one nginx (ECDSA P-256 chain, both groups), and a port that accepts TCP and stays mute."""
    import os
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    binary()
    run_dir = tmp_path_factory.mktemp("pqload")
    chain = certs.make_chain("ecdsap256", run_dir / "certs")
    serving = Serving(run_dir / "nginx", [Site(PORT, chain)], GROUPS, {"1k": 1000}, 4)
    with Rig(endpoints.get("openssl"), serving, LinkSpec.symmetric(rtt_ms=10)) as rig:
        mute = rig.place("server").socket()
        mute.bind((rig.tb.server_addr, MUTE_PORT))
        mute.listen(256)
        try:
            yield {"rig": rig, "chain": chain}
        finally:
            mute.close()


def start(bed, *args, port=PORT, rtt=None):
    rig, chain = bed["rig"], bed["chain"]
    if rtt is not None:
        rig.tb.reconfigure(LinkSpec.symmetric(rtt_ms=rtt))
    argv = [str(binary()), "--host", rig.tb.server_addr, "--port", str(port), "--cafile", str(chain.root_cert),
            "--servername", chain.server_name, *map(str, args)]
    return rig.place("client").popen(argv, env=openssl_build.openssl_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)


def finish(proc) -> dict:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, (proc.returncode, err)
    lines = out.strip().splitlines()
    assert len(lines) == 1, out  # one JSON object, nothing else on stdout
    return json.loads(lines[0])


def run(bed, *args, **kw) -> dict:
    return finish(start(bed, *args, **kw))


def check_accounts(r: dict) -> None:
    """Every scheduled arrival is accounted for exactly once."""
    assert r["started"] + r["skipped"] == r["scheduled"], r
    assert r["completed"] + sum(r["failures"].values()) == r["started"], r
    assert r["achieved_rate"] == pytest.approx(r["completed"] / r["duration_s"], abs=1e-3)


@pytest.mark.root
@pytest.mark.parametrize("group", GROUPS)
def test_low_rate_every_arrival_completes(bed, group):
    rtt = 10
    r = run(bed, "--groups", group, "--rate", 20, "--duration-ms", 2000, "--latencies", rtt=rtt)
    assert r["generator"] == "pqload" and r["offered_rate"] == 20 and r["duration_s"] == 2
    assert r["scheduled"] == schedule_count(1, 20, 2000)
    assert 15 <= r["scheduled"] <= 70  # Poisson, mean 40: far beyond 3 sigma either way
    assert r["failures"] == {} and r["skipped"] == 0
    assert r["started"] == r["completed"] == r["scheduled"]
    check_accounts(r)
    assert r["group"] == PRINTED[group]
    lat, svc, lag = r["latency_ms"], r["service_ms"], r["start_lag_ms"]
    assert set(lat) == {"p50", "p90", "p99", "max", "mean"} and set(svc) == {"p50", "p90", "p99"}
    assert set(lag) == {"p50", "p99", "max"}
    # TCP's and TLS's round trips are a floor for every handshake, whatever the machine's speed
    assert svc["p50"] >= 2 * rtt and min(r["latencies_ms"]) >= 2 * rtt
    assert len(r["latencies_ms"]) == r["completed"]
    # latency = start lag + service for every arrival, so each percentile of it is at least service's
    assert all(lat[q] >= svc[q] for q in ("p50", "p90", "p99")), (lat, svc)
    assert lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"] == pytest.approx(max(r["latencies_ms"]))
    assert lat["mean"] == pytest.approx(sum(r["latencies_ms"]) / len(r["latencies_ms"]), abs=2e-3)
    assert 0 <= lag["p50"] <= lag["p99"] <= lag["max"]
    assert r["inflight_max"] >= 1 and r["client_cpu_s"] >= 0
    # from the first arrival (after t0) to the last completion, which comes after the last arrival
    assert 2 * rtt / 1000 <= r["wall_s"] <= r["duration_s"] + 10


@pytest.mark.root
@pytest.mark.parametrize("seed", [1, 7])
def test_closed_port_every_arrival_refused(bed, seed):
    r = run(bed, "--groups", "X25519", "--rate", 100, "--duration-ms", 1000, "--seed", seed, port=CLOSED_PORT,
            rtt=10)
    assert r["scheduled"] == schedule_count(seed, 100, 1000) > 0
    assert r["failures"] == {"connect_refused": r["scheduled"]}
    assert r["completed"] == 0 and r["skipped"] == 0
    check_accounts(r)
    assert r["latency_ms"] is None and r["service_ms"] is None and r["group"] is None and r["wall_s"] is None
    assert r["start_lag_ms"] is not None  # they were started, on time or not
    assert "latencies_ms" not in r  # only with --latencies


@pytest.mark.root
def test_mute_server_times_out(bed):
    """TCP connects (the kernel accepts) but no ServerHello ever comes: 'timeout', each after its own
    --timeout-ms, and the run ends once the last one has."""
    r = run(bed, "--rate", 20, "--duration-ms", 500, "--timeout-ms", 300, "--seed", 3, port=MUTE_PORT, rtt=10)
    assert r["scheduled"] == schedule_count(3, 20, 500) > 0
    assert r["failures"] == {"timeout": r["scheduled"]}
    check_accounts(r)


@pytest.mark.root
def test_wrong_server_name_is_cert_verify(bed):
    rig, chain = bed["rig"], bed["chain"]
    argv = [str(binary()), "--host", rig.tb.server_addr, "--port", str(PORT), "--cafile", str(chain.root_cert),
            "--servername", "not-" + chain.server_name, "--rate", "20", "--duration-ms", "500", "--seed", "3"]
    r = finish(rig.place("client").popen(argv, env=openssl_build.openssl_env(), stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True))
    assert r["failures"] == {"cert_verify": schedule_count(3, 20, 500)}, r


@pytest.mark.root
def test_one_connection_at_a_time_skips_arrivals(bed):
    """The weak-client signal: offered 200/s while one connection at a time, each holding its slot for at
    least two 30 ms round trips, can start at most one per 60 ms of the 2 s schedule."""
    rtt, duration = 30, 2000
    r = run(bed, "--groups", "X25519", "--rate", 200, "--duration-ms", duration, "--max-inflight", 1, rtt=rtt)
    assert r["scheduled"] == schedule_count(1, 200, duration)
    assert r["inflight_max"] == 1
    check_accounts(r)
    assert r["failures"] == {}
    most = duration // (2 * rtt) + 1
    assert 1 <= r["started"] <= most, r
    assert r["skipped"] >= r["scheduled"] - most
    assert r["achieved_rate"] < r["offered_rate"] / 3


@pytest.mark.root
def test_a_stalled_generator_shows_its_lag(bed):
    """Stopping pqload for half a second mid-schedule: the arrivals due meanwhile start late, say so in
    start_lag_ms, and carry the wait in their latency (measured from the schedule, none left out)."""
    proc = start(bed, "--groups", "X25519", "--rate", 50, "--duration-ms", 4000, "--latencies", rtt=10)
    time.sleep(1.0)  # well past its start-up, well before its last arrival
    proc.send_signal(signal.SIGSTOP)
    time.sleep(0.5)
    proc.send_signal(signal.SIGCONT)
    r = finish(proc)
    assert r["scheduled"] == schedule_count(1, 50, 4000)
    assert r["failures"] == {} and r["skipped"] == 0 and r["completed"] == r["scheduled"]
    check_accounts(r)
    assert r["start_lag_ms"]["max"] >= 300, r["start_lag_ms"]
    assert r["latency_ms"]["max"] >= r["start_lag_ms"]["max"]
    assert sum(x >= 300 for x in r["latencies_ms"]) >= 3, sorted(r["latencies_ms"])[-10:]


BAD = [
    (["--port", "443", "--rate", "10", "--duration-ms", "100"], "--host"),
    (["--host", "10.0.0.1", "--rate", "10", "--duration-ms", "100"], "--port"),
    (["--host", "10.0.0.1", "--port", "443", "--duration-ms", "100"], "--rate"),
    (["--host", "10.0.0.1", "--port", "443", "--rate", "10"], "--duration-ms"),
    (["--host", "example.org", "--port", "443", "--rate", "10", "--duration-ms", "100"], "--host"),
    (["--host", "10.0.0.1", "--port", "70000", "--rate", "10", "--duration-ms", "100"], "--port"),
    (["--host", "10.0.0.1", "--port", "443", "--rate", "0", "--duration-ms", "100"], "--rate"),
    (["--host", "10.0.0.1", "--port", "443", "--rate", "-5", "--duration-ms", "100"], "--rate"),
    (["--host", "10.0.0.1", "--port", "443", "--rate", "fast", "--duration-ms", "100"], "--rate"),
    (["--host", "10.0.0.1", "--port", "443", "--rate", "nan", "--duration-ms", "100"], "--rate"),
    (["--host", "10.0.0.1", "--port", "443", "--rate", "10", "--duration-ms", "0"], "--duration-ms"),
    (["--host", "10.0.0.1", "--port", "443", "--rate", "10", "--duration-ms", "100", "--timeout-ms", "1s"],
     "--timeout-ms"),
    (["--host", "10.0.0.1", "--port", "443", "--rate", "10", "--duration-ms", "100", "--max-inflight", "0"],
     "--max-inflight"),
    (["--host", "10.0.0.1", "--port", "443", "--rate", "10", "--duration-ms", "100", "--seed", "-1"], "--seed"),
    (["--host", "10.0.0.1", "--port", "443", "--rate", "10", "--duration-ms", "100", "--groups", "NoSuchGroup"],
     "--groups"),
    (["--host", "10.0.0.1", "--port", "443", "--rate", "10", "--duration-ms", "100", "--cafile", "/nonexistent"],
     "--cafile"),
    (["--host", "10.0.0.1", "--port", "443", "--rate", "10", "--duration-ms", "100", "--bogus", "1"], "--bogus"),
    (["--host", "10.0.0.1", "--port", "443", "--rate", "10", "--duration-ms"], "--duration-ms"),
]


@pytest.mark.parametrize("argv,field", BAD, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD)])
def test_bad_options_exit_2_naming_the_option(built_stack, argv, field):
    """Checked before anything is sent (10.0.0.1 is never contacted: the options are refused first)."""
    p = subprocess.run([str(binary()), *argv], env=openssl_build.openssl_env(), capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stderr.startswith(f"pqload: {field}: "), p.stderr
    assert p.stdout == ""
