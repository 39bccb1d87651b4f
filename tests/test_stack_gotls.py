"""The `gotls` stack (Go 1.27 crypto/tls, native/tlsgo) through a real testbed: the Go client against
nginx, pqtimer against the Go server, Go against Go, each negotiating what was asked; the Go client's
times against the wire record; what Go lacks is a reason, not a failure."""

import json
import stat
import subprocess

import pytest

import tlsstacks
from conftest import assert_client_leads_the_wire
from tlsstacks import job

from pqbench import endpoints
from pqbench.measure import wire
from pqbench.endpoints.gotls import build
from pqbench.testbed import LinkSpec

STACKS = ["openssl", "gotls"]
GROUPS = ["X25519", "X25519MLKEM768", "SecP256r1MLKEM768", "MLKEM1024"]
PORTS = tlsstacks.ports(STACKS)
PAIRS = [("openssl", "gotls"), ("gotls", "openssl"), ("gotls", "gotls")]  # (server, client)


@pytest.fixture(scope="module")
def gotls_built(built_stack):
    assert build.binary().exists(), f"not built: {build.binary()} (run `make`)"
    return build.binary()


@pytest.fixture(scope="module")
def bed(gotls_built, tmp_path_factory):
    """nginx and the Go server side by side, and both clients (tlsstacks.bed)."""
    with tlsstacks.bed(STACKS, GROUPS, tmp_path_factory.mktemp("gotls")) as b:
        yield b


RUNNABLE, REFUSED = tlsstacks.runnable([(s, c, k, g) for s, c in PAIRS for k in GROUPS for g in tlsstacks.SIGS])


@pytest.mark.root
@pytest.mark.parametrize("server,client,kex,sig", RUNNABLE)
def test_each_pair_negotiates_what_was_asked(bed, server, client, kex, sig):
    tlsstacks.check_negotiates(bed, server, client, kex, sig)


def test_go_runs_every_combination_of_the_matrix(gotls_built):
    """Go 1.27 has every group and chain here, the all-ML-DSA chain in its client included."""
    assert REFUSED == {}


@pytest.mark.root
@pytest.mark.parametrize("server", ["openssl", "gotls"])
def test_the_go_client_fetches_pages_and_keeps_the_connection_for_requests(bed, server):
    rig = bed["rig"]
    page = rig.sample(job(bed, server, "X25519MLKEM768", "ecdsap256", mode="page", path="/10k"), 3, 1, bed["dir"],
                      client="gotls")
    reqs = rig.sample(job(bed, server, "X25519", "ecdsap256", mode="requests", path="/1k", requests=5), 2, 1,
                      bed["dir"], client="gotls")
    for s in page + reqs:
        assert s["ok"], s["error"]
        t = s["t_ns"]
        assert 0 < t["tcp_connected"] <= t["client_hello_sent"] <= t["server_hello_received"] \
            <= t["handshake_done"] <= t["first_byte"] <= t["last_byte"], t
        assert t["server_finished_received"] is None  # crypto/tls does not show it: never invented
        assert s["http_status"] == 200
    assert [s["body_bytes"] for s in page] == [10_000] * 3
    assert [(s["requests"], s["body_bytes"]) for s in reqs] == [(5, 5000)] * 2


# Each client phase and the wire event that corresponds to it (direction, flight of that direction, edge).
PHASE_ON_WIRE = {"client_hello_sent": ("c2s", 0, 1), "server_hello_received": ("s2c", 0, 1),
                 "server_finished_received": ("s2c", 0, 2), "handshake_done": ("c2s", 1, 1)}


