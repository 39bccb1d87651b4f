"""sshload, the SSH load generator (native/sshgo/cmd/sshload), through a real testbed at 10 ms RTT against
OpenSSH's sshd (stack `openssh`) and Go's SSH server (stack `gossh`): at a low rate every arrival completes
with the key exchange asked, and no faster than the round trips it needs; a closed port is a failure class
per arrival, not a crash; arrivals do not wait for earlier connections, and a cap on connections in flight
skips arrivals instead of hiding them; bad options exit 2 naming the option; the Go unit tests pass.
Every bound is a floor or ceiling set by the link's round trips, never by this machine's speed."""

import json
import math
import os
import subprocess

import pytest

from conftest import SSH_PROCESS_MARKS, processes_mentioning

from pqbench import endpoints
from pqbench.endpoints import sshkeys
from pqbench.endpoints.base import Serving, Site
from pqbench.endpoints.gossh import build
from pqbench.measure.rig import Rig
from pqbench.testbed import LinkSpec

RTT_MS = 10
HOSTKEY = "ssh-ed25519"
KEX = ["mlkem768x25519-sha256", "curve25519-sha256"]
SERVERS = {"openssh": 2200, "gossh": 2300}
CLOSED_PORT = 2399  # nothing listens there
CONTRACT = {"generator", "offered_rate", "duration_s", "scheduled", "started", "completed", "failures", "skipped",
            "inflight_max", "latency_ms", "service_ms", "start_lag_ms", "achieved_rate", "wall_s", "client_cpu_s",
            "group"}


def stack(name):
    endpoints.names()  # the registry loads its own list first
    if name not in endpoints.names():
        import importlib
        endpoints.register(importlib.import_module(f"pqbench.endpoints.{name}").STACK)
    return endpoints.get(name)


@pytest.fixture(scope="module")
def sshload():
    return build.require("sshload")


@pytest.fixture(scope="module")
def bed(built_stack, sshload, tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network and mount namespaces)")
    for name in SERVERS:
        why = stack(name).capabilities().unsupported("curve25519-sha256", HOSTKEY, "server")
        assert why is None, f"{name} is not built: {why}"
    before = set(processes_mentioning(*SSH_PROCESS_MARKS))
    run_dir = tmp_path_factory.mktemp("sshload")
    keys = sshkeys.make_keys(HOSTKEY, run_dir / "keys")
    servings = {s: Serving(run_dir / s, [Site(p, keys)], KEX, {}, 1) for s, p in SERVERS.items()}
    with Rig.pairs(servings, ["gossh"], LinkSpec.symmetric(rtt_ms=RTT_MS)) as rig:
        yield rig
    left = [p for p in processes_mentioning(*SSH_PROCESS_MARKS) if p not in before]
    assert not left, f"processes left after the rig closed: {left}"


def load(rig, sshload, port, kex, rate, duration_ms, *extra):
    argv = [str(sshload), "--host", rig.tb.server_addr, "--port", str(port), "--kex", kex, "--rate", str(rate),
            "--duration-ms", str(duration_ms), *extra]
    proc = rig.place("client").popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=duration_ms / 1000 + 60)
    assert proc.returncode == 0, err
    lines = out.splitlines()
    assert len(lines) == 1, out  # one JSON object
    result = json.loads(lines[0])
    assert CONTRACT <= set(result) and result["generator"] == "sshload", result
    assert ("latencies_ms" in result) == ("--latencies" in extra)
    assert result["scheduled"] == result["started"] + result["skipped"]
    assert result["started"] == result["completed"] + sum(result["failures"].values())
    assert result["client_cpu_s"] > 0
    return result


@pytest.mark.root
@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("kex", KEX)
def test_a_low_rate_completes_every_arrival_with_the_kex_asked(bed, sshload, server, kex):
    r = load(bed, sshload, SERVERS[server], kex, 10, 2000, "--latencies")
    assert r["scheduled"] > 0 and r["completed"] == r["scheduled"], r
    assert r["failures"] == {} and r["skipped"] == 0 and r["group"] == kex
    assert r["offered_rate"] == 10 and r["duration_s"] == 2
    assert r["achieved_rate"] == pytest.approx(r["completed"] / 2)
    lat, svc, lag = r["latency_ms"], r["service_ms"], r["start_lag_ms"]
    # TCP connect, then KEXINIT and the key exchange itself: at least 2 round trips to NEWKEYS both ways
    assert min(r["latencies_ms"]) >= 2 * RTT_MS and svc["p50"] >= 2 * RTT_MS
    assert len(r["latencies_ms"]) == r["completed"]
    assert lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"] and lat["max"] == max(r["latencies_ms"])
    assert lat["mean"] == pytest.approx(sum(r["latencies_ms"]) / len(r["latencies_ms"]), abs=1e-3)
    # latency runs from the scheduled arrival, service from the dial, which comes at or after it
    assert lat["p50"] >= svc["p50"] and lag["p50"] >= 0 and lag["max"] >= lag["p99"] >= lag["p50"]
    # the last completion ends at least one handshake after the first arrival
    assert r["wall_s"] * 1000 >= 2 * RTT_MS


