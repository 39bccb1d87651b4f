"""Chains as deployed and as proposed (pqbench.algorithms.chains, chain_axes): WebPKI chains with SCTs and a
stapled OCSP response, padded size-only chains, the proposed shapes' stand-ins, and the chain axes."""

import subprocess

import pytest

from pqbench.algorithms import catalog, certs, chains
from pqbench.algorithms.openssl_build import run_openssl
from pqbench.errors import BadInput
from pqbench.experiment import cells as cellmod
from pqbench.experiment import spec as specmod


@pytest.fixture(scope="module")
def webpki(built_stack, tmp_path_factory):
    made = {}

    def get(sig, shape="webpki"):
        if (sig, shape) not in made:
            made[sig, shape] = chains.make(sig, tmp_path_factory.mktemp(f"{sig}-{shape}"), shape)
        return made[sig, shape]
    return get


def _ders(path):
    return chains.pem_ders(path.read_text())


@pytest.mark.parametrize("sig", ["ecdsap256", "mldsa44"])
def test_a_webpki_chain_sends_leaf_and_intermediate_and_its_two_scts_verify_against_the_log_keys(webpki, sig):
    chain = webpki(sig)
    sent = _ders(chain.chain_file)
    root, = _ders(chain.root_cert)
    inter, = _ders(chain.directory / "intermediate1.crt")
    assert len(sent) == 2 and sent[1] == inter and root not in sent  # the intermediate is sent, the root is not
    leaf = sent[0]
    scts = next(chains.sct_list(value) for oid, value, _ in chains._Cert(leaf).extensions()
                if oid == chains.SCT_LIST_OID)
    assert len(scts) == 2
    logs = [chain.directory / f"log{i}.pub" for i in (1, 2)]
    tbs = chains.strip_extension(leaf, chains.SCT_LIST_OID)  # the precertificate's TBS, as the logs signed it
    issuer_spki = chains._Cert(inter).spki
    for sct, pub in zip(scts, logs):
        data = chains.precert_signed_data(sct["timestamp"], issuer_spki, tbs, sct["extensions"])
        assert certs.verify(pub, data, sct["signature"])
        assert not certs.verify(pub, data + b"x", sct["signature"])  # the check can fail
    assert not certs.verify(logs[1], chains.precert_signed_data(scts[0]["timestamp"], issuer_spki, tbs),
                             scts[0]["signature"])  # each SCT is its own log's
    # the whole chain verifies as a client would (the SCTs ride in a non-critical extension)
    r = run_openssl(["verify", "-CAfile", str(chain.root_cert), "-untrusted", str(chain.directory / "intermediate1.crt"),
                     str(chain.leaf_cert)], check=False)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("sig", ["ecdsap256", "mldsa44"])
def test_each_part_of_a_webpki_chain_matches_its_der(webpki, sig):
    chain = webpki(sig, "webpki-ocsp")
    alg = catalog.find(sig)
    p = chain.parts
    for cert, der in zip(p["certificates"], _ders(chain.chain_file)):
        assert cert["der"] == len(der)
        assert cert["public_key"] + cert["signature"] + cert["scts"] + cert["padding"] + cert["framing"] == len(der)
        assert cert["framing"] > 0
    assert p["sent"] == sum(len(d) for d in _ders(chain.chain_file)) == sum(
        v for k, v in chain.der_sizes.items() if k != "root")
    assert p["public_keys"] == 2 * alg.pk  # leaf and intermediate
    assert p["sct_signatures"] <= 2 * alg.sig and p["signatures"] <= 2 * alg.sig  # ECDSA's vary by a byte or two
    if sig == "mldsa44":  # fixed sizes: the published 14,724 bytes of keys and signatures with CertificateVerify
        assert p["public_keys"] + p["signatures"] + p["sct_signatures"] + alg.sig == 14724
    ocsp = (chain.directory / "ocsp.der").read_bytes()
    assert p["ocsp"] == len(ocsp) and 0 < p["ocsp_signature"] <= alg.sig
    status = run_openssl(["ocsp", "-respin", str(chain.directory / "ocsp.der"), "-issuer",
                          str(chain.directory / "intermediate1.crt"), "-cert", str(chain.leaf_cert),
                          "-CAfile", str(chain.root_cert), "-verify_other", str(chain.directory / "intermediate1.crt")],
                         check=False)
    assert status.returncode == 0 and b": good" in status.stdout, status.stdout + status.stderr


def test_a_suppressed_chain_sends_the_leaf_alone_and_the_client_holds_the_intermediate(webpki):
    chain = webpki("mldsa44", "suppressed")
    assert len(_ders(chain.chain_file)) == 1
    trust = _ders(chain.root_cert)
    assert _ders(chain.directory / "intermediate1.crt")[0] in trust
    r = run_openssl(["verify", "-CAfile", str(chain.root_cert), str(chain.leaf_cert)], check=False)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("n", [4000, 14481])
