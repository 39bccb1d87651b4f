"""Multi-origin pages through a real testbed (issue 38, item 3): a page whose document on the site's own origin
(server.pqbench.test) names a stylesheet, a script and an image on each of two more origins, each origin its own
name, its own address in the server namespace (Testbed.add_server_addresses) and its own certificate, in nginx
server blocks on our OpenSSL. Each browser maps the names to the addresses without DNS, opens one HTTP/2 connection per origin, each
joined to its own flow in pqlink's record, and waits for two TLS handshakes one after another."""

import json
import time

import pytest

from pqbench.algorithms import certs
from pqbench.endpoints.base import DEFAULT_PAGES, Serving, Site
from pqbench.endpoints.browsers import timing
from pqbench.measure.rig import Rig
from pqbench.testbed import LinkSpec
from pqbench.webpages import content, pages

RTT_MS = 10
PORT = 4443
PAGE = "origins-3"


def test_pages_are_single_or_origins_n():
    single, three = pages.page("single"), pages.page("origins-3")
    assert single.origins == 1 and [r.kind for r in single.resources] == ["document"]
    assert three.origins == 3 and {r.origin for r in three.resources} == {0, 1, 2}
    assert [r.kind for r in three.resources if r.origin == 2] == ["stylesheet", "script", "image"]
    for bad in ("origins-1", "origins-9", "multi", 3):
        with pytest.raises(Exception) as e:
            pages.parse("axes.webpage[0]", bad)
        assert e.value.field == "axes.webpage[0]" and "single, origins-N" in str(e.value)


def test_the_document_names_each_resource_by_its_origin_and_has_its_size():
    page = pages.page(PAGE)
    doc = content.document(page, PORT)
    assert len(doc) == page.document.size
    for r in page.resources[1:]:
        assert f"https://{pages.origin_name(r.origin)}:{PORT}{r.path}".encode() in doc
    assert len(content.body("script", 60_000)) == 60_000


@pytest.fixture(scope="module")
def bed(built_stack, tmp_path_factory):
    import os
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    run_dir = tmp_path_factory.mktemp("pages")
    chain = certs.make_chain("ecdsap256", run_dir / "certs" / "main")
    # the rig makes the site's further origins as its server starts (pqbench.webpages.serve)
    site = Site(PORT, chain, options={"webpage": PAGE, "http": "2"})
    serving = Serving(run_dir / "openssl", [site], ["X25519MLKEM768", "X25519"], DEFAULT_PAGES, 2)
    with Rig.pairs({"openssl": serving}, ["openssl", "chromium", "firefox"], LinkSpec.symmetric(rtt_ms=RTT_MS)) as rig:
        yield {"rig": rig, "chain": chain, "dir": run_dir}


def load(bed, browser, n=2):
    rig = bed["rig"]
    job = rig.job(PORT, "X25519MLKEM768", bed["chain"], mode="page", path="/10k", timeout_ms=20_000,
                  axes={"webpage": PAGE})
    scratch = bed["dir"] / f"{browser}-{time.monotonic_ns()}"
    scratch.mkdir()
    rig.begin_cell(rig.link)
    samples = rig.sample(job, n, 1, scratch, client=browser)
    rig.end_cell(samples, "page", scratch, client=browser)
    flows = [json.loads(line) for line in open(scratch / "flows.jsonl")]
    return samples, flows, job


