"""pqtimer's page mode over several origins (issue 38, item 3: the same page specs as the browsers load): the
document from the site's own origin on one connection, then one connection per further origin opened together,
each its own address in the server namespace, its resources fetched on it (HTTP/1.1, pipelined), each connection
joined to its own flow in pqlink's record. A single page stays pqtimer's page mode as before."""

import json
import subprocess
import time

import pytest

import pqbench.experiment.axes  # noqa: F401  (the registry: the webpage axis's client option)
from pqbench import endpoints
from pqbench.algorithms import certs
from pqbench.endpoints.base import DEFAULT_PAGES, ClientJob, Serving, Site
from pqbench.endpoints.openssl import pqtimer
from pqbench.measure import page_wire
from pqbench.measure.rig import Rig
from pqbench.testbed import LinkSpec
from pqbench.webpages import pages

# the module's testbed is set up once: its tests on one worker of a parallel suite
pytestmark = pytest.mark.xdist_group("test_pqtimer_pages.py")
RTT_MS = 10
PORT = 4453
PAGE = "origins-3"


def _job(**kw) -> ClientJob:
    base = dict(host="10.9.0.2", port=PORT, groups=["X25519"], cafile=None, servername="server.pqbench.test",
                mode="page", path="/10k", axes={"webpage": PAGE},
                hosts={"origin1.pqbench.test": "10.9.1.1", "origin2.pqbench.test": "10.9.1.2"})
    return ClientJob(**{**base, **kw})


def test_a_page_job_names_the_document_and_each_resource_on_its_origin(built_stack):
    argv = pqtimer.Pqtimer().argv(_job(), 1, 0, None)
    page = pages.page(PAGE, PORT)
    assert argv[len(argv) - 1 - argv[::-1].index("--path") + 1] == page.document.path  # the last --path wins
    got = [argv[i + 1] for i, a in enumerate(argv) if a == "--resource"]
    assert got == [f"10.9.1.{r.origin},origin{r.origin}.pqbench.test,{r.path}" for r in page.resources[1:]]
    assert "--webpage" in argv  # a label of the sample
    assert pqtimer.page_options(_job(axes={})) == [] and pqtimer.page_options(_job(mode="handshake")) == []


def test_pqtimer_refuses_resources_outside_page_mode_and_over_quic(built_stack):
    b = str(pqtimer.binary())
    base = [b, "--host", "127.0.0.1", "--port", "9", "--resource", "127.0.0.2,origin1.pqbench.test,/a.css"]
    bad = subprocess.run(base + ["--mode", "handshake"], capture_output=True, text=True, env=pqtimer.Pqtimer().env())
    assert bad.returncode == 2 and "--resource" in bad.stderr and "--mode page" in bad.stderr
    quic = subprocess.run(base + ["--mode", "page", "--transport", "quic"], capture_output=True, text=True,
                          env=pqtimer.Pqtimer().env())
    assert quic.returncode == 3 and "over TCP only" in quic.stderr
    shape = subprocess.run([b, "--host", "127.0.0.1", "--port", "9", "--resource", "origin1,/a"], capture_output=True,
                           text=True, env=pqtimer.Pqtimer().env())
    assert shape.returncode == 2 and "ADDR,NAME,PATH" in shape.stderr


def test_the_openssl_client_loads_multi_origin_pages_over_tcp_only():
    from pqbench.experiment import cells as cellsmod, spec as specmod
    spec = specmod.parse("""
name = "w"
samples = 2
[axes]
kex = ["X25519"]
sig = ["ecdsap256"]
client = ["openssl"]
page = ["10k"]
webpage = ["single", "origins-3"]
transport = ["tcp", "quic"]
rtt = ["10ms"]
loss = ["0%"]
""", "w.toml")
    why = {(c.transport, c.webpage): cellsmod.unavailable_reason(c, spec) for c in cellsmod.expand(spec)}
    assert why[(None, "origins-3")] is None and why[(None, None)] is None
    assert "over TCP only" in why[("quic", "origins-3")]
    assert "pages" in endpoints.get("openssl").capabilities().features


@pytest.fixture(scope="module")
def bed(built_stack, tmp_path_factory):
    import os
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    run_dir = tmp_path_factory.mktemp("pqtimer-pages")
    chain = certs.make_chain("ecdsap256", run_dir / "certs" / "main")
    # the rig makes the site's further origins as its server starts (pqbench.webpages.serve); HTTP/1.1
    sites = [Site(PORT, chain, options={"webpage": PAGE}), Site(PORT + 1, chain)]
    serving = Serving(run_dir / "openssl", sites, ["X25519MLKEM768", "X25519"], DEFAULT_PAGES, 2)
    with Rig(endpoints.get("openssl"), serving, LinkSpec.symmetric(rtt_ms=RTT_MS)) as rig:
        yield {"rig": rig, "chain": chain, "dir": run_dir}


