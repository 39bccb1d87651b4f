"""The Rust TLS stacks (`rustls`, `s2n`; native/tlsrs) through a real testbed: each client against
nginx, pqtimer against each server, each against itself and the other, negotiating what was asked;
the clients' times against the wire record; what a library lacks is a reason, not a failure."""

import json
import subprocess

import pytest

import tlsstacks
from conftest import assert_client_leads_the_wire
from tlsstacks import job

from pqbench import endpoints
from pqbench.measure import wire
from pqbench.endpoints import tlsrs
from pqbench.testbed import LinkSpec

STACKS = ["rustls", "s2n"]
GROUPS = ["X25519", "X25519MLKEM768", "SecP256r1MLKEM768"]
# (server, client): each Rust client against nginx, pqtimer against each Rust server, each with itself
# and with the other.
PAIRS = [("openssl", "rustls"), ("rustls", "openssl"), ("rustls", "rustls"),
         ("openssl", "s2n"), ("s2n", "openssl"), ("s2n", "s2n"),
         ("rustls", "s2n"), ("s2n", "rustls")]


@pytest.fixture(scope="module")
def rust_built(built_stack):
    missing = [tlsrs.binary(b) for b in ("pqrustls", "pqs2n") if not tlsrs.binary(b).exists()]
    assert not missing, f"not built: {missing} (run `make`)"
    return {b: tlsrs.binary(b) for b in ("pqrustls", "pqs2n")}


@pytest.fixture(scope="module")
def bed(rust_built, tmp_path_factory):
    """nginx, the rustls server and the s2n server side by side, and all three clients (tlsstacks.bed)."""
    with tlsstacks.bed(["openssl", *STACKS], GROUPS, tmp_path_factory.mktemp("tlsrs")) as b:
        yield b


RUNNABLE, REFUSED = tlsstacks.runnable([(s, c, k, g) for s, c in PAIRS for k in GROUPS for g in tlsstacks.SIGS])


@pytest.mark.root
@pytest.mark.parametrize("server,client,kex,sig", RUNNABLE)
def test_each_pair_negotiates_what_was_asked(bed, server, client, kex, sig):
    tlsstacks.check_negotiates(bed, server, client, kex, sig)


@pytest.mark.parametrize("reason", sorted(REFUSED))
def test_what_a_pair_cannot_run_is_refused_with_its_reason(rust_built, reason):
    tlsstacks.check_refused(reason, REFUSED[reason])


def test_the_expected_pairs_are_supported_and_the_others_say_why(rust_built):
    """What the brief asks to run runs, except what s2n's policies make impossible (named in the reason)."""
    rustls, s2n = endpoints.get("rustls").capabilities(), endpoints.get("s2n").capabilities()
    for kex in GROUPS:
        for sig in tlsstacks.SIGS:
            for role in ("server", "client"):
                assert rustls.unsupported(kex, sig, role) is None, (kex, sig, role)
            assert s2n.unsupported(kex, sig, "server") is None, (kex, sig)
    assert s2n.unsupported("X25519", "ecdsap256", "client") is None
    assert s2n.unsupported("X25519MLKEM768", "ecdsap256", "client") is None
    assert s2n.unsupported("MLKEM1024", "mldsa87", "client") is None
    why = s2n.unsupported("SecP256r1MLKEM768", "ecdsap256", "client")
    assert why and "SecP256r1MLKEM768 alone" in why, why
    why = s2n.unsupported("X25519MLKEM768", "mldsa44", "client")
    assert why and "test_pq_only" in why and "mldsa44" in why, why


def test_what_the_libraries_lack_is_a_reason_naming_it(rust_built):
    rustls, s2n = endpoints.get("rustls").capabilities(), endpoints.get("s2n").capabilities()
    for caps, kex, sig, role, word in [(rustls, "frodo640aes", "ecdsap256", "server", "frodo640aes"),
                                       (rustls, "x25519_hqc128", "ecdsap256", "client", "x25519_hqc128"),
                                       (rustls, "X25519", "falcon512", "server", "falcon512"),
                                       (rustls, "X25519", "ed448", "client", "ed448"),
                                       (s2n, "frodo640aes", "ecdsap256", "client", "frodo640aes"),
                                       (s2n, "MLKEM768", "ecdsap256", "server", "MLKEM768"),
                                       (s2n, "X25519", "ed25519", "server", "ed25519"),
                                       (s2n, "X25519", "falcon512", "client", "falcon512")]:
        reason = caps.unsupported(kex, sig, role)
        assert reason and word in reason, (caps.stack, kex, sig, role, reason)
    assert rustls.versions["rustls"].startswith("0.23.") and s2n.versions["s2n-tls"].startswith("0.3.")


