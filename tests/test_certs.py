"""Certificate chains from `pqbench certs` verify with `openssl verify`, for every native algorithm."""

import stat

import pytest

from conftest import run_pqbench
from pqbench.algorithms import catalog, certs, openssl_build

NATIVE_SIGS = [a for a in catalog.algorithms("sig") if a.source == "openssl"]


def verify(chain) -> str:
    args = ["verify", "-CAfile", str(chain.root_cert), "-x509_strict"]
    if chain.intermediates:
        args += ["-untrusted", str(chain.intermediates_file)]
    proc = openssl_build.run_openssl(args + [str(chain.leaf_cert)], check=False)
    return proc.stdout.decode() + proc.stderr.decode()


def leaf_text(chain) -> str:
    return openssl_build.run_openssl(["x509", "-in", str(chain.leaf_cert), "-noout", "-text"]).stdout.decode()


@pytest.mark.parametrize("alg", NATIVE_SIGS, ids=lambda a: a.name)
def test_chain_verifies_for_every_native_algorithm(built_stack, tmp_path, alg):
    chain = certs.make_chain(alg.name, tmp_path)
    assert verify(chain).strip().endswith("OK")
    assert f"DNS:{certs.DEFAULT_SERVER_NAME}" in leaf_text(chain)
    for key in tmp_path.glob("*.key"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key
    assert chain.sent_bytes == chain.der_sizes["leaf"]  # no intermediates: the server sends the leaf


def test_mixed_chain_with_intermediate(built_stack, tmp_path):
    chain = certs.make_chain("mldsa44", tmp_path, ca_sig="slhdsasha2128s", intermediates=1)
    assert verify(chain).strip().endswith("OK")
    text = leaf_text(chain)
    assert "Signature Algorithm: SLH-DSA-SHA2-128s" in text  # issued by the SLH-DSA intermediate
    assert "ML-DSA-44" in text  # the leaf's own key
    # The intermediate's SLH-DSA-128s signature alone is 7856 bytes: the sizes reflect the chain.
    assert chain.der_sizes["intermediate1"] > 7856
    assert chain.sent_bytes == chain.der_sizes["leaf"] + chain.der_sizes["intermediate1"]


def test_a_chain_missing_its_intermediate_does_not_verify(built_stack, tmp_path):
    chain = certs.make_chain("ed25519", tmp_path, intermediates=2)
    assert verify(chain).strip().endswith("OK")
    chain.intermediates = 0  # verify without the intermediates: must fail
    assert "OK" not in verify(chain).splitlines()[-1]


def test_cli_prints_the_chain_size(built_stack, tmp_path):
    proc = run_pqbench("certs", "--sig", "ecdsap256", "--intermediates", "1", "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr
    total = sum(certs.der_size(tmp_path / f"{n}.crt") for n in ("leaf", "intermediate1"))
    assert f"{total} bytes DER" in proc.stdout


def test_unknown_algorithm_is_exit_2_with_closest_names(tmp_path):
    proc = run_pqbench("certs", "--sig", "mldsa45", "--out", tmp_path)
    assert proc.returncode == 2
    assert "--sig" in proc.stderr and "mldsa44" in proc.stderr


def test_unwritable_out_is_exit_2_naming_the_option(built_stack, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    proc = run_pqbench("certs", "--sig", "ed25519", "--out", blocker / "sub")
    assert proc.returncode == 2
    assert "--out" in proc.stderr


def test_bad_intermediates_is_exit_2(tmp_path):
    proc = run_pqbench("certs", "--sig", "ed25519", "--intermediates", "many", "--out", tmp_path)
    assert proc.returncode == 2 and "--intermediates" in proc.stderr
