"""Mutual TLS (the client_sig axis, pqbench.algorithms.chain_axes): the client sends a certificate of the asked
algorithm from a client CA of its own, nginx asks for it and verifies it; on the wire the client's bytes grow by
its certificate and its CertificateVerify signature; a stack that cannot is a skipped cell naming what it lacks."""

import json

import pytest

from conftest import run_pqbench

from pqbench.algorithms import catalog, chains
from pqbench.algorithms.openssl_build import run_openssl


def test_a_client_certificate_is_made_for_client_auth_by_its_own_ca(built_stack, tmp_path):
    chain = chains.make("ecdsap256", tmp_path, client_sig="mldsa44")
    text = run_openssl(["x509", "-in", str(chain.client_cert), "-noout", "-text"]).stdout.decode()
    assert "TLS Web Client Authentication" in text and "ML-DSA-44" in text
    assert run_openssl(["verify", "-CAfile", str(chain.client_ca), "-purpose", "sslclient",
                        str(chain.client_cert)], check=False).returncode == 0
    assert run_openssl(["verify", "-CAfile", str(chain.root_cert), str(chain.client_cert)],  # not the server's CA
                       check=False).returncode != 0
    assert chain.parts["client"]["sent"] == len(chains.pem_ders(chain.client_cert.read_text())[0])


def _handshake(client, *extra):
    r = run_pqbench("handshake", "--client", client, "--kex", "X25519", "--sig", "ecdsap256", "--rtt", "5ms", "-n", "2",
                    "--json", *extra)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["summary"]["ok"] == 2
    return out


@pytest.mark.root
@pytest.mark.parametrize("client,client_sig", [("openssl", "mldsa44"), ("rustls", "mldsa44"), ("openssl", "ecdsap256")])
def test_the_client_sends_its_certificate_and_the_server_verifies_it(built_stack, client, client_sig):
    """Its certificate and its CertificateVerify, in TLS records, uncompressed: an OpenSSL client would otherwise
    compress its certificate at every handshake when the server says it can take one compressed (an ECDSA one
    shrinks; an ML-DSA-44 one does not, and cost 10 ms of brotli per handshake)."""
    plain = _handshake(client)
    mutual = _handshake(client, "--client-sig", client_sig)
    grew = mutual["bytes"]["client_to_server"] - plain["bytes"]["client_to_server"]
    assert grew >= mutual["chain"]["bytes_sent_by_client"] + catalog.find(client_sig).sig, grew


def test_a_client_that_cannot_send_a_certificate_is_a_skipped_cell(built_stack):
    r = run_pqbench("handshake", "--client", "gotls", "--kex", "X25519", "--sig", "ecdsap256", "--client-sig",
                    "mldsa44", "-n", "1")
    assert r.returncode == 3 and "mtls client" in r.stderr, r.stderr
