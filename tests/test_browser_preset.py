"""The browsers preset and the axes it sweeps (no root needed): experiments/browsers.toml expands to both
browsers and pqtimer × PQ on/off × a single-resource and a multi-origin page × HTTP/2 and HTTP/3 × three chains ×
3 RTTs × 2 loss rates, and what cannot run is a skipped cell with its reason (a multi-origin page over QUIC, pqtimer over
HTTP/2, a server that accepts none of what the client offers); the http and sized_as axes refuse bad values naming the field; nginx offers h2 on an HTTP/2
site only; a load's handshakes on its critical path are counted from its connections' own times."""

from collections import Counter
from pathlib import Path

import pytest

from pqbench.algorithms import sized_chain_axis
from pqbench.endpoints import http_version
from pqbench.endpoints.base import Site
from pqbench.endpoints.browsers.timing import critical_handshakes
from pqbench.endpoints.openssl.nginx_config import NginxConfig
from pqbench.errors import BadInput
from pqbench.experiment import cells as cellsmod, spec as specmod

PRESET = Path(__file__).resolve().parents[1] / "experiments" / "browsers.toml"


def _expanded():
    spec = specmod.read(PRESET)
    return spec, cellsmod.expand(spec)


def test_the_preset_crosses_browsers_pq_protocols_chains_rtts_and_losses():
    spec, cells = _expanded()
    runs = [c for c in cells if cellsmod.unavailable_reason(c, spec) is None]
    by = Counter((c.client, c.transport or "tcp", c.http, c.webpage) for c in runs)
    assert by == {("chromium", "tcp", "2", None): 36, ("chromium", "tcp", "2", "origins-3"): 36,
                  ("chromium", "quic", None, None): 36, ("firefox", "tcp", "2", None): 36,
                  ("firefox", "tcp", "2", "origins-3"): 36, ("firefox", "quic", None, None): 36,
                  ("openssl", "quic", None, None): 36}, by
    for client in ("chromium", "firefox"):
        mine = [c for c in runs if c.client == client]
        assert {c.kex for c in mine} == {"X25519MLKEM768", "X25519"}
        assert {c.sized_as for c in mine} == {None, "mldsa44", "mldsa65"}
        assert {c.scenario.rtt_ms for c in mine} == {5.6, 31.1, 78.6}
        assert {round(c.link_spec(0).client_to_server.loss.mean, 3) for c in mine} == {0.0, 0.01}
        # post-quantum off is the server's group list: every cell's server accepts its key exchange alone
        assert all(c.server_groups == c.kex for c in mine)


def test_what_a_client_cannot_do_is_a_skipped_cell_with_its_reason():
    spec, cells = _expanded()
    why = Counter()
    for c in cells:
        reason = cellsmod.unavailable_reason(c, spec)
        if reason and "accepts only" not in reason:
            why[(c.client, reason)] += 1
    quic_page = ("{} client: a multi-origin page over QUIC: the browser's own record does not tell its HTTP/3 "
                 "connections apart (no per-connection count or wire join yet)")
    assert why == {("openssl", "openssl client: no h2 alpn (pqtimer speaks HTTP/1.1 over TCP (no ALPN))"): 72,
                   ("openssl", "openssl client: pqtimer loads a multi-origin page over TCP only (HTTP/1.1, one "
                               "connection per origin)"): 36,
                   ("chromium", quic_page.format("chromium")): 36, ("firefox", quic_page.format("firefox")): 36}, why
    mismatched = [c for c in cells if c.server_groups != c.kex]
    assert mismatched and all("none of the groups the client offers" in cellsmod.unavailable_reason(c, spec)
                              for c in mismatched)


@pytest.mark.parametrize("value, word", [("3", "transport"), ("h3", "transport"), ("2.5", "allowed: 1.1, 2")])
def test_the_http_axis_refuses_what_is_not_http_over_tcp(value, word):
    with pytest.raises(BadInput) as e:
        http_version.parse("axes.http[0]", value)
    assert e.value.field == "axes.http[0]" and word in str(e.value)


