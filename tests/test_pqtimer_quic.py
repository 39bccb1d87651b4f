"""pqtimer over QUIC (native/pqtimer/quic.c): OpenSSL 3.5's QUIC client measured through a pqlink link against
a tiny HTTP/3 server on OpenSSL's QUIC server API (native/pqtimer/test_quic_server.c): the asked group and
signature are negotiated, the QUIC phases come in order and no sooner than the link's round trips allow,
the client's datagram counts and its Finished's offset agree with pqlink's record, a page arrives over
HTTP/3 with its bytes, and a silent or refused port is a failure. What OpenSSL's QUIC client cannot do is
refused with exit 3."""

import contextlib
import json
import socket
import subprocess

import pytest

from pqbench.algorithms import certs, openssl_build
from pqbench.endpoints.base import ClientJob, Place
from pqbench.endpoints.openssl.pqtimer import Pqtimer, binary
from pqbench.errors import MissingCapability
from pqbench.measure import sampler
from pqbench.sample import timeline
from pqbench.testbed import LinkSpec, Testbed

RTT_MS = 10
SERVER_GROUPS = "X25519MLKEM768:p256_mlkem512:mlkem768:X25519"
ECDSA_RETRY, MLDSA_NO_RETRY, SILENT, CLOSED = 4433, 4434, 4435, 4436
PAGE_BYTES = 20_000
SIGALG = {"ecdsap256": "ecdsa_secp256r1_sha256", "mldsa44": "mldsa44"}
_QUIC = timeline("tls", "quic").phases
PHASE_ORDER = _QUIC[:_QUIC.index("handshake_done") + 1]  # the handshake's, in order


def server_binary():
    return binary().parent / "test_quic_server"