def phase_diffs(samples) -> dict:
    """Median of (client phase - wire event) in ms per phase, both since the connection's start (the
    client's start is before its SYN, so every phase carries that small common offset)."""
    out = {}
    for phase, (direction, index, edge) in PHASE_ON_WIRE.items():
        diffs = []
        for s in samples:
            flights = [f for f in (s.get("wire") or {}).get("flights_ms") or [] if f[0] == direction]
            t = s["t_ns"].get(phase)
            if s["ok"] and t is not None and len(flights) > index and flights[index][edge] is not None:
                diffs.append(t / 1e6 - flights[index][edge])
        out[phase] = round(sorted(diffs)[len(diffs) // 2], 4) if diffs else None
    return out


@pytest.mark.root
@pytest.mark.parametrize("server,client", PAIRS)
def test_resumption_skips_the_certificate(bed, server, client):
    """Mode resume: every sample resumes from the priming connection's ticket, so the server sends no
    certificate chain (an ML-DSA-44 chain is several kB) and no signature."""
    rig = bed["rig"]
    full = rig.sample(job(bed, server, "X25519MLKEM768", "mldsa44"), 3, 1, bed["dir"], client=client)
    # the priming request fetches a page (as `pqbench handshake` does): pqtimer keeps no ticket from a
    # connection whose response was an error (OpenSSL marks its session not resumable)
    resumed = rig.sample(job(bed, server, "X25519MLKEM768", "mldsa44", mode="resume", path="/1k"), 3, 1,
                         bed["dir"], client=client)
    assert all(s["ok"] and not s["resumed"] for s in full), [s.get("error") for s in full]
    assert all(s["ok"] and s["resumed"] for s in resumed), [s.get("error") for s in resumed]
    assert {s["group"] for s in resumed} == {"X25519MLKEM768"}
    got_full = min(s["tcp_handshake"]["bytes_received"] for s in full)
    got_resumed = max(s["tcp_handshake"]["bytes_received"] for s in resumed)
    assert got_resumed < got_full - 5000, (got_resumed, got_full)


@pytest.mark.root
@pytest.mark.parametrize("server", ["openssl", "gotls"])
def test_go_client_times_agree_with_the_wire(bed, server):
    """The Go client's handshake time against the same connection's on the wire (SYN to the client's
    Finished). Same bound as pqtimer's (it starts before its SYN and stops after writing Finished);
    the measured difference is printed for the note (pytest -s)."""
    rig, link = bed["rig"], LinkSpec.symmetric(rtt_ms=10)
    rig.begin_cell(link)
    samples = rig.sample(job(bed, server, "X25519MLKEM768", "ecdsap256", warmup=2), 40, 1, bed["dir"],
                         client="gotls")
    rig.end_cell(samples, "handshake", bed["dir"], client="gotls", server=server)
    w = wire.agreement(samples, "handshake_done")
    print(f"\ngotls client vs {server} server, wire agreement at 10 ms RTT: {json.dumps(w)}; "
          f"per phase (client - wire, median ms): {json.dumps(phase_diffs(samples))}")
    assert_client_leads_the_wire(w, rig.tb)
    # the server's whole first flight arrives after the ClientHello left. TCP retransmissions are not checked: on
    # this clean link one is a timer that fired while a server waited for a CPU beside the suite's other workers (1 of
    # 40 in a CI run); client and wire both count its wait.
    for s in samples:
        assert s["wire"]["flights"] >= 3


@pytest.mark.root
@pytest.mark.parametrize("server", ["gotls", "openssl"])
def test_pqtimer_against_the_go_server_agrees_with_the_wire(bed, server):
    """pqtimer against the Go server (nginx beside it for the per-phase comparison)."""
    rig = bed["rig"]
    rig.begin_cell(LinkSpec.symmetric(rtt_ms=10))
    samples = rig.sample(job(bed, server, "X25519MLKEM768", "ecdsap256", warmup=2), 30, 1, bed["dir"],
                         client="openssl")
    rig.end_cell(samples, "handshake", bed["dir"], client="openssl", server=server)
    w = wire.agreement(samples, "handshake_done")
    print(f"\npqtimer vs {server} server, wire agreement at 10 ms RTT: {json.dumps(w)}; "
          f"per phase (client - wire, median ms): {json.dumps(phase_diffs(samples))}")
    assert w["n"] == 30 and 0 <= w["median_diff_ms"] < wire.TOLERANCE_MS, w


@pytest.mark.root
def test_the_converted_ml_dsa_key_is_private_and_seed_only(bed):
    key = bed["servings"]["gotls"].run_dir / f"gotls-leaf-{PORTS['gotls', 'mldsa44']}.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    # seed-only PKCS#8: version, algorithm, OCTET STRING [0x80 0x20 + 32-byte seed]; well under 200 bytes
    assert len(key.read_text()) < 200


@pytest.mark.root
@pytest.mark.parametrize("server", ["openssl", "gotls"])
def test_a_failed_handshake_is_a_sample_with_its_class(bed, server):
    """The Go client offering a group the server does not accept (each accepts exactly the run's groups):
    every sample is a failure, none dropped."""
    samples = bed["rig"].sample(job(bed, server, "secp384r1", "ecdsap256"), 3, 1, bed["dir"], client="gotls")
    assert [s["ok"] for s in samples] == [False] * 3
    assert {s["error_class"] for s in samples} == {"tls_error"}, samples[0]["error"]
    assert all(s["t_ns"]["handshake_done"] is None and s["t_ns"]["tcp_connected"] for s in samples)


@pytest.mark.root
def test_a_sample_past_its_timeout_fails_as_a_timeout(bed):
    """At 400 ms RTT the TCP connect takes one RTT and the handshake another: with 600 ms the connect
    completes and the handshake times out; with 200 ms the connect itself does."""
    rig = bed["rig"]
    rig.begin_cell(LinkSpec.symmetric(rtt_ms=400))
    try:
        hs = rig.sample(job(bed, "gotls", "X25519", "ecdsap256", timeout_ms=600), 1, 1, bed["dir"], client="gotls")
        conn = rig.sample(job(bed, "gotls", "X25519", "ecdsap256", timeout_ms=200), 1, 1, bed["dir"], client="gotls")
    finally:
        rig.begin_cell(LinkSpec.symmetric(rtt_ms=10))
    assert (hs[0]["ok"], hs[0]["error_class"]) == (False, "timeout"), hs[0]
    assert hs[0]["t_ns"]["tcp_connected"] and hs[0]["t_ns"]["client_hello_sent"]
    assert (conn[0]["ok"], conn[0]["error_class"]) == (False, "connect_timeout"), conn[0]


def test_what_go_lacks_is_a_reason_naming_it(gotls_built):
    caps = endpoints.get("gotls").capabilities()
    for kex, sig, role, word in [("frodo640aes", "ecdsap256", "server", "frodo640aes"),
                                 ("x25519_hqc128", "ecdsap256", "client", "x25519_hqc128"),
                                 ("MLKEM768", "ecdsap256", "client", "MLKEM768"),
                                 ("X25519", "falcon512", "server", "falcon512"),
                                 ("X25519", "ed448", "client", "ed448")]:
        reason = caps.unsupported(kex, sig, role)
        assert reason and word in reason and "go1.27" in reason, (kex, sig, reason)
    for kex in GROUPS + ["secp256r1", "secp384r1", "SecP384r1MLKEM1024"]:
        for sig in tlsstacks.SIGS + ["mldsa65", "mldsa87", "ed25519", "rsa2048", "ecdsap384"]:
            for role in ("server", "client"):
                assert caps.unsupported(kex, sig, role) is None, (kex, sig, role)


def test_capabilities_come_from_the_binary(gotls_built):
    out = json.loads(subprocess.run([str(gotls_built), "capabilities"], capture_output=True, text=True,
                                    check=True, timeout=60).stdout)
    assert out["go"].startswith("go1.27")
    ok = {g["name"] for g in out["groups"] if g["ok"]}
    assert {"X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024", "MLKEM1024", "x25519"} <= ok
    assert "MLKEM768" not in ok  # pure ML-KEM-768 is not in Go's crypto/tls
    # the ClientHello really offers ML-DSA for certificates (an OpenSSL server picks chains by it)
    assert {"mldsa44", "mldsa65", "mldsa87"} <= set(out["client_hello"]["signature_algorithms_cert"])
    versions = endpoints.get("gotls").capabilities().versions
    assert versions["go"] == out["go"] and "golang.org/x/sys" in versions and "toolchain" in versions


def test_go_unit_tests_pass_offline(gotls_built):
    """native/tlsgo's own tests (the t_ns keys, the ClientHello as sent) and those of gotlskit, which it
    shares with quicgo (names, the t_ns shape, the sample's head), with no network (GOPROXY=off): compiled
    once by the build (scripts/build-go.sh), each package's binary run here."""
    from conftest import assert_go_unit_tests_pass
    assert_go_unit_tests_pass("gotls", "pqbench/native/gotlskit")


@pytest.mark.parametrize("args,field", [
    (["--host", "10.0.0.1"], "--port"),
    (["--host", "nowhere", "--port", "1"], "--host"),
    (["--host", "10.0.0.1", "--port", "70000"], "--port"),
    (["--host", "10.0.0.1", "--port", "1", "--mode", "dance"], "--mode"),
    (["--host", "10.0.0.1", "--port", "1", "--groups", "frodo640aes"], "--groups"),
    (["--host", "10.0.0.1", "--port", "1", "--claim", "/dev/null"], "--claim"),
    (["--host", "10.0.0.1", "--port", "1", "--colour", "red"], "--colour"),
])
def test_go_client_bad_options_exit_2_naming_the_option(gotls_built, args, field):
    proc = subprocess.run([str(gotls_built), "client", *args], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2 and field in proc.stderr, proc.stderr