def test_a_padded_chain_sends_exactly_n_bytes_and_verifies(built_stack, tmp_path, n):
    chain = chains.make("ecdsap256", tmp_path, nbytes=n)  # ECDSA: signatures of varying length, still exact
    assert chain.parts["sent"] == n == len(_ders(chain.chain_file)[0]) and chain.parts["size_only"]
    assert chain.parts["padding"] > 0
    r = run_openssl(["verify", "-CAfile", str(chain.root_cert), str(chain.leaf_cert)], check=False)
    assert r.returncode == 0, r.stderr


def test_a_padded_chain_smaller_than_its_algorithm_allows_is_refused(built_stack, tmp_path):
    with pytest.raises(BadInput, match="already"):
        chains.make_padded("mldsa44", tmp_path, 3000)


def test_the_stand_ins_reproduce_the_published_figures_and_say_size_only(webpki, tmp_path):
    reference = webpki("mldsa44")
    assert chains.stand_in_bytes("mtc-standalone-size", "mldsa44", reference)["keys_and_signatures"] == 8956
    assert chains.stand_in_bytes("mtc-landmark-size", "mldsa44", reference)["keys_and_signatures"] == 4468
    chain = chains.make("mldsa44", tmp_path / "mtc", "mtc-landmark-size")
    assert chain.parts["sent"] == chain.parts["stand_in"]["bytes"] and chain.parts["size_only"]
    for shape in ("mtc-standalone-size", "mtc-landmark-size", "abridged"):
        assert "size-only" in chains.label(shape, None)
    assert "size-only" in chains.label(None, 12000) and "size-only" not in chains.label("webpki", None)
    assert "size-only" not in chains.label("mtc-landmark", None)  # the real one


def _algorithms(cert) -> tuple[str, str]:
    """(its key's algorithm, the algorithm it is signed with) as OpenSSL names them."""
    text = run_openssl(["x509", "-in", str(cert), "-noout", "-text"]).stdout.decode()
    key = next(l.split(":", 1)[1].strip() for l in text.splitlines() if "Public Key Algorithm:" in l)
    signed = next(l.split(":", 1)[1].strip() for l in text.splitlines() if "Signature Algorithm:" in l)
    return key, signed


def test_a_mixed_hierarchy_has_the_algorithm_asked_for_at_each_level(built_stack, tmp_path):
    """An RSA root over an ECDSA intermediate over an ML-DSA-44 leaf: each level's key, each certificate signed by
    the level above, and the chain verifies."""
    chain = chains.make("mldsa44", tmp_path / "mixed", "webpki", root_sig="rsa2048", intermediate_sig="ecdsap256")
    inter = chain.directory / "intermediate1.crt"
    assert _algorithms(chain.directory / "root.crt") == ("rsaEncryption", "sha256WithRSAEncryption")
    assert _algorithms(inter) == ("id-ecPublicKey", "sha256WithRSAEncryption")
    assert _algorithms(chain.leaf_cert) == ("ML-DSA-44", "ecdsa-with-SHA256")
    r = run_openssl(["verify", "-CAfile", str(chain.root_cert), "-untrusted", str(inter), str(chain.leaf_cert)],
                    check=False)
    assert r.returncode == 0, r.stderr
    plain = chains.make("mldsa44", tmp_path / "plain", root_sig="ecdsap256")  # a root → leaf chain's root too
    assert _algorithms(plain.leaf_cert) == ("ML-DSA-44", "ecdsa-with-SHA256")
    assert plain.parts["signatures"] < 100  # one ECDSA signature where an ML-DSA-44 one was 2,420 B


BASE = """
parallel = 1
samples = 5
[axes]
kex = ["X25519MLKEM768"]
sig = ["mldsa44"]
rtt = ["31.1ms"]
"""


def test_the_chain_axes_cross_as_documented_and_keep_old_ids():
    plain = {c.cell_id for c in cellmod.expand(specmod.parse(BASE))}
    cells = cellmod.expand(specmod.parse(BASE + 'chain = ["plain", "webpki"]\nchain_bytes = ["2k", "20k"]\n'))
    got = sorted((c.values()["chain"] or "", c.values()["chain_bytes"] or 0) for c in cells)
    assert got == [("", 2000), ("", 20000), ("webpki", 0)]  # chain_bytes pads the plain chain only
    assert plain <= {c.cell_id for c in cellmod.expand(specmod.parse(BASE + 'chain = ["plain", "webpki"]\n'))}