@contextlib.contextmanager
def quic_server(tb, port, chain, directory, *, retry):
    """test_quic_server in the server namespace, serving chain (leaf first) on UDP port."""
    pem = directory / f"chain-{port}.pem"
    pem.write_bytes(chain.leaf_cert.read_bytes() +
                    (chain.intermediates_file.read_bytes() if chain.intermediates else b""))
    proc = tb.popen("server", [str(server_binary()), "--host", tb.server_addr, "--port", str(port),
                               "--cert", str(pem), "--key", str(chain.leaf_key), "--groups", SERVER_GROUPS,
                               "--retry", "on" if retry else "off", "--body", str(PAGE_BYTES)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=openssl_build.openssl_env())
    try:
        line = proc.stdout.readline().decode().strip()
        assert line == "ready", proc.stderr.read().decode()
        yield
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def bed(built_stack, tmp_path_factory):
    assert binary().exists() and server_binary().exists(), "not built (run `make`)"
    d = tmp_path_factory.mktemp("pqtimer-quic")
    chains = {sig: certs.make_chain(sig, d / sig) for sig in ("ecdsap256", "mldsa44")}
    with Testbed(LinkSpec.symmetric(rtt_ms=RTT_MS), backend="pqlink") as tb, contextlib.ExitStack() as stack:
        stack.enter_context(quic_server(tb, ECDSA_RETRY, chains["ecdsap256"], d, retry=True))
        stack.enter_context(quic_server(tb, MLDSA_NO_RETRY, chains["mldsa44"], d, retry=False))
        silent = stack.enter_context(tb.socket("server", socket.AF_INET, socket.SOCK_DGRAM))
        silent.bind((tb.server_addr, SILENT))  # takes datagrams and never answers
        place = Place(addr=tb.client_addr, popen=lambda argv, **kw: tb.popen("client", argv, **kw),
                      socket=lambda: tb.socket("client"))
        yield {"tb": tb, "chains": chains, "dir": d, "place": place}


def measure(bed, port, sig, n=3, group="X25519MLKEM768", **job):
    chain = bed["chains"][sig]
    j = ClientJob(host=bed["tb"].server_addr, port=port, groups=[group], cafile=str(chain.root_cert),
                  servername=chain.server_name, transport="quic", **job)
    return sampler.run(Pqtimer(), j, n, 1, bed["place"], bed["dir"])


def udp_record(bed, sample, name):
    flows = bed["tb"].backend.flows(bed["dir"] / f"{name}.jsonl")
    mine = [f for f in flows if f["proto"] == "udp" and f["client"].endswith(f":{sample['local_port']}")]
    assert len(mine) == 1, [f["client"] for f in flows]
    return mine[0]


def sizes(record, direction):
    return [d[2] for d in record["datagrams"] if d[0] == direction]


def prefix_sums(xs):
    out, total = [0], 0
    for x in xs:
        total += x
        out.append(total)
    return out


@pytest.mark.root
@pytest.mark.parametrize("port,sig,group", [(ECDSA_RETRY, "ecdsap256", "X25519MLKEM768"),
                                            (MLDSA_NO_RETRY, "mldsa44", "X25519MLKEM768"),
                                            (MLDSA_NO_RETRY, "mldsa44", "p256_mlkem512"),
                                            (ECDSA_RETRY, "ecdsap256", "mlkem768")])
def test_the_asked_group_and_signature_are_negotiated_with_the_quic_phases_in_order(bed, port, sig, group):
    samples = measure(bed, port, sig, group=group)
    assert all(s["ok"] for s in samples), [s["error"] for s in samples]
    retry = port == ECDSA_RETRY
    for s in samples:
        assert s["transport"] == "quic" and s["group"].lower() == group.lower() and s["sigalg"] == SIGALG[sig]
        assert s["verify"] == "ok" and isinstance(s["local_port"], int) and s["local_port"] > 0
        t = s["t_ns"]
        assert t["tcp_connected"] is None and t["first_byte"] is None
        times = [t[p] for p in PHASE_ORDER]
        assert all(x is not None for x in times) and times == sorted(times), t
        q = s["quic"]
        assert q["initial_size"] == 1200 and q["version"] == "0x00000001" and q["retry"] is retry and not q["gso"]
        # the first datagram is the Initial with the ClientHello
        assert q["sent_kinds"][0] == "I" and q["datagrams_sent"] >= 3 and q["datagrams_received"] >= 2
        assert (q["received_kinds"][0] == "R") is retry
        # the link's round trips bound the phases from below, whatever the CPUs do: the ServerHello needs one
        # round trip, and one more after a Retry
        rtts = 2 if retry else 1
        assert t["server_hello_received"] >= rtts * RTT_MS * 1e6 and t["handshake_done"] >= rtts * RTT_MS * 1e6


@pytest.mark.root
def test_datagram_counts_and_the_finished_offset_agree_with_the_link_record(bed):
    s = measure(bed, MLDSA_NO_RETRY, "mldsa44", n=1)[0]
    assert s["ok"], s["error"]
    rec = udp_record(bed, s, "handshake")
    q, m = s["quic"], s["wire_milestone"]
    c2s, s2c = sizes(rec, "c2s"), sizes(rec, "s2c")
    # what the client counted is what crossed the link, datagram by datagram (no segmentation offload: none
    # above a 1500-byte MTU's payload); the close after the sample may add some
    assert sum(c2s[:q["datagrams_sent"]]) == q["bytes_sent"] and max(c2s) <= 1472
    assert sum(s2c[:q["datagrams_received"]]) == q["bytes_received"]
    assert all(d[3] == "delivered" for d in rec["datagrams"])
    # the Finished's datagram starts at the offset the sample names, after the client's Initials
    assert m["dir"] == "c2s" and m["edge"] == "first" and m["offset"] in prefix_sums(c2s)[:q["datagrams_sent"]]
    assert m["offset"] >= 2 * 1200
    assert len(q["sent_kinds"]) == prefix_sums(c2s).index(m["offset"]) + 1 and "H" in q["sent_kinds"][-1]


@pytest.mark.root
def test_a_page_arrives_over_http3_with_its_bytes(bed):
    samples = measure(bed, ECDSA_RETRY, "ecdsap256", n=2, mode="page", path="/20k")
    assert all(s["ok"] for s in samples), [s["error"] for s in samples]
    for s in samples:
        t = s["t_ns"]
        assert s["http_status"] == 200 and s["body_bytes"] == PAGE_BYTES and s["requests"] == 1
        # the request leaves after the handshake: its response a round trip later at the earliest
        assert t["handshake_done"] + RTT_MS * 1e6 <= t["first_byte"] <= t["last_byte"]
    rec = udp_record(bed, samples[-1], "page")
    m, q = samples[-1]["wire_milestone"], samples[-1]["quic"]
    s2c = sizes(rec, "s2c")
    # the datagram that completed the response, among those the client had received (the page's bytes
    # are in what came before it and in it)
    assert m["dir"] == "s2c" and m["offset"] in prefix_sums(s2c)[:q["datagrams_received"]]
    assert m["offset"] + s2c[prefix_sums(s2c).index(m["offset"])] >= PAGE_BYTES


@pytest.mark.root
def test_requests_each_take_a_stream_and_a_missing_page_is_a_failure(bed):
    s = measure(bed, MLDSA_NO_RETRY, "mldsa44", n=1, mode="requests", requests=3, path="/20k")[0]
    assert s["ok"] and s["requests"] == 3 and s["body_bytes"] == 3 * PAGE_BYTES, s["error"]
    s = measure(bed, MLDSA_NO_RETRY, "mldsa44", n=1, mode="page", path="/404")[0]
    assert not s["ok"] and s["error_class"] == "http_status" and s["http_status"] == 404


def run_direct(bed, port, timeout_ms):
    """pqtimer run once in the client namespace without the sampler (whose deadline a loaded machine could
    pass before the client's own timeout): its exit code and sample."""
    chain = bed["chains"]["ecdsap256"]
    j = ClientJob(host=bed["tb"].server_addr, port=port, groups=["X25519MLKEM768"], cafile=str(chain.root_cert),
                  servername=chain.server_name, transport="quic", timeout_ms=timeout_ms)
    r = bed["tb"].run("client", Pqtimer().argv(j, 1, 0, None), capture_output=True, text=True, timeout=300,
                      env=openssl_build.openssl_env())
    return r.returncode, json.loads(r.stdout)


@pytest.mark.root
def test_a_silent_port_times_out_and_a_closed_one_is_refused(bed):
    code, silent = run_direct(bed, SILENT, 1500)
    assert code == 1 and not silent["ok"] and silent["error_class"] == "timeout", silent["error"]
    assert silent["t_ns"]["handshake_done"] is None
    assert silent["quic"]["datagrams_sent"] >= 2 and silent["quic"]["datagrams_received"] == 0
    code, refused = run_direct(bed, CLOSED, 5000)
    assert code == 1 and not refused["ok"] and refused["error_class"] == "connect_refused", refused["error"]


@pytest.mark.root
def test_a_wrong_ca_fails_verification(bed):
    chain = bed["chains"]["mldsa44"]
    j = ClientJob(host=bed["tb"].server_addr, port=ECDSA_RETRY, groups=["X25519MLKEM768"],
                  cafile=str(chain.root_cert), servername=chain.server_name, transport="quic")
    s = sampler.run(Pqtimer(), j, 1, 1, bed["place"], bed["dir"])[0]
    assert not s["ok"] and s["error_class"] == "cert_verify"


def pqtimer(*args):
    return subprocess.run([str(binary()), "--host", "127.0.0.1", "--port", "4433", *args], capture_output=True,
                          text=True, timeout=60, env=openssl_build.openssl_env())


@pytest.mark.parametrize("args,says", [(["--transport", "quic", "--initial-size", "1300"], "cannot set the size"),
                                       (["--transport", "quic", "--mode", "resume"], "does not resume"),
                                       (["--transport", "quic", "--mode", "early"], "does not resume")])
def test_what_openssls_quic_client_cannot_do_is_refused(built_stack, args, says):
    r = pqtimer(*args)
    assert r.returncode == 3 and says in r.stderr
    job = ClientJob(host="127.0.0.1", port=4433, groups=["X25519"], cafile=None, servername="x", transport="quic",
                    mode=args[-1] if "--mode" in args else "handshake",
                    initial_size=int(args[-1]) if "--initial-size" in args else None)
    with pytest.raises(MissingCapability, match=says):
        Pqtimer().argv(job, 1, 0, None)


@pytest.mark.parametrize("args,field", [(["--transport", "udp"], "--transport"),
                                        (["--initial-size", "1200"], "--initial-size"),
                                        (["--transport", "quic", "--initial-size", "1500"], "--initial-size")])
def test_bad_quic_options_name_the_field(built_stack, args, field):
    r = pqtimer(*args)
    assert r.returncode == 2 and field in r.stderr


def test_the_initial_size_openssl_sends_is_accepted(built_stack):
    job = ClientJob(host="127.0.0.1", port=4433, groups=["X25519"], cafile=None, servername="x", transport="quic",
                    initial_size=1200)
    argv = Pqtimer().argv(job, 1, 0, None)
    assert argv[argv.index("--transport") + 1] == "quic" and argv[argv.index("--initial-size") + 1] == "1200"
