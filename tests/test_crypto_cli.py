"""`pqbench crypto`, `algorithms` and `doctor` through the real CLI."""

import json

import pytest

from conftest import run_pqbench
from pqbench.algorithms import openssl_build


def test_crypto_json_has_sizes_and_three_operations(built_stack):
    proc = run_pqbench("crypto", "--alg", "X25519MLKEM768", "--alg", "mldsa44", "--seconds", "0.05", "--json")
    assert proc.returncode == 0, proc.stderr
    results = {r["name"]: r for r in json.loads(proc.stdout)}
    kem, sig = results["X25519MLKEM768"], results["mldsa44"]
    assert kem["sizes"] == {"pk": 1216, "ct": 1120, "ss": 64}
    assert set(kem["ops"]) == {"keygen", "encaps", "decaps"}
    assert set(sig["ops"]) == {"keygen", "sign", "verify"}
    for r in results.values():
        for op in r["ops"].values():
            assert op["n"] >= 5 and 0 < op["min_us"] <= op["median_us"] <= op["max_us"]


@pytest.mark.parametrize("seconds", ["fast", "0", "-1", "1e9"])
def test_invalid_seconds_is_exit_2(seconds):
    proc = run_pqbench("crypto", "--alg", "X25519", "--seconds", seconds)
    assert proc.returncode == 2 and "--seconds" in proc.stderr


def test_unknown_algorithm_is_exit_2_with_closest_names():
    proc = run_pqbench("crypto", "--alg", "kyber768x")
    assert proc.returncode == 2
    assert "--alg" in proc.stderr and "closest" in proc.stderr


def test_algorithms_json_lists_enough_with_computed_availability(built_stack):
    proc = run_pqbench("algorithms", "--json")
    assert proc.returncode == 0, proc.stderr
    algs = json.loads(proc.stdout)
    assert len(algs) >= 60
    by_name = {a["name"]: a for a in algs}
    assert by_name["X25519MLKEM768"]["available"] and by_name["X25519MLKEM768"]["tls"]
    assert by_name["slhdsasha2128s"]["available"]
    # OpenSSL 3.5 has no TLS 1.3 scheme for SLH-DSA; pqprov offers one when it is built.
    assert by_name["slhdsasha2128s"]["tls"] == openssl_build.pqprov_path().exists()
    assert all("available" in a for a in algs)
    kems = json.loads(run_pqbench("algorithms", "--kind", "kem", "--json").stdout)
    assert kems and all(a["kind"] == "kem" for a in kems)


def test_algorithms_show_ssh_names_beside_tls_ones_with_what_the_ssh_binaries_say(built_stack):
    """One table: the SSH names sit on the algorithm's row; SSH's own groups have rows of their own;
    whether an SSH stack has a name is asked of its binaries (OpenSSH has no ML-DSA host keys)."""
    by_name = {a["name"]: a for a in json.loads(run_pqbench("algorithms", "--json", check=True).stdout)}
    hybrid = by_name["X25519MLKEM768"]
    assert hybrid["ssh"] == ["mlkem768x25519-sha256"]
    assert hybrid["stacks"]["openssh"] == {"protocol": "ssh", "name": "mlkem768x25519-sha256", "server": True,
                                           "client": True}
    assert by_name["modp8192"]["available"] is False
    assert by_name["modp8192"]["stacks"]["openssh"]["server"] and not by_name["modp8192"]["stacks"]["gossh"]["server"]
    mldsa = by_name["mldsa44"]["stacks"]
    assert mldsa["gossh"]["server"] and not mldsa["openssh"]["server"] and "ML-DSA" in mldsa["openssh"]["reason"]
    assert by_name["sphincssha2128fsimple"]["stacks"]["gossh"]["name"] == "sizeonly-sphincssha2128fsimple"


def test_doctor_json_reports_the_stack(built_stack):
    proc = run_pqbench("doctor", "--json")
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(proc.stdout)
    assert rep["openssl"]["version"].startswith("3.5")
    assert "X25519MLKEM768" in rep["openssl"]["tls_groups"]
    assert "mldsa44" in rep["openssl"]["tls_sigalgs"]
    assert rep["liboqs"]["version"] == "0.13.0" and "HQC-128" in rep["liboqs"]["kems"]
    assert rep["openssl"]["provenance"]["sha256"]
    assert isinstance(rep["netem"], bool) and rep["congestion_control"]["allowed"]
