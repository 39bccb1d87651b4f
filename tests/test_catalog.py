"""The catalog is consistent, and its sizes are the ones the implementations really produce."""

import collections

import pytest

from pqbench.algorithms import catalog, liboqs, microbench, openssl_build
from pqbench.errors import BadInput

ALL = catalog.algorithms()


def test_catalog_is_big_enough_and_has_the_required_families():
    assert len(ALL) >= 60
    names = {a.name for a in ALL}
    required = {"X25519", "X448", "secp256r1", "secp384r1", "secp521r1", "ffdhe2048", "MLKEM512", "MLKEM768",
                "MLKEM1024", "X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024", "frodo640aes",
                "frodo640shake", "frodo976aes", "frodo976shake", "frodo1344aes", "frodo1344shake", "hqc128",
                "hqc192", "hqc256", "bikel1", "bikel3", "bikel5", "mceliece348864", "mceliece460896",
                "sntrup761", "p256_frodo640aes", "x25519_hqc128", "rsa2048", "rsa3072", "rsa4096", "ecdsap256",
                "ecdsap384", "ecdsap521", "ed25519", "ed448", "mldsa44", "mldsa65", "mldsa87", "falcon512",
                "falcon1024", "sphincssha2128fsimple", "sphincssha2128ssimple", "sphincssha2192fsimple",
                "sphincssha2256fsimple", "sphincsshake128fsimple", "sphincsshake128ssimple",
                "sphincsshake192fsimple", "sphincsshake256fsimple", "mayo1", "mayo2", "mayo3", "mayo5"}
    assert required <= names, required - names
    assert sum(a.name.startswith("CROSS") for a in ALL) >= 2
    assert any(a.family == "hash-based" and a.source == "openssl" for a in ALL)  # SLH-DSA


def test_names_and_aliases_are_unique():
    seen = collections.Counter(n.lower() for a in ALL for n in a.names())
    assert [n for n, c in seen.items() if c > 1] == []


def test_code_points_are_unique_per_kind():
    groups = collections.Counter(a.codepoint for a in ALL if a.kind == "kem" and a.codepoint is not None)
    assert [hex(c) for c, n in groups.items() if n > 1] == []
    # Signature schemes may be shared by key sizes (rsa_pss_rsae_sha256), but one code point is one scheme.
    schemes = collections.defaultdict(set)
    for a in ALL:
        if a.kind == "sig" and a.codepoint is not None:
            schemes[a.codepoint].add(a.sigalg or a.name)
    assert {hex(c): s for c, s in schemes.items() if len(s) > 1} == {}


def test_every_tls_algorithm_has_a_code_point():
    assert [a.name for a in ALL if a.tls and a.codepoint is None] == []


def test_hybrid_sizes_are_composed_from_their_components():
    by_name = {a.name: a for a in ALL}
    p256_frodo = by_name["p256_frodo640aes"]
    assert p256_frodo.components == ("secp256r1", "frodo640aes")
    assert p256_frodo.pk == 4 + 65 + 9616 and p256_frodo.ct == 4 + 65 + 9720 and p256_frodo.ss == 32 + 16
    x = by_name["X25519MLKEM768"]
    assert (x.pk, x.ct, x.ss) == (1216, 1120, 64)  # concatenation, as OpenSSL puts it on the wire
    assert all(by_name[c] for a in ALL for c in a.components)


def test_find_is_case_insensitive_and_knows_aliases():
    assert catalog.find("P-256").name == "secp256r1"
    assert catalog.find("x25519mlkem768").name == "X25519MLKEM768"
    assert catalog.find("ML-DSA-44", "sig").name == "mldsa44"


def test_unknown_name_suggests_the_closest():
    with pytest.raises(BadInput) as e:
        catalog.find("mldsa45", "sig", field="--sig")
    assert e.value.field == "--sig" and "mldsa44" in str(e.value)


@pytest.mark.parametrize("protocol, sent, want", [
    ("tls", {"group": "x25519", "sigalg": "ECDSA_SECP256R1_SHA256"}, {"group": "X25519", "sigalg": "ecdsa_secp256r1_sha256"}),
    ("tls", {"group": "prime256v1", "sigalg": "mldsa44"}, {"group": "secp256r1", "sigalg": "mldsa44"}),
    ("tls", {"group": "X25519MLKEM768", "sigalg": None}, {"group": "X25519MLKEM768", "sigalg": None}),
    ("tls", {"group": "GREASE", "sigalg": "rsa_pkcs1_md5"}, {"group": "GREASE", "sigalg": "rsa_pkcs1_md5"}),
    ("ssh", {"group": "Curve25519-SHA256", "sigalg": "ssh-ed25519"}, {"group": "curve25519-sha256", "sigalg": "ssh-ed25519"}),
])
def test_a_reported_group_or_signature_takes_the_catalog_s_spelling_and_keeps_the_stack_s_beside_it(protocol, sent,
                                                                                                   want):
    record = catalog.respelled(dict(sent), protocol)
    assert {k: record[k] for k in want} == want
    for field in want:  # the stack's spelling is kept only where it differs, and then exactly
        assert record.get(f"{field}_as_sent") == (sent[field] if sent[field] != want[field] else None)