@pytest.mark.root
@pytest.mark.parametrize("browser", ["chromium", "firefox"])
def test_a_multi_origin_page_opens_one_connection_per_origin_each_joined_to_its_flow(bed, browser):
    samples, flows, job = load(bed, browser)
    names = {job.servername: job.host, **job.hosts}  # the site's own origin, and its further origins
    assert set(job.hosts) == {"origin1.pqbench.test", "origin2.pqbench.test"} and len(set(names.values())) == 3
    page = pages.page(PAGE, PORT)
    assert all(s["ok"] for s in samples), [s.get("error") for s in samples]
    for s in samples:
        b = s["browser"]
        assert b["connections"] == b["handshakes"] == 3, b
        # the document's handshake, then the two other origins' together: each named by the document
        assert b["critical_handshakes"] == 2, b
        doc = next(r for r in b["requests_detail"] if r["document"])
        assert {r["initiator"] for r in b["requests_detail"] if r.get("connection") and not r["document"]} \
            == {doc["url"]}, b["requests_detail"]
        got = [r for r in b["requests_detail"] if r.get("status") == 200]
        assert {r["url"].split("/")[2].split(":")[0] for r in got} == set(names), got
        assert {r["protocol"] for r in got} == {"h2"}
        conns = timing.connection_wire(s, flows)
        # one connection per origin, each to its own address, each its own flow on the wire
        assert sorted(c["remote"].rsplit(":", 1)[0] for c in conns) == sorted(names.values()), conns
        assert all(c["flow"] for c in conns) and len({c["flow"] for c in conns}) == 3, conns
        assert conns == b["connections_wire"]  # the same join, made as the cell ended
        for c in conns:
            origin = [n for n, a in names.items() if c["remote"].startswith(a + ":")][0]
            k = 0 if origin == job.servername else int(origin.split(".")[0].removeprefix("origin"))
            body = sum(r.size for r in page.resources if r.origin == k)
            assert c["bytes_s2c"] > body and c["packets_s2c"] > body / 1500, c
        assert b["load_event_ms"] >= b["last_byte_ms"] - 1 >= 3 * RTT_MS


def test_the_webpage_axis_skips_what_cannot_load_a_multi_origin_page():
    from pqbench.experiment import cells as cellsmod, spec as specmod
    spec = specmod.parse("""
name = "w"
samples = 2
[axes]
kex = ["X25519MLKEM768"]
sig = ["ecdsap256"]
client = ["chromium", "firefox", "openssl"]
page = ["10k"]
webpage = ["single", "origins-3"]
transport = ["tcp", "quic"]
rtt = ["10ms"]
loss = ["0%"]
""", "w.toml")
    why = {(c.client, c.transport, c.webpage): cellsmod.unavailable_reason(c, spec) for c in cellsmod.expand(spec)}
    assert why[("chromium", None, "origins-3")] is None and why[("firefox", None, "origins-3")] is None
    assert why[("openssl", None, "origins-3")] is None  # pqtimer loads a page's origins over TCP (2589967)
    assert "over TCP only" in why[("openssl", "quic", "origins-3")]
    for browser in ("chromium", "firefox"):
        assert "does not tell its HTTP/3 connections apart" in why[(browser, "quic", "origins-3")]
        assert why[(browser, "quic", None)] is None  # a single resource over HTTP/3 loads
    assert why[("openssl", None, None)] is None  # a single resource stays pqtimer's too


