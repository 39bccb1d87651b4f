"""Merkle Tree Certificates from pqbench's MTC CA (pqbench.algorithms.mtc), checked by code that is not ours: the
`mtcs` crate in pqrustls verifies them, and refuses a flipped bit, another CA's landmark and another name; the
chain axis sends them to the clients that verify them, and tells the others to use the size-only stand-in."""

import base64
import json
import subprocess

import pytest

from conftest import run_pqbench

from pqbench.algorithms import chains, mtc
from pqbench.endpoints import tlsrs

NAME = "server.pqbench.test"


@pytest.fixture(scope="module")
def issued(built_stack, tmp_path_factory):
    """A standalone and a landmark-relative ML-DSA-44 MTC, each from a CA of its own."""
    out = tmp_path_factory.mktemp("mtc")
    return {kind: chains.make("mldsa44", out / kind, f"mtc-{kind}") for kind in mtc.KINDS}


def verify(trust, cert, name=NAME) -> dict:
    r = subprocess.run([str(tlsrs.binary("pqrustls")), "mtc-verify", str(trust), str(cert), name], capture_output=True,
                       text=True, timeout=60)
    out = json.loads(r.stdout)
    assert (r.returncode == 0) == out["verified"], r
    return out


def test_the_crate_verifies_what_the_ca_issued(issued):
    standalone = verify(issued["standalone"].root_cert, issued["standalone"].chain_file)
    assert standalone["kind"] == "standalone" and standalone["ca"] == mtc.CA_ID
    assert standalone["cosigners"] == [mtc.CA_ID, mtc.MIRROR_ID]  # the CA and the mirror the trust file requires
    assert standalone["subtree"] == [mtc.LANDMARK_SIZE, mtc.TREE_SIZE]
    landmark = verify(issued["landmark"].root_cert, issued["landmark"].chain_file)
    assert landmark["kind"] == "landmark" and landmark["cosigners"] == [] and landmark["subtree"] == [0, mtc.LANDMARK_SIZE]


def test_a_flipped_bit_another_landmark_or_another_name_does_not_verify(issued, tmp_path):
    cert = issued["landmark"]
    der = bytearray(chains.pem_ders(cert.chain_file.read_text())[0])
    for at in (len(der) // 3, len(der) - 40):  # in the TBS (the entry hash), in the inclusion proof
        flipped = bytearray(der)
        flipped[at] ^= 1
        path = tmp_path / f"flipped-{at}.pem"
        path.write_text("-----BEGIN CERTIFICATE-----\n" + base64.encodebytes(bytes(flipped)).decode()
                        + "-----END CERTIFICATE-----\n")
        assert not verify(cert.root_cert, path)["verified"]
    assert "inclusion proof" in verify(issued["standalone"].root_cert, cert.chain_file)["error"]  # another CA's landmark
    assert not verify(cert.root_cert, cert.chain_file, "other.pqbench.test")["verified"]


def test_an_mtc_is_counted_by_part(issued):
    """Its proof where a signature would be: the cosignatures (two ML-DSA-44) and the proof hashes apart."""
    standalone, landmark = issued["standalone"].parts, issued["landmark"].parts
    assert standalone["signatures"] == 2 * 2420 and standalone["mtc_proof"] == 12 * 32
    assert landmark["signatures"] == 0 and landmark["mtc_proof"] == 23 * 32
    for p in (standalone, landmark):
        assert not p["size_only"] and p["public_keys"] == 1312
        assert p["public_keys"] + p["signatures"] + p["mtc_proof"] + p["framing"] == p["sent"]


def test_a_client_that_cannot_verify_an_mtc_is_told_of_the_stand_in(built_stack):
    r = run_pqbench("handshake", "--client", "openssl", "--server", "rustls", "--kex", "X25519", "--sig", "mldsa44",
                    "--chain", "mtc-landmark", "-n", "1")
    assert r.returncode == 3 and "cannot verify a Merkle Tree Certificate" in r.stderr, r.stderr
    assert "mtc-landmark-size" in r.stderr


@pytest.mark.root
@pytest.mark.parametrize("server,chain", [("rustls", "mtc-landmark"), ("openssl", "mtc-standalone")])
def test_rustls_verifies_a_real_mtc_in_the_handshake(built_stack, server, chain):
    """nginx (the default server) and the rustls server send the MTC alone; the handshake completes only because
    the client's verifier accepted it."""
    r = run_pqbench("handshake", "--server", server, "--client", "rustls", "--kex", "X25519MLKEM768", "--sig",
                    "mldsa44", "--chain", chain, "--rtt", "5ms", "-n", "3", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["summary"]["ok"] == 3 and out["config"]["chain"] == chain
    assert out["chain"]["bytes_sent_by_server"] == out["chain"]["der_sizes"]["leaf"]  # the MTC alone
    assert out["chain"]["mtc"]["kind"] == chain.removeprefix("mtc-")


def _mth(leaves: list[bytes]) -> bytes:
    """RFC 9162's Merkle Tree Hash of a list of leaf hashes, spelled out."""
    import hashlib
    if len(leaves) == 1:
        return leaves[0]
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + _mth(leaves[:k]) + _mth(leaves[k:])).digest()


def test_the_log_hashes_its_null_padded_entries_as_rfc_9162_does():
    """Subtree hashes of any range (not only powers of two) against the list spelled out, and each inclusion
    proof leads from its entry to its subtree's hash."""
    import hashlib
    log = mtc.Log(40)
    for i in (3, 17, 18, 39):
        log.entries[i] = hashlib.sha256(bytes([i])).digest()
    leaves = [log.entries.get(i, log.hash(i, i + 1)) for i in range(40)]
    for start, end in ((0, 40), (0, 32), (32, 40), (16, 24), (5, 6), (0, 37)):
        assert log.hash(start, end) == _mth(leaves[start:end]), (start, end)
    for index, (start, end) in ((17, (16, 24)), (39, (32, 40)), (3, (0, 32))):
        node, proof = leaves[index], log.inclusion_proof(index, start, end)
        at, size = index - start, end - start
        for sibling in proof:  # RFC 9162 §2.1.3.2, for a subtree of a power-of-two size
            node = hashlib.sha256(b"\x01" + (sibling + node if at & 1 else node + sibling)).digest()
            at >>= 1
        assert node == log.hash(start, end) and len(proof) == (size - 1).bit_length()