def test_capabilities_come_from_the_binaries(rust_built):
    r = json.loads(subprocess.run([str(rust_built["pqrustls"]), "--capabilities"], capture_output=True, text=True,
                                  check=True, timeout=60).stdout)
    assert {"x25519", "secp256r1", "X25519MLKEM768", "SecP256r1MLKEM768", "MLKEM768", "MLKEM1024"} <= set(r["groups"])
    assert {"mldsa44", "mldsa65", "mldsa87"} <= set(r["client"]["verify_sigalgs"]) & set(r["server"]["sign_sigalgs"])
    s = json.loads(subprocess.run([str(rust_built["pqs2n"]), "--capabilities"], capture_output=True, text=True,
                                  check=True, timeout=60).stdout)
    # read from the ClientHellos s2n builds: default_pq sends a hybrid and a classical share
    default_pq = next(p for p in s["policies"] if p["policy"] == "default_pq")
    assert default_pq["key_shares"] == ["X25519MLKEM768", "secp256r1"] and "mldsa44" in default_pq["sigalgs"]
    assert s["client"]["by_group"]["X25519MLKEM768"]["key_shares"] == ["X25519MLKEM768"]
    assert s["client"]["by_group"]["SecP256r1MLKEM768"] is None


@pytest.mark.root
@pytest.mark.parametrize("server,client", [("openssl", "rustls"), ("rustls", "rustls"), ("openssl", "s2n"),
                                           ("s2n", "s2n")])
def test_the_clients_fetch_pages_and_keep_the_connection_for_requests(bed, server, client):
    rig = bed["rig"]
    page = rig.sample(job(bed, server, "X25519MLKEM768", "ecdsap256", mode="page", path="/10k"), 3, 1, bed["dir"],
                      client=client)
    reqs = rig.sample(job(bed, server, "X25519", "ecdsap256", mode="requests", path="/1k", requests=5), 2, 1,
                      bed["dir"], client=client)
    for s in page + reqs:
        assert s["ok"], s["error"]
        t = s["t_ns"]
        assert 0 < t["tcp_connected"] <= t["client_hello_sent"] <= t["server_hello_received"] \
            <= t["server_finished_received"] <= t["handshake_done"] <= t["first_byte"] <= t["last_byte"], t
        # (no check of TCP retransmissions: on this clean link one is a timer that fired while the emulator waited
        # for a CPU beside the suite's other workers, not what this test is about)
        assert s["http_status"] == 200
    assert [s["body_bytes"] for s in page] == [10_000] * 3
    assert [(s["requests"], s["body_bytes"]) for s in reqs] == [(5, 5000)] * 2


# Each client phase and the wire event it corresponds to (direction, flight of that direction, edge
# index in flights_ms: 1 = first packet, 2 = last packet).
PHASE_ON_WIRE = {"client_hello_sent": ("c2s", 0, 1), "server_hello_received": ("s2c", 0, 1),
                 "server_finished_received": ("s2c", 0, 2), "handshake_done": ("c2s", 1, 1)}


def phase_diffs(samples) -> dict:
    """Median of (client phase - wire event) in ms per phase, both since the connection's start."""
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
@pytest.mark.parametrize("server,client", [("openssl", "rustls"), ("rustls", "rustls"), ("openssl", "s2n"),
                                           ("s2n", "s2n"), ("rustls", "openssl"), ("s2n", "openssl")])
def test_client_times_agree_with_the_wire(bed, server, client):
    """A client's handshake time against the same connection's on the wire (SYN to the client's
    Finished): within pqtimer's bound (it starts before its SYN and stops after writing Finished). The
    measured differences are printed for the note (pytest -s)."""
    rig = bed["rig"]
    rig.begin_cell(LinkSpec.symmetric(rtt_ms=10))
    samples = rig.sample(job(bed, server, "X25519MLKEM768", "ecdsap256", warmup=2), 40, 1, bed["dir"], client=client)
    rig.end_cell(samples, "handshake", bed["dir"], client=client, server=server)
    w = wire.agreement(samples, "handshake_done")
    print(f"\n{client} client vs {server} server, wire agreement at 10 ms RTT: {json.dumps(w)}; "
          f"per phase (client - wire, median ms): {json.dumps(phase_diffs(samples))}")
    assert_client_leads_the_wire(w, rig.tb)
    # the server's whole first flight arrives after the ClientHello left. TCP retransmissions are not checked: on
    # this clean link one is a timer that fired while a server waited for a CPU beside the suite's other workers (1 of
    # 40 in a CI run); client and wire both count its wait.
    for s in samples:
        assert s["wire"]["flights"] >= 3


