"""The BoringSSL stack (`boringssl`; native/tlsboring, BoringSSL as vendored in the boring-sys crate) through a real
testbed: its client against nginx, pqtimer and rustls against its server, each with itself, negotiating what was
asked (ML-DSA-44 chains signed and verified by BoringSSL); its client's times against the wire record; what it
lacks is a reason, not a failure."""

import json
import subprocess

import pytest

import tlsstacks
from conftest import assert_client_leads_the_wire
from tlsstacks import job

from pqbench import endpoints
from pqbench.endpoints import tlsrs
from pqbench.measure import wire
from pqbench.testbed import LinkSpec

GROUPS = ["X25519", "X25519MLKEM768", "MLKEM1024"]
PAIRS = [("openssl", "boringssl"), ("boringssl", "openssl"), ("boringssl", "boringssl"), ("boringssl", "rustls")]


@pytest.fixture(scope="module")
def boring_built(built_stack):
    b = tlsrs.binary("pqboring")
    assert b.exists(), f"not built: {b} (run `make stacks`)"
    return b


@pytest.fixture(scope="module")
def bed(boring_built, tmp_path_factory):
    with tlsstacks.bed(["openssl", "boringssl", "rustls"], GROUPS, tmp_path_factory.mktemp("boring")) as b:
        yield b


# every combination runs (what BoringSSL lacks is checked below)
RUNNABLE, _ = tlsstacks.runnable([(s, c, k, g) for s, c in PAIRS for k in GROUPS for g in tlsstacks.SIGS])


@pytest.mark.root
@pytest.mark.parametrize("server,client,kex,sig", RUNNABLE)
def test_each_pair_negotiates_what_was_asked(bed, server, client, kex, sig):
    tlsstacks.check_negotiates(bed, server, client, kex, sig)


def test_what_boringssl_lacks_is_a_reason_naming_it(boring_built):
    assert "BoringSSL" in endpoints.unsupported("boringssl", "boringssl", "SecP256r1MLKEM768", "ecdsap256", "handshake")
    assert "has no TLS group frodo640aes" in endpoints.unsupported("openssl", "boringssl", "frodo640aes", "ecdsap256",
                                                                   "handshake")


@pytest.mark.root
@pytest.mark.parametrize("server", ["openssl", "boringssl"])
def test_client_times_agree_with_the_wire(bed, server):
    """Its handshake time against the same connection's on the wire (SYN to its Finished); the measured differences
    are printed for the note (pytest -s)."""
    rig = bed["rig"]
    rig.begin_cell(LinkSpec.symmetric(rtt_ms=10))
    samples = rig.sample(job(bed, server, "X25519MLKEM768", "mldsa44", warmup=2), 40, 1, bed["dir"], client="boringssl")
    rig.end_cell(samples, "handshake", bed["dir"], client="boringssl", server=server)
    w = wire.agreement(samples, "handshake_done")
    print(f"\nboringssl client vs {server} server, wire agreement at 10 ms RTT: {json.dumps(w)}")
    assert_client_leads_the_wire(w, rig.tb)
    for s in samples:
        t = s["t_ns"]
        assert 0 < t["tcp_connected"] <= t["client_hello_sent"] < t["server_hello_received"] \
            <= t["server_finished_received"] <= t["handshake_done"], t
        # the ServerHello is read a round trip after the ClientHello left
        assert (t["server_hello_received"] - t["client_hello_sent"]) / 1e6 > 9, t


@pytest.mark.root
def test_the_client_fetches_a_page(bed):
    samples = bed["rig"].sample(job(bed, "openssl", "X25519MLKEM768", "ecdsap256", mode="page", path="/10k"), 2, 1,
                                bed["dir"], client="boringssl")
    assert [(s["ok"], s["http_status"], s["body_bytes"]) for s in samples] == [(True, 200, 10_000)] * 2, samples


@pytest.mark.parametrize("args,field", [
    (["--host", "10.0.0.1", "--port", "1", "--groups", "frodo640aes"], "--groups"),
    (["--host", "10.0.0.1", "--port", "1", "--groups", "x25519", "--trust-anchors", "32473.x"], "--trust-anchors"),
    (["--host", "10.0.0.1", "--port", "1", "--groups", "x25519", "--trusted-anchors", "32473.1"], "--trusted-anchors"),
])
def test_client_bad_options_exit_2_naming_the_option(boring_built, args, field):
    proc = subprocess.run([str(boring_built), "client", *args], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and field in proc.stderr, (proc.returncode, proc.stderr)


def test_server_bad_anchor_exits_2_naming_it(boring_built, tmp_path):
    proc = subprocess.run([str(boring_built), "server", "--addr", "127.0.0.1", "--groups", "x25519", "--site",
                           f"4433,{tmp_path}/none.pem,{tmp_path}/none.key", "--anchor", "4433,1.2"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "--anchor" in proc.stderr, proc.stderr