def test_availability_is_computed_from_the_build(built_stack, monkeypatch):
    x25519 = catalog.find("X25519")
    assert catalog.availability(x25519).tls
    monkeypatch.setattr(openssl_build, "tls_groups", lambda: ())
    monkeypatch.setattr(openssl_build, "kem_algorithms", lambda: frozenset())
    assert not catalog.availability(x25519).available


def _available():
    try:
        return [a for a in ALL if catalog.availability(a).available]
    except Exception:  # not built: the built_stack fixture reports it
        return []


@pytest.mark.parametrize("alg", _available(), ids=lambda a: a.name)
def test_available_sizes_equal_what_openssl_produces(built_stack, alg):
    result = microbench.measure(alg, seconds=0.02)
    assert result["sizes_match_catalog"], (result["sizes"], result["catalog_sizes"])


LIBOQS_ENTRIES = [a for a in ALL if a.liboqs and not a.hybrid]


@pytest.mark.parametrize("alg", LIBOQS_ENTRIES, ids=lambda a: a.name)
def test_liboqs_sizes_equal_the_catalog(built_stack, alg):
    assert liboqs.available(), "liboqs is not built (run `make`)"
    info = liboqs.describe(alg.liboqs)
    assert info is not None, f"liboqs does not enable {alg.liboqs}"
    if alg.kind == "kem":
        assert (info.pk, info.ct, info.ss) == (alg.pk, alg.ct, alg.ss)
    else:
        assert (info.pk, info.sig) == (alg.pk, alg.sig)


def test_liboqs_has_hqc_and_every_family(built_stack):
    kems = liboqs.kem_names()
    assert {"HQC-128", "BIKE-L1", "FrodoKEM-640-AES", "Classic-McEliece-348864", "sntrup761"} <= set(kems)
    sigs = liboqs.sig_names()
    assert {"Falcon-512", "SPHINCS+-SHA2-128f-simple", "MAYO-1", "cross-rsdp-128-balanced"} <= set(sigs)


def test_ssh_names_are_unique_and_link_to_the_same_algorithm():
    seen = collections.Counter(n.lower() for a in ALL for n in a.names() + a.ssh_names())
    assert [n for n, c in seen.items() if c > 1] == []
    assert catalog.find("mlkem768x25519-sha256", "kem").name == "X25519MLKEM768"
    assert catalog.find("ssh-mldsa-65", "sig", protocol="ssh").name == "mldsa65"
    hybrid = catalog.find("sntrup761x25519-sha512", "kem")
    assert (hybrid.pk, hybrid.ct) == (1158 + 32, 1039 + 32)  # OpenSSH concatenates the shares
    # Each protocol's names for one algorithm, both ways.
    assert catalog.name_in("X25519", "kem", "ssh") == "curve25519-sha256"
    assert catalog.name_in("curve25519-sha256", "kem", "tls") == "X25519"
    assert catalog.name_in("rsa-sha2-512-4096", "sig", "ssh") == "rsa-sha2-512-4096"  # as given, when it is one
    assert catalog.name_in("rsa4096", "sig", "ssh") == "rsa-sha2-256-4096"
    # A signature SSH has no name for is a size-only host key, by name.
    assert catalog.name_in("falcon512", "sig", "ssh") == "sizeonly-falcon512"
    assert catalog.is_size_only("sizeonly-falcon512") and not catalog.is_size_only("ssh-ed25519")


def test_a_name_of_the_other_protocol_is_bad_input_with_this_protocol_s_closest_names():
    with pytest.raises(BadInput) as e:
        catalog.find("curve25519-sha256", "kem", field="--kex", protocol="tls")
    assert e.value.field == "--kex"
    with pytest.raises(BadInput) as e:
        catalog.find("mlkem768x25519", "kem", field="--kex", protocol="ssh")
    assert "mlkem768x25519-sha256" in str(e.value) and "MLKEM768" not in str(e.value)
    with pytest.raises(BadInput) as e:
        catalog.name_in("frodo640aes", "kem", "ssh")
    assert "no SSH name" in str(e.value)
