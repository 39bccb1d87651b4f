"""Client offers, server groups and certificate compression as written by users: parsed, checked, and
turned into what OpenSSL and nginx take (no root needed)."""

import pytest

from conftest import run_pqbench
from pqbench import endpoints
from pqbench.endpoints.base import Site
from pqbench.endpoints.offer import (offer_from_parts, parse_cert_compression, parse_offer,
                                     parse_server_groups)
from pqbench.endpoints.openssl.nginx import NginxConfig
from pqbench.errors import BadInput


@pytest.mark.parametrize("text, groups, shares, openssl, canonical", [
    ("X25519MLKEM768", ["X25519MLKEM768"], ["X25519MLKEM768"], "X25519MLKEM768", "X25519MLKEM768"),
    ("x25519mlkem768+x25519", ["X25519MLKEM768", "X25519"], ["X25519MLKEM768", "X25519"],
     "*X25519MLKEM768:*X25519", "X25519MLKEM768+X25519"),
    ("X25519 / X25519MLKEM768", ["X25519", "X25519MLKEM768"], ["X25519"], "*X25519:X25519MLKEM768",
     "X25519 / X25519MLKEM768"),
    # the part after / names the share too: it is the whole supported_groups list, in its order
    ("X25519 / X25519MLKEM768:X25519", ["X25519MLKEM768", "X25519"], ["X25519"], "X25519MLKEM768:*X25519",
     "X25519 / X25519MLKEM768:X25519"),
])
def test_offer_notation_maps_to_openssl_groups_list(text, groups, shares, openssl, canonical):
    offer = parse_offer(text)
    assert list(offer.groups) == groups and list(offer.shares) == shares
    assert offer.openssl() == openssl
    assert offer.notation() == canonical
    assert parse_offer(offer.notation()) == offer  # the canonical spelling reads back


@pytest.mark.parametrize("text, words", [
    ("X25519MLKEM76+X25519", ["unknown key exchange 'X25519MLKEM76'", "closest:", "X25519MLKEM768"]),
    ("X25519+X25519MLKEM768 / X25519MLKEM768", ["a key share for X25519", "does not name"]),
    ("X25519+x25519", ["X25519 appears twice"]),
    ("X25519 / X25519MLKEM768 / secp256r1", ["at most one ' / '"]),
    ("", ["empty offer"]),
    ("X25519+", ["empty group name"]),
    ("X25519+secp256r1+secp384r1+secp521r1+X25519MLKEM768", ["at most 4"]),
])
def test_bad_offers_say_what_is_wrong(text, words):
    with pytest.raises(BadInput) as e:
        parse_offer(text, "--offer")
    assert e.value.field == "--offer"
    for w in words:
        assert w in str(e.value), str(e.value)


def test_offer_from_parts_refuses_a_share_for_a_group_not_listed():
    assert offer_from_parts(["X25519MLKEM768", "X25519"], ["X25519"]).openssl() == "X25519MLKEM768:*X25519"
    with pytest.raises(BadInput, match="a key share for X25519MLKEM768, which offer.groups"):
        offer_from_parts(["X25519"], ["X25519MLKEM768"])


def test_server_groups_keep_openssl_tuples():
    g = parse_server_groups("x25519mlkem768/X25519:secp256r1")
    assert g.openssl() == "X25519MLKEM768/X25519:secp256r1"
    assert g.groups == ["X25519MLKEM768", "X25519", "secp256r1"]
    for bad, word in (("X25519MLKEM768//X25519", "empty tuple"), ("X25519/X25519", "twice"),
                      ("X2551", "closest")):
        with pytest.raises(BadInput, match=word):
            parse_server_groups(bad)


def test_cert_compression_values():
    assert parse_cert_compression("none") == "none"
    assert parse_cert_compression("ALL") == "all"
    assert parse_cert_compression("zstd, zlib") == "zstd,zlib"
    for bad in ("gzip", "zlib,zlib", ""):
        with pytest.raises(BadInput):
            parse_cert_compression(bad, "--cert-compression")


def test_nginx_sites_carry_their_groups_compression_and_early_data(tmp_path):
    class Chain:  # what render reads of a chain
        chain_file, leaf_key = "chain.pem", "leaf.key"
    sites = [Site(4433, Chain()), Site(4434, Chain(), server_groups="X25519MLKEM768/X25519"),
             Site(4435, Chain(), compress_certs=True), Site(4436, Chain(), early_data=True)]
    conf = NginxConfig(tmp_path, "10.0.0.2", sites, ["X25519MLKEM768", "X25519"])
    blocks = conf.render().split("server {")[1:]
    assert "ssl_ecdh_curve X25519MLKEM768/X25519;" in blocks[1] and "ssl_prefer_server_ciphers on;" in blocks[1]
    assert "ssl_ecdh_curve" not in blocks[0]
    # the preload compresses every chain: the sites that should not send them turn it off
    assert "TxCertificateCompression" not in blocks[2]
    assert all("ssl_conf_command Options -TxCertificateCompression;" in b for b in (blocks[0], blocks[1], blocks[3]))
    assert "ssl_early_data on;" in blocks[3] and "-AntiReplay" in blocks[3]
    assert conf.compresses
    # a config without any of it is as it always was
    plain = NginxConfig(tmp_path, "10.0.0.2", [Site(4433, Chain())], ["X25519"]).render()
    assert "ssl_conf_command" not in plain and "ssl_early_data on" not in plain and not \
        NginxConfig(tmp_path, "10.0.0.2", [Site(4433, Chain())], ["X25519"]).compresses


def test_stacks_without_offers_skip_with_the_reason():
    assert endpoints.unsupported("openssl", "openssl", "X25519", "ecdsap256", "handshake",
                                 {"offer": "X25519MLKEM768+X25519", "server_groups": "X25519MLKEM768/X25519",
                                  "compress": "zlib"}) is None
    caps = endpoints.get("s2n").capabilities()
    assert "offer" not in caps.features and "its offer is what it is" in caps.feature_notes["offer"]
    assert "early" in endpoints.get("openssl").capabilities().modes


@pytest.mark.parametrize("args, words", [
    (["--offer", "X25519 / X25519MLKEM76"], ["--offer", "unknown key exchange", "closest:", "X25519MLKEM768"]),
    (["--offer", "X25519+X25519MLKEM768 / X25519MLKEM768"], ["--offer", "a key share for X25519"]),
    (["--kex", "X25519", "--server-groups", "X25519MLKEM768//X25519"], ["--server-groups", "empty tuple"]),
    (["--kex", "X25519", "--cert-compression", "gzip"], ["--cert-compression", "'gzip'"]),
    (["--kex", "X25519", "--early-data", "--requests", "2"], ["--early-data"]),
    (["--sig", "ecdsap256"], ["--kex", "unless --offer"]),
])
def test_cli_bad_offer_is_exit_2_naming_the_option(args, words):
    full = ["handshake", *args] if "--sig" in args else ["handshake", "--sig", "ecdsap256", *args]
    r = run_pqbench(*full, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr)
    for w in words:
        assert w in r.stderr, r.stderr