@pytest.mark.root
@pytest.mark.slow
def test_a_run_with_the_webpage_axis_serves_each_origin_at_its_own_address(built_stack, tmp_path):
    from pqbench import store
    from pqbench.experiment import spec as specmod
    from pqbench.measure import runner
    spec = specmod.parse("""
name = "origins"
seed = 38
parallel = 1
lanes = 1
workers = 2
timeout = "20s"
samples = 2
[axes]
kex = ["X25519MLKEM768"]
sig = ["ecdsap256"]
client = ["chromium", "firefox"]
page = ["10k"]
webpage = ["origins-3"]
http = ["2"]
rtt = ["10ms"]
loss = ["0%"]
""", "origins.toml")
    db = tmp_path / "r.duckdb"
    run_id = runner.run(spec, db, quiet=True, keep_files=False)
    con = store.connect(db, read_only=True)
    rows = con.execute("SELECT c.client, s.ok, s.raw FROM cells c JOIN samples s USING (run_id, cell_id) "
                       "WHERE c.run_id = ? ORDER BY ALL", [run_id]).fetchall()
    assert sorted(r[0] for r in rows) == ["chromium", "chromium", "firefox", "firefox"]
    for client, ok, raw in rows:
        s = json.loads(raw)
        assert ok, s.get("error")
        b = s["browser"]
        assert b["connections"] == 3 and b["critical_handshakes"] == 2, b
        opened = [r for r in b["requests_detail"] if r.get("connection")]
        hosts = {r["url"].split("/")[2].split(":")[0] for r in opened}
        assert hosts == {"server.pqbench.test", "origin1.pqbench.test", "origin2.pqbench.test"}, hosts
        assert len({r["remote"].rsplit(":", 1)[0] for r in opened}) == 3  # each origin its own address
        assert {r["protocol"] for r in opened} == {"h2"}
        # each connection joined to its own flow when the cell ended: bytes and packets per connection
        wired = b["connections_wire"]
        assert len(wired) == 3 and len({c["flow"] for c in wired if c["flow"]}) == 3, wired
        assert all(c["bytes_s2c"] > 30_000 and c["packets_s2c"] > 20 for c in wired), wired
    from pqbench import report
    report.build(con, run_id, tmp_path / "report", resamples=100)
    md = (tmp_path / "report" / "summary.md").read_text()
    table = md.split("## Browsers: connections and TLS handshakes on the critical path")[1].split("\n## ")[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()
            if line.startswith(("| chromium", "| firefox"))]
    assert len(rows) == 2 and all(r[1] == "origins-3" and r[7:10] == ["3", "3", "2"] for r in rows), table
    assert all(r[12] != "–" and r[13] != "–" for r in rows), table  # bytes and packets per connection


class _Addresses:
    """A testbed's add_server_addresses, counted (the rest of a testbed is not needed to prepare a page)."""
    def __init__(self):
        self.given = []

    def add_server_addresses(self, count):
        new = [f"10.250.1.{len(self.given) + i + 1}" for i in range(count)]
        self.given += new
        return new


def test_a_sites_further_origins_get_addresses_leaves_of_its_ca_and_server_blocks(tmp_path):
    from pqbench.algorithms import chains
    from pqbench.endpoints.openssl.nginx_config import NginxConfig
    from pqbench.webpages import serve
    chain = chains.make("ecdsap256", tmp_path / "c", sized_as="mldsa44")  # a size-only padded chain's CA too
    site = Site(4434, chain, options={"webpage": "origins-3", "http": "2"})
    serving = Serving(tmp_path / "srv", [Site(4433, chain), site], ["X25519"], {}, 1)
    tb = _Addresses()
    hosts = serve.prepare(tb, serving)
    assert hosts == {4434: {"origin1.pqbench.test": "10.250.1.1", "origin2.pqbench.test": "10.250.1.2"}}
    for addr, leaf in site.options["origins"]:
        assert leaf.server_name in hosts[4434] and hosts[4434][leaf.server_name] == addr
        out = certs._openssl(["verify", "-CAfile", str(chain.root_cert), str(leaf.leaf_cert)], "verify")
        assert b"OK" in out
        # every origin sends what the site's size-only chain stands for (an ML-DSA-44 root → leaf chain's bytes)
        assert leaf.sent_bytes == chain.sent_bytes == chain.parts["stand_in"]["bytes"] and leaf.parts["size_only"]
    doc = (serving.run_dir / "www" / "pages" / "origins-3-4434.html").read_bytes()
    assert b"https://server.pqbench.test:4434/" not in doc and b"https://origin2.pqbench.test:4434/res/" in doc
    conf = NginxConfig(serving.run_dir, "10.250.0.2", serving.sites, ["X25519"]).render()
    assert "listen 10.250.1.1:4434 ssl http2;" in conf and "listen 10.250.1.2:4434 ssl http2;" in conf
    assert "text/css css" in conf
    # a server started again (after a crash) reuses what was made: no more addresses
    assert serve.prepare(tb, serving) == hosts and len(tb.given) == 2