@pytest.mark.parametrize("extra,field,words", [
    ('chain = ["mtc"]\n', "axes.chain[0]", "mtc-standalone-size"),
    ('chain_bytes = ["100"]\n', "axes.chain_bytes[0]", "outside"),
    ('intermediate_sig = ["ecdsap256"]\n', "axes.intermediate_sig", "WebPKI-shaped"),
    ('chain_bytes = ["5k"]\nroot_sig = ["ecdsap256"]\n', "axes.root_sig", "plain and WebPKI-shaped"),
    ('root_sig = ["nope"]\n', "axes.root_sig[0]", "unknown signature"),
    ('chain = ["webpki"]\nchain_bytes = ["2k"]\n', "axes.chain_bytes", "plain"),
])
def test_bad_chain_axes_name_the_field(extra, field, words):
    with pytest.raises(BadInput) as e:
        cellmod.expand(specmod.parse(BASE + extra))
    assert e.value.field == field and words in e.value.detail, (e.value.field, e.value.detail)


def test_a_stapled_chain_on_a_stack_without_stapling_is_skipped_with_the_reason():
    (cell,) = cellmod.expand(specmod.parse(BASE + 'chain = ["webpki-ocsp"]\n'))
    reason = cellmod.unavailable_reason(cell) or ""
    assert "no ocsp stapling" in reason
    (small,) = cellmod.expand(specmod.parse(BASE + 'chain_bytes = ["1k"]\n'))
    assert "cannot hold a mldsa44 leaf" in (cellmod.unavailable_reason(small) or "")


@pytest.mark.root
@pytest.mark.slow
def test_a_padded_chain_of_n_bytes_puts_n_on_the_wire(built_stack, tmp_path):
    """Two padded chains 6000 bytes apart: the Certificate message and the wire record (pqlink) differ by those
    bytes plus framing only (TLS record and TCP/IP headers of the extra segments)."""
    from pqbench import store
    from pqbench.measure import runner
    spec = specmod.parse(BASE.replace('"31.1ms"', '"5.6ms"') + 'chain_bytes = ["4k", "10k"]\nchain = ["plain"]\n',
                         "pad.toml")
    db = tmp_path / "r.duckdb"
    run_id = runner.run(spec, db, quiet=True, keep_files=False)
    con = store.connect(db, read_only=True)
    rows = con.execute("""SELECT c.chain_bytes, median(s.certificate_bytes), median(s.wire_bytes_s2c), count(*),
                          any_value(c.chain_parts) FROM cells c JOIN samples s USING (run_id, cell_id)
                          WHERE c.run_id = ? AND s.ok GROUP BY 1 ORDER BY 1""", [run_id]).fetchall()
    assert [r[0] for r in rows] == [4000, 10000] and all(r[3] == 5 for r in rows)
    (n1, cert1, wire1, _, parts), (n2, cert2, wire2, _, _) = rows
    assert cert1 - n1 == cert2 - n2 == 13  # handshake header 4, context 1, list 3, entry length 3, extensions 2
    extra_segments = -(-(n2 - n1) // 1448) + 1
    assert n2 - n1 <= wire2 - wire1 <= n2 - n1 + extra_segments * 52 + 2 * 22
    assert '"padding"' in str(parts)
    from pqbench import report
    out = report.build(con, run_id, tmp_path / "report", resamples=100)
    md = (tmp_path / "report" / "summary.md").read_text()
    assert "Certificate chains: bytes by part" in md and "4000 B (size-only)" in md
    assert "Distance to the limit" in md and "staircase" in out["figures"]


def test_handshake_names_a_bad_chain_option():
    from conftest import run_pqbench
    r = run_pqbench("handshake", "--kex", "X25519", "--sig", "ecdsap256", "--chain", "bogus", "-n", "1")
    assert r.returncode == 2 and "--chain:" in r.stderr and "webpki" in r.stderr, r.stderr
    r = run_pqbench("handshake", "--kex", "X25519", "--sig", "ecdsap256", "--chain", "webpki", "--chain-bytes", "3k")
    assert r.returncode == 2 and "--chain-bytes" in r.stderr and "plain" in r.stderr, r.stderr


@pytest.mark.root
def test_handshake_measures_a_webpki_chain_as_a_spec_would():
    """`pqbench handshake --chain` (and `--chain-bytes`, the same way) reach the same axes as a spec's cells: the
    server sends the leaf and the intermediate, not the root."""
    import json

    from conftest import run_pqbench
    r = run_pqbench("handshake", "--kex", "X25519", "--sig", "ecdsap256", "--chain", "webpki", "--rtt", "5ms",
                    "-n", "2", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    sizes = out["chain"]["der_sizes"]
    assert out["summary"]["ok"] == 2 and out["config"]["chain"] == "webpki"
    assert out["chain"]["bytes_sent_by_server"] == sizes["leaf"] + sizes["intermediate1"]  # the root stays home