def load(bed, n=3, port=PORT, **kw):
    rig = bed["rig"]
    job = rig.job(port, "X25519MLKEM768", bed["chain"], mode="page", path="/1k", timeout_ms=10_000, **kw)
    scratch = bed["dir"] / f"pqtimer-{time.monotonic_ns()}"
    scratch.mkdir()
    rig.begin_cell(rig.link)
    samples = rig.sample(job, n, 1, scratch)
    counters = rig.end_cell(samples, "page", scratch)
    flows = [json.loads(line) for line in open(scratch / "flows.jsonl")]
    return samples, flows, job, counters


@pytest.mark.root
def test_an_origins_3_page_opens_a_connection_per_origin_and_waits_for_two_handshakes(bed):
    samples, flows, job, counters = load(bed, axes={"webpage": PAGE})
    names = {job.servername: job.host, **job.hosts}
    assert set(job.hosts) == {"origin1.pqbench.test", "origin2.pqbench.test"} and len(set(names.values())) == 3
    page = pages.page(PAGE, PORT)
    assert all(s["ok"] for s in samples), [s.get("error") for s in samples]
    for s in samples:
        b = s["browser"]
        assert s["webpage"] == PAGE and b["client"] == "pqtimer"
        assert b["connections"] == b["handshakes"] == 3 and b["requests"] == len(page.resources), b
        # the document's handshake, then the two other origins' together
        assert b["critical_handshakes"] == 2, b
        detail = b["requests_detail"]
        # every resource, from its origin's name and address, with its size
        assert [(r["url"], r["status"], r["bytes"]) for r in detail] == [
            (f"https://{pages.origin_name(r.origin) if r.origin else job.servername}:{PORT}{r.path}", 200, r.size)
            for r in page.resources]
        opened = [r for r in detail if r.get("connection")]
        assert sorted(r["remote"].rsplit(":", 1)[0] for r in opened) == sorted(names.values())
        assert all(r["connection"]["group"] == "X25519MLKEM768" for r in opened)
        doc, further = opened[0]["connection"], [r["connection"] for r in opened[1:]]
        # the further origins open together once the document's first bytes came (not before)
        for c in further:
            assert c["start_mono_ns"] >= doc["start_mono_ns"] + doc["t_ns"]["first_byte"], (doc, c)
        # the sample's own phases are the document connection's, its headline the document's last byte
        assert s["local_port"] == doc["local_port"] and s["t_ns"]["last_byte"] == doc["t_ns"]["last_byte"]
        # the document: TCP + TLS + its request (3 RTT) before the further origins start, then theirs (3 RTT more)
        assert b["last_byte_ms"] >= 6 * RTT_MS, b["last_byte_ms"]
        assert b["last_byte_ms"] >= max((c["start_mono_ns"] + c["t_ns"]["last_byte"] - doc["start_mono_ns"]) / 1e6
                                        for c in further) - 0.001


@pytest.mark.root
def test_each_connection_of_a_page_joins_its_own_flow_on_the_wire(bed):
    samples, flows, job, _ = load(bed, n=2, axes={"webpage": PAGE})
    page = pages.page(PAGE, PORT)
    for s in samples:
        wired = s["browser"]["connections_wire"]  # the rig's per-connection join, as a browser's load has it
        assert len(wired) == 3 and len({c["flow"] for c in wired if c["flow"]}) == 3, wired
        for c in wired:
            k = next(k for k, a in enumerate([job.host, *job.hosts.values()]) if c["remote"].startswith(a + ":"))
            body = sum(r.size for r in page.resources if r.origin == k)
            assert c["bytes_s2c"] > body and c["packets_s2c"] > body / 1500, c
        # pqtimer − wire per milestone, per connection: within a fraction of a round trip (a connection joined to
        # another's flow, or a milestone a flight off, would be a round trip or more away), and later only by as
        # much more as the connection's thread waited for a CPU (a busy machine: other tests' real-time servers)
        rows = page_wire.connections(s, flows)
        assert len(rows) == 3 and all(r["flow"] for r in rows), rows
        assert s["browser"]["connections_minus_wire"] == rows  # the same join, made as the cell ended
        for r in rows:
            waited = r["cpu_wait_ms"]
            assert waited is not None and waited >= 0, r
            for m in ("connect_start", "tcp_connected", "client_hello_sent", "handshake_done", "request_sent",
                      "last_byte"):
                assert r[m] is not None and -RTT_MS / 2 < r[m] < RTT_MS / 2 + waited, (m, r)
            # the first byte pqtimer can read ends the response's first TLS record (16 kB from nginx): a round trip
            # after the wire's first packet where that record outgrows the server's first window
            assert -RTT_MS / 2 < r["first_byte"] < 1.5 * RTT_MS + waited, r
    agree = page_wire.agreement(samples, flows)
    assert agree["handshake_done"]["n"] == 3 * len(samples)


