"""Loopback TLS 1.3 handshakes with our built OpenSSL for every native group and signature."""

import pytest

from pqbench.algorithms import catalog
from tlsloop import handshake, s_server


def _native(kind, tls_only=True):
    return [a for a in catalog.algorithms(kind) if a.source == "openssl" and (a.tls or not tls_only)]


NATIVE_GROUPS = _native("kem")
NATIVE_TLS_SIGS = _native("sig")


@pytest.mark.parametrize("sig", ["ecdsap256", "mldsa44"])
def test_every_native_group(chains, sig):
    chain = chains(sig)
    expected_sigalg = catalog.find(sig).sigalg
    with s_server(chain, [g.name for g in NATIVE_GROUPS]) as port:
        for group in NATIVE_GROUPS:
            r = handshake(port, chain, group.name)
            assert r["ok"], r["output"]
            assert r["group"] and r["group"].lower() in (n.lower() for n in group.names()), (group.name, r["output"])
            assert r["sigalg"] == expected_sigalg


@pytest.mark.parametrize("sig", NATIVE_TLS_SIGS, ids=lambda a: a.name)
def test_every_native_signature_with_x25519mlkem768(chains, sig):
    chain = chains(sig.name)
    with s_server(chain, ["X25519MLKEM768"]) as port:
        r = handshake(port, chain, "X25519MLKEM768", sigalg=sig.sigalg)
    assert r["ok"], r["output"]
    assert r["group"] == "X25519MLKEM768"
    assert r["sigalg"] == sig.sigalg