@pytest.mark.root
def test_the_seed_decides_the_arrivals(bed, sshload):
    """--seed reaches the schedule: the same seed, the same number of arrivals; a Poisson count at 100/s
    for 0.5 s stays within 6 standard deviations of 50 (the Go unit test checks the arrival times)."""
    runs = [load(bed, sshload, CLOSED_PORT, "curve25519-sha256", 100, 500, "--seed", str(seed))["scheduled"]
            for seed in (1, 1, 7)]
    assert runs[0] == runs[1] and all(abs(n - 50) <= 6 * math.sqrt(50) for n in runs), runs


@pytest.mark.root
def test_a_closed_port_is_refused_for_each_arrival(bed, sshload):
    r = load(bed, sshload, CLOSED_PORT, "mlkem768x25519-sha256", 50, 1000, "--latencies")
    assert r["scheduled"] > 0 and r["failures"] == {"connect_refused": r["scheduled"]}, r
    assert r["completed"] == 0 and r["latency_ms"] is None and r["service_ms"] is None and r["group"] is None
    assert r["wall_s"] is None and r["achieved_rate"] == 0 and r["latencies_ms"] == []
    assert r["start_lag_ms"] is not None


@pytest.mark.root
@pytest.mark.parametrize("server", SERVERS)
def test_arrivals_never_wait_for_earlier_connections(bed, sshload, server):
    """Open loop: at 200/s a handshake of at least 2 RTT (20 ms) overlaps the next arrivals (mean gap 5 ms),
    so connections are in flight together; with --max-inflight 1 one connection at a time reaches at most
    one start per 2 RTT, and the arrivals it cannot start are counted as skipped, not queued."""
    port = SERVERS[server]
    r = load(bed, sshload, port, "curve25519-sha256", 200, 2000)
    assert r["inflight_max"] >= 2 and r["skipped"] == 0, r
    one = load(bed, sshload, port, "curve25519-sha256", 200, 2000, "--max-inflight", "1")
    assert one["inflight_max"] == 1 and one["scheduled"] == r["scheduled"]  # the same seed, the same arrivals
    assert one["started"] <= 2000 / (2 * RTT_MS) + 1, one
    assert one["skipped"] == one["scheduled"] - one["started"] > 0
    assert one["achieved_rate"] <= 1000 / (2 * RTT_MS)


@pytest.mark.parametrize("args,field", [
    ([], "--host"),
    (["--host", "server.example", "--port", "22"], "--host"),
    (["--host", "10.0.0.1"], "--port"),
    (["--host", "10.0.0.1", "--port", "70000"], "--port"),
    (["--host", "10.0.0.1", "--port", "22"], "--kex"),
    (["--host", "10.0.0.1", "--port", "22", "--kex", "curve25519-sha256", "--rate", "0", "--duration-ms", "100"], "--rate"),
    (["--host", "10.0.0.1", "--port", "22", "--kex", "curve25519-sha256", "--rate", "5"], "--duration-ms"),
    (["--host", "10.0.0.1", "--port", "22", "--kex", "no-such-kex", "--rate", "5", "--duration-ms", "100"], "--kex"),
    (["--host", "10.0.0.1", "--port", "22", "--kex", "curve25519-sha256", "--rate", "5", "--duration-ms", "100",
      "--max-inflight", "0"], "--max-inflight"),
    (["--host", "10.0.0.1", "--port", "22", "--kex", "curve25519-sha256", "--rate", "5", "--duration-ms", "100",
      "--timeout-ms", "0"], "--timeout-ms"),
    (["--host", "10.0.0.1", "--port", "22", "--kex", "curve25519-sha256", "--rate", "fast"], "-rate"),
    (["--colour", "red"], "-colour"),
])
def test_bad_options_exit_2_naming_the_option(sshload, args, field):
    proc = subprocess.run([str(sshload), *args], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2 and field in proc.stderr and proc.stdout == "", proc.stderr


def test_go_unit_tests_pass_offline(sshload):
    """native/sshgo's own tests (the SSH stream parser and error classes shared with sshtimer, sshload's
    schedule, percentiles, summary and options), with no network (GOPROXY=off): compiled once by the build
    (scripts/build-go.sh), each package's binary run here."""
    from conftest import assert_go_unit_tests_pass
    assert_go_unit_tests_pass("sshgo")