@pytest.mark.root
def test_a_single_page_is_fetched_as_before(bed):
    samples, _, job, _ = load(bed, n=2, port=PORT + 1)
    assert job.hosts == {}
    for s in samples:
        assert s["ok"], s.get("error")
        assert "browser" not in s and "webpage" not in s
        assert s["requests"] == 1 and s["body_bytes"] == DEFAULT_PAGES["1k"] and s["wire"]["ms"] >= 3 * RTT_MS


@pytest.mark.root
@pytest.mark.slow
def test_a_run_reports_pqtimers_page_loads_with_their_critical_handshakes(built_stack, tmp_path):
    from pqbench import report, store
    from pqbench.experiment import spec as specmod
    from pqbench.measure import runner
    spec = specmod.parse("""
name = "pqtimer-pages"
seed = 38
parallel = 1
lanes = 1
workers = 2
samples = 3
[axes]
kex = ["X25519"]
sig = ["ecdsap256"]
client = ["openssl"]
page = ["10k"]
webpage = ["origins-3"]
rtt = ["10ms"]
loss = ["0%"]
""", "pqtimer-pages.toml")
    db = tmp_path / "r.duckdb"
    run_id = runner.run(spec, db, quiet=True, keep_files=False)
    con = store.connect(db, read_only=True)
    raws = [json.loads(r[0]) for r in con.execute("SELECT raw FROM samples WHERE run_id = ?", [run_id]).fetchall()]
    assert len(raws) == 3 and all(s["ok"] and s["browser"]["critical_handshakes"] == 2 for s in raws), raws
    assert all(len({c["flow"] for c in s["browser"]["connections_wire"] if c["flow"]}) == 3 for s in raws)
    report.build(con, run_id, tmp_path / "report", resamples=100)
    md = (tmp_path / "report" / "summary.md").read_text()
    table = md.split("## Page loads by client: pqtimer beside the browsers")[1].split("\n## ")[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()
            if line.startswith("| origins-3")]
    assert len(rows) == 1 and rows[0][6] == "pqtimer (OpenSSL)" and rows[0][9:] == ["3", "2", "3"], table


def test_page_wire_compares_each_connection_with_its_flow_and_skips_records_without_packets():
    ms = 1_000_000
    sample = {"ok": True, "browser": {"requests_detail": [{"url": "https://a/doc", "remote": "10.0.1.1:443",
              "connection": {"start_mono_ns": 1000 * ms, "local_port": 5000, "cpu_wait_ns": 2_500_000,
                             "t_ns": {"tcp_connected": 10 * ms, "client_hello_sent": 10 * ms + ms // 10,
                                      "handshake_done": 30 * ms, "request_sent": 30 * ms, "first_byte": 41 * ms,
                                      "last_byte": 61 * ms}}}]}}
    empty = {"client": "10.0.0.1:5000", "server": "10.0.1.1:443", "open_ns": None, "syn_ns": None, "flights": []}

    def flight(d, first, last):
        return {"dir": d, "first_ns": (1000 + first) * ms, "last_ns": (1000 + last) * ms, "packets": 1}
    flow = {"client": "10.0.0.1:5000", "server": "10.0.1.1:443", "open_ns": 1000 * ms, "syn_ns": 1000 * ms,
            "synack_ns": 1010 * ms, "flights": [flight("c2s", 10, 10), flight("s2c", 20, 20), flight("c2s", 30, 30),
                                                flight("s2c", 40, 60)]}
    rows = page_wire.connections(sample, [empty, flow])
    assert rows == [{"url": "https://a/doc", "flow": "10.0.0.1:5000 > 10.0.1.1:443", "cpu_wait_ms": 2.5,
                     "connect_start": 0.0,
                     "tcp_connected": 0.0, "client_hello_sent": 0.1, "handshake_done": 0.0, "request_sent": 0.0,
                     "first_byte": 1.0, "last_byte": 1.0}], rows
    assert page_wire.connections(sample, [empty]) == [{"url": "https://a/doc", "flow": None, "cpu_wait_ms": 2.5}]
    assert page_wire.agreement([sample], [flow])["first_byte"] == {"n": 1, "median_ms": 1.0, "p5_ms": 1.0,
                                                                   "p95_ms": 1.0}