@pytest.mark.root
@pytest.mark.parametrize("client", STACKS)
def test_a_failed_handshake_is_a_sample_with_its_class(bed, client):
    """A group the servers do not accept: every sample is a failure with its class, none dropped."""
    samples = bed["rig"].sample(job(bed, "openssl", "secp384r1", "ecdsap256"), 3, 1, bed["dir"], client=client)
    assert [s["ok"] for s in samples] == [False] * 3
    assert all(s["error_class"] in ("tls_error", "closed") for s in samples), samples[0]["error"]
    assert all(s["t_ns"]["handshake_done"] is None and s["t_ns"]["tcp_connected"] for s in samples)


@pytest.mark.root
@pytest.mark.parametrize("server", STACKS)
def test_the_servers_refuse_a_group_the_run_does_not_accept(bed, server):
    """pqtimer offering secp384r1 (which the libraries have, but this run does not accept): refused in
    the handshake, not negotiated."""
    samples = bed["rig"].sample(job(bed, server, "secp384r1", "ecdsap256"), 2, 1, bed["dir"], client="openssl")
    assert [s["ok"] for s in samples] == [False] * 2, samples


@pytest.mark.parametrize("prog", ["pqrustls", "pqs2n"])
@pytest.mark.parametrize("args,field", [
    (["--host", "10.0.0.1", "--groups", "x25519"], "--port"),
    (["--host", "nowhere", "--port", "1", "--groups", "x25519"], "--host"),
    (["--host", "10.0.0.1", "--port", "70000", "--groups", "x25519"], "--port"),
    (["--host", "10.0.0.1", "--port", "1", "--groups", "x25519", "--mode", "dance"], "--mode"),
    (["--host", "10.0.0.1", "--port", "1", "--groups", "frodo640aes", "--cafile", "/dev/null"], "--groups"),
    (["--host", "10.0.0.1", "--port", "1", "--groups", "x25519", "--claim", "/dev/null"], "--claim"),
    (["--host", "10.0.0.1", "--port", "1", "--groups", "x25519", "--colour", "red"], "--colour"),
])
def test_client_bad_options_exit_2_naming_the_option(rust_built, prog, args, field):
    proc = subprocess.run([str(rust_built[prog]), "client", *args], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and field in proc.stderr, (proc.returncode, proc.stderr)


@pytest.mark.parametrize("prog", ["pqrustls", "pqs2n"])
def test_server_bad_options_exit_2_naming_the_option(rust_built, prog):
    for args, field in [(["--site", "1,a,b", "--groups", "x25519"], "--addr"),
                        (["--addr", "127.0.0.1", "--site", "1,a", "--groups", "x25519"], "--site"),
                        (["--addr", "127.0.0.1", "--site", "1,a,b", "--groups", "x25519", "--page", "1k"], "--page")]:
        proc = subprocess.run([str(rust_built[prog]), "server", *args], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2 and field in proc.stderr, (args, proc.returncode, proc.stderr)


def test_s2n_client_without_a_single_group_policy_exits_3_with_why(rust_built):
    proc = subprocess.run([str(rust_built["pqs2n"]), "client", "--host", "127.0.0.1", "--port", "9",
                           "--groups", "SecP256r1MLKEM768", "--cafile", "/dev/null"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 3 and "SecP256r1MLKEM768 alone" in proc.stderr, proc.stderr


def test_the_algorithms_command_shows_per_stack_what_each_has_and_why_not(rust_built):
    from conftest import run_pqbench
    algs = {a["name"]: a for a in json.loads(run_pqbench("algorithms", "--json", check=True).stdout)}
    assert algs["X25519MLKEM768"]["stacks"]["rustls"] == {"protocol": "tls", "name": "X25519MLKEM768",
                                                            "server": True, "client": True}
    frodo = algs["p256_frodo640aes"]["stacks"]
    assert frodo["openssl"]["server"] and not frodo["rustls"]["server"] and not frodo["rustls"]["client"]
    assert "p256_frodo640aes" in frodo["rustls"]["reason"]


@pytest.mark.root
def test_rustls_names_its_finished_when_the_server_s_flight_spans_two_windows(rust_built):
    """An ML-DSA-44 WebPKI chain (~17 kB first flight) over TCP's initial window of 10: the server waits a round trip
    for the rest; rustls sends its ChangeCipherSpec alone after the first window, so its Finished is the sample's own
    milestone (by the bytes sent before it), not the client's second flight: the wire agrees, three round trips."""
    from conftest import run_pqbench
    r = run_pqbench("handshake", "--client", "rustls", "--kex", "X25519MLKEM768", "--sig", "mldsa44", "--chain",
                    "webpki", "--rtt", "10ms", "--initcwnd", "10", "-n", "3", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["summary"]["ok"] == 3 and out["summary"]["p50_ms"] > 3 * 10, out["summary"]
    assert abs(out["wire"]["median_diff_ms"]) < 1.0, out["wire"]  # one round trip off before
