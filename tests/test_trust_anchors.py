"""Trust anchor negotiation (the trust_anchors axis, draft-ietf-tls-trust-anchor-ids-06): BoringSSL's server holds the
cell's chain (sent when the client names its root's ID) and a classical fallback; the client names it (match), names
another root with the fallback's at hand (fallback) or without it and recovers with a second connection (retry), or
sends nothing (unsent). Bytes and round trips per case, on the wire."""

import json
import shutil
from pathlib import Path

import pytest

from conftest import run_pqbench

from pqbench.algorithms import chains, trust_anchors
from pqbench.algorithms.openssl_build import run_openssl
from pqbench.measure import wire

RTT = 20.0
OWN, UNKNOWN, FALLBACK = chains.ANCHOR_IDS["chain"], chains.ANCHOR_IDS["unknown"], chains.ANCHOR_IDS["fallback"]


def test_the_fallback_chain_comes_from_a_root_of_its_own(built_stack, tmp_path):
    chain = chains.make("mldsa44", tmp_path, anchors=True)
    a = chain.trust_anchors
    assert (a["id"], a["fallback"]["id"], a["fallback"]["sig"]) == (OWN, FALLBACK, "ecdsap256")

    def verifies(cafile, chain_file) -> bool:
        return run_openssl(["verify", "-CAfile", str(cafile), str(chain_file)], check=False).returncode == 0
    assert verifies(a["fallback"]["root"], a["fallback"]["chain"]) and not verifies(chain.root_cert, a["fallback"]["chain"])
    assert verifies(a["trust_both"], a["fallback"]["chain"]) and verifies(a["trust_both"], chain.chain_file)
    assert chain.parts["fallback"]["sent"] < chain.parts["sent"]  # an ECDSA chain against an ML-DSA one


def test_each_case_s_client_names_and_trusts_what_it_says(built_stack, tmp_path):
    a = chains.make("ecdsap256", tmp_path, anchors=True).trust_anchors
    plan = lambda v: trust_anchors.client_plan(v, a, "root.pem")  # noqa: E731
    assert plan("match") == trust_anchors.ClientPlan([OWN], [OWN], "root.pem")
    assert plan("fallback").requested == [UNKNOWN] and plan("fallback").cafile == str(a["trust_both"])
    assert plan("retry") == trust_anchors.ClientPlan([UNKNOWN], [OWN], "root.pem")
    assert plan("unsent") == trust_anchors.ClientPlan(None, [], str(a["fallback"]["root"]))


def test_a_recovery_s_two_connections_are_one_wire_sample():
    first = {"open_ns": 0, "syn_ns": 0, "c2s": {"packets": 6, "bytes": 1425}, "s2c": {"packets": 4, "bytes": 1884},
             "flights": [{"dir": "c2s", "first_ns": 0, "last_ns": 0}]}
    second_flow = {"open_ns": 64_000_000, "syn_ns": 64_000_000}
    second = {"ms": 64.0, "bytes_c2s": 1481, "bytes_s2c": 7850, "packets_c2s": 10, "packets_s2c": 8, "flights": 4}
    both = wire.with_first_connection(second, first, second_flow)
    assert both["ms"] == 128.0 and both["first_connection_ms"] == 64.0 and both["connections"] == 2
    assert (both["bytes_c2s"], both["bytes_s2c"], both["packets_c2s"]) == (2906, 9734, 16)


def test_a_case_outside_the_list_is_bad_input():
    r = run_pqbench("handshake", "--server", "boringssl", "--client", "boringssl", "--kex", "X25519", "--sig",
                    "ecdsap256", "--trust-anchors", "sometimes", "-n", "1")
    assert r.returncode == 2 and "--trust-anchors" in r.stderr and "retry" in r.stderr, r.stderr


def test_a_client_without_trust_anchors_is_a_skipped_cell(built_stack):
    r = run_pqbench("handshake", "--server", "boringssl", "--client", "openssl", "--kex", "X25519", "--sig", "ecdsap256",
                    "--trust-anchors", "match", "-n", "1")
    assert r.returncode == 3 and "trust anchors client" in r.stderr.replace("_", " "), r.stderr


def _case(value: str) -> tuple[dict, list[dict]]:
    r = run_pqbench("handshake", "--server", "boringssl", "--client", "boringssl", "--kex", "X25519MLKEM768", "--sig",
                    "mldsa44", "--rtt", f"{RTT}ms", "-n", "3", "--trust-anchors", value, "--json", "--keep")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    samples = [json.loads(line) for line in (Path(out["run_dir"]) / "samples.jsonl").read_text().splitlines()]
    shutil.rmtree(out["run_dir"])  # kept for its samples only
    assert out["summary"]["ok"] == 3 and all(s["ok"] for s in samples), samples
    # the client's clock agrees with the wire's, both connections of a retry included (a sample joined to one of
    # them alone would be two round trips off); within what a busy machine allows (tests/conftest.py)
    assert out["wire"]["n"] == 3 and 0 <= out["wire"]["median_diff_ms"] < 2.5, out["wire"]
    return out, samples


@pytest.mark.root
def test_the_server_chooses_the_chain_by_the_client_s_trust_anchors(built_stack):
    match, m = _case("match")
    fallback, f = _case("fallback")
    retry, r = _case("retry")
    unsent, u = _case("unsent")
    # match: the cell's ML-DSA-44 chain, which the server marked as matched; it lists the one ID it has a chain for
    assert match["negotiated"]["sigalg"] == "mldsa44"
    assert all(s["trust_anchors"] == {"requested": [OWN], "matched": True, "available": [OWN]} for s in m)
    # fallback and unsent: the classical chain; its bytes fewer by the chains' difference
    for out, samples in ((fallback, f), (unsent, u)):
        assert out["negotiated"]["sigalg"] == "ecdsa_secp256r1_sha256"
        assert match["bytes"]["server_to_client"] - out["bytes"]["server_to_client"] > 5000, (match, out)
    assert all(s["trust_anchors"] == {"requested": [UNKNOWN], "matched": False, "available": [OWN]} for s in f)
    assert all("trust_anchors" not in s for s in u)
    # the extension: 4 bytes of header, 2 of list length, 1 + 4 for the one ID
    assert fallback["bytes"]["client_to_server"] - unsent["bytes"]["client_to_server"] == 11
    # retry: the fallback chain failed to verify, the server's list named the root the client has, and a second
    # connection asked for it: two round trips more (TCP's and TLS's), both connections' bytes
    for s in r:
        assert s["first_attempt"]["error_class"] == "cert_verify", s["first_attempt"]
        assert s["trust_anchors_first"] == {"requested": [UNKNOWN], "matched": False, "available": [OWN]}
        assert s["trust_anchors"] == {"requested": [OWN], "matched": True, "available": [OWN]}
        assert s["wire"]["connections"] == 2
    assert retry["negotiated"]["sigalg"] == "mldsa44"
    extra = retry["summary"]["p50_ms"] - match["summary"]["p50_ms"]
    assert 1.8 * RTT < extra < 3 * RTT, (retry["summary"], match["summary"])
    assert retry["bytes"]["server_to_client"] > match["bytes"]["server_to_client"] + unsent["bytes"]["server_to_client"] - 200