def test_the_http_axis_reads_versions():
    assert [http_version.parse("f", v) for v in ("1.1", "HTTP/2", "h2", 2)] == [None, "2", "2", "2"]


@pytest.mark.parametrize("value, word", [("mldsa4", "closest"), (44, "not a signature name")])
def test_sized_as_refuses_what_is_not_a_signature(value, word):
    with pytest.raises(BadInput) as e:
        sized_chain_axis.parse("axes.sized_as[1]", value)
    assert e.value.field == "axes.sized_as[1]" and word in str(e.value)


def test_sized_as_is_labelled_size_only_and_cannot_pad_down():
    assert sized_chain_axis.parse("f", "ML-DSA-65") == "mldsa65" and sized_chain_axis.parse("f", "plain") is None
    assert sized_chain_axis.label("mldsa44") == "chain sized as mldsa44 (size-only)"
    assert sized_chain_axis._fits("ecdsap256", None, "server", {"sig": "mldsa44"})  # a reason: nothing to pad
    assert sized_chain_axis._fits("mldsa44", None, "server", {"sig": "ecdsap256"}) is None


def test_nginx_offers_h2_on_an_http2_site_only(tmp_path):
    from pqbench.algorithms.certs import Chain
    chain = Chain(tmp_path, "ecdsap256", "ecdsap256", 0, "server.pqbench.test", tmp_path / "r", tmp_path / "c",
                  tmp_path / "l", tmp_path / "i", tmp_path / "k", {})
    conf = NginxConfig(tmp_path, "10.0.0.2", [Site(4433, chain), Site(4434, chain, options={"http": "2"})], ["X25519"])
    text = conf.render()
    assert "listen 10.0.0.2:4433 ssl reuseport;" in text and "listen 10.0.0.2:4434 ssl http2 reuseport;" in text


def _req(url, start_ms, done_ms, last_ms, initiator=None):
    return {"url": url, "connection_id": url, "initiator": initiator,
            "connection": {"start_mono_ns": int(start_ms * 1e6), "t_ns": {"handshake_done": int(done_ms * 1e6),
                                                                          "last_byte": int(last_ms * 1e6)}}}


def test_handshakes_on_the_critical_path_follow_the_connections_times_where_no_initiator_is_known():
    doc = _req("d", 0, 60, 100)
    assert critical_handshakes([doc]) == 1
    # two origins' connections opened together once the document named them: one more handshake, not two
    assert critical_handshakes([doc, _req("a", 101, 60, 160), _req("b", 102, 60, 170)]) == 2
    # ... but one opened after the other's handshake ended looks as if it waited for it
    assert critical_handshakes([doc, _req("a", 101, 60, 160), _req("b", 170, 60, 240)]) == 3
    # a connection opened while the document's handshake was still running waits for nothing of it
    assert critical_handshakes([doc, _req("a", 10, 60, 200)]) == 1
    assert critical_handshakes([]) == 0


def test_handshakes_on_the_critical_path_follow_the_initiators_where_the_browser_tells_them():
    doc = _req("d", 0, 60, 100)
    # a busy browser started the second origin's connection after the first's handshake: both were named by the
    # document, so the load waited for two handshakes one after another, not three
    assert critical_handshakes([doc, _req("a", 101, 60, 160, "d"), _req("b", 170, 60, 240, "d")]) == 2
    # a resource named by a stylesheet that came over the first origin's connection: three
    css = {"url": "a.css", "connection_id": "a", "initiator": "d"}
    assert critical_handshakes([doc, _req("a", 101, 60, 160, "d"), css, _req("b", 170, 60, 240, "a.css")]) == 3
    # an initiator whose carrier is unknown: the connections' times decide
    assert critical_handshakes([doc, _req("a", 101, 60, 160, "d"), _req("b", 170, 60, 240, "elsewhere")]) == 3
