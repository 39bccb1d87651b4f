"""The link's bottleneck beyond a fixed rate: delivery traces (traces.py, the shipped traces/), queue
disciplines (Aqm: drop-tail, CoDel, PIE) in LinkSpec, how they reach pqlink, the netem backend's
refusal, the CLI's bad input; and, with root, pqlink replaying a trace at its mean rate and
managing a real queue. Their behaviour on a virtual clock is native/pqlink/test_bottleneck.c's."""

import json
import os
import subprocess

import pytest

from conftest import run_pqbench
from pqbench.errors import BadInput, MissingCapability
from pqbench.testbed import traces
from pqbench.testbed.backend_netem import netem_args, refuse_pqlink_only
from pqbench.testbed.backend_pqlink import direction_params
from pqbench.testbed.linkspec import Aqm, Direction, LinkSpec

ATT = "ATT-LTE-driving-2016"


# --- shipped traces and validation ------------------------------------------------------------------

def test_the_shipped_traces_with_their_attribution():
    assert traces.shipped() == [f"{ATT}.down", f"{ATT}.up", "Verizon-EVDO-driving.down", "Verizon-EVDO-driving.up"]
    readme = (traces.TRACES_DIR / "README.md").read_text()
    assert "Winstein, Sivaraman and Balakrishnan" in readme and "NSDI 2013" in readme
    assert traces.info(f"{ATT}.down") == traces.TraceInfo(45604, 120002, pytest.approx(4.5603, abs=1e-3))
    assert traces.info(f"{ATT}.up").lines == 19101
    assert traces.info("Verizon-EVDO-driving.up").period_ms == 1064718


def test_resolve_names_suffixes_and_paths(tmp_path):
    assert traces.resolve(ATT, "down") == traces.TRACES_DIR / f"{ATT}.down"
    assert traces.resolve(f"{ATT}.up") == traces.TRACES_DIR / f"{ATT}.up"
    assert traces.resolve(f"{ATT}.up", "down").name == f"{ATT}.up"  # an explicit suffix wins
    own = tmp_path / "mine.txt"
    own.write_text("0\n1\n")
    assert traces.resolve(str(own), "up") == own.resolve()
    assert traces.canonical(ATT, "up") == f"{ATT}.up" and traces.canonical(own) == str(own.resolve())
    with pytest.raises(BadInput, match=rf"\.up or {ATT}\.down"):
        traces.resolve(ATT)  # a bare name needs its direction
    with pytest.raises(BadInput, match="neither a trace file nor a shipped trace .*shipped: ATT"):
        traces.resolve("no-such-trace", "up")


@pytest.mark.parametrize("text,line,what", [
    ("", 1, "the trace is empty"),
    ("\n", 1, "the trace is empty"),
    ("0\n5\nabc\n", 3, "'abc' is not a whole number"),
    ("0\n2.5\n", 2, "'2.5' is not a whole number"),
    ("0\n\n4\n", 2, "'' is not a whole number"),
    ("0\n9\n4\n", 3, "4 is before the line above \\(9\\)"),
    ("-3\n", 1, "-3 is negative"),
])
def test_a_bad_trace_names_its_file_and_line(tmp_path, text, line, what):
    f = tmp_path / "bad.trace"
    f.write_text(text)
    with pytest.raises(BadInput, match=rf"{f} line {line}: {what}") as e:
        traces.validate(f)
    assert e.value.field == "trace"


def test_a_trace_of_zeros_or_one_line_loops_sanely(tmp_path):
    f = tmp_path / "t"
    f.write_text("0\n0\n0\n\n")  # one blank last line is allowed, as pqlink allows it
    assert traces.validate(f) == traces.TraceInfo(3, 1, 36.0)  # three packets a millisecond
    f.write_text("5")
    assert traces.validate(f) == traces.TraceInfo(1, 5, 2.4)


# --- Aqm ---------------------------------------------------------------------------------------------

def test_aqm_parse_mahimahi_style():
    assert Aqm.parse("codel") == Aqm("codel")
    q = Aqm.parse("codel target=5ms interval=100ms")
    assert q.kind == "codel" and q.value("target") == 5 and q.value("interval") == 100 and not q.ecn
    assert q == Aqm.parse("codel")  # the RFC's defaults spelled out are the defaults
    p = Aqm.parse("pie target=20ms")
    assert p.value("target") == 20 and p.value("tupdate") == 15 and p.value("alpha") == 0.125
    assert p.value("beta") == 1.25 and p.value("max_burst") == 150
    assert Aqm.parse("pie alpha=0.25 beta=2 max_burst=0.1s ecn").params == (
        ("alpha", 0.25), ("beta", 2.0), ("max_burst", 100.0))
    assert Aqm.parse("codel ecn=on").ecn and not Aqm.parse("codel ecn=off").ecn
    assert Aqm.parse("droptail") == Aqm()
    for text in ("codel target=10ms ecn", "pie tupdate=30ms alpha=0.5", "droptail"):
        assert Aqm.parse(Aqm.parse(text).to_text()) == Aqm.parse(text)
    assert Aqm("pie", {"target": 20}) == Aqm.parse("pie target=20ms")  # a dict is a frozen tuple
    hash(Aqm.parse("codel target=1ms"))


@pytest.mark.parametrize("text,match", [
    ("red", r"unknown queue discipline 'red' \(allowed: droptail, codel, pie\)"),
    ("", r"empty queue discipline \(allowed: droptail, codel, pie\)"),
    ("codel tupdate=5ms", r"codel has no parameter 'tupdate' \(allowed: target, interval, ecn\)"),
    ("droptail target=5ms", r"droptail has no parameter 'target' \(allowed: ecn\)"),
    ("pie target", r"pie target needs a value"),
    ("pie target=fast", r"not a number with a unit"),
    ("codel target=0ms", r"must be a duration > 0"),
    ("pie alpha=-1", r"queue"),
    ("codel ecn=maybe", r"ecn='maybe' must be on or off"),
])
def test_aqm_bad_input_names_the_field_and_the_choices(text, match):
    with pytest.raises(BadInput, match=match) as e:
        Aqm.parse(text)
    assert e.value.field == "queue"


# --- LinkSpec and what reaches pqlink -------------------------------------------------------------------

def test_linkspec_carries_traces_and_the_discipline():
    spec = LinkSpec.parse(rtt="40ms", trace_up=ATT, trace_down=ATT, aqm="codel target=10ms")
    c2s, s2c = spec.client_to_server, spec.server_to_client
    assert (c2s.trace, s2c.trace) == (f"{ATT}.up", f"{ATT}.down")
    assert c2s.aqm == s2c.aqm == Aqm("codel", {"target": 10.0})
    text = spec.describe()
    assert f"trace {ATT}.up (mean 1.91 Mbit/s" in text and f"trace {ATT}.down (mean 4.56 Mbit/s" in text
    assert "CoDel (target 10 ms, interval 100 ms)" in text
    assert LinkSpec.from_dict(spec.to_dict()) == spec
    assert LinkSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec  # as stored
    sym = LinkSpec.symmetric(20, trace="Verizon-EVDO-driving", aqm="pie")
    assert sym.server_to_client.trace == "Verizon-EVDO-driving.down" and sym.needs_pqlink
    assert LinkSpec.symmetric(20, rate_mbit=10).needs_pqlink is None
    assert "drop-tail" not in LinkSpec.symmetric(20, rate_mbit=10).describe()  # the default stays quiet
    assert Direction().trace is None and Direction().aqm == Aqm()


def test_linkspec_bad_traces_name_the_option(tmp_path):
    bad = tmp_path / "bad"
    bad.write_text("0\n3\n1\n")
    with pytest.raises(BadInput, match=rf"{bad} line 3") as e:
        LinkSpec.parse(trace_down=str(bad))
    assert e.value.field == "trace_down"
    with pytest.raises(BadInput) as e:
        LinkSpec.parse(trace_up="nope")
    assert e.value.field == "trace_up"
    with pytest.raises(BadInput) as e:
        LinkSpec.parse(aqm="fq_codel")
    assert e.value.field == "aqm"
    with pytest.raises(BadInput, match=rf"{bad} line 3"):
        Direction(trace=str(bad))


def test_pqlink_parameters():
    d = Direction(rate_mbit=10, trace=f"{ATT}.down", aqm=Aqm.parse("pie target=20ms ecn"))
    kv = dict(x.split("=", 1) for x in direction_params("s2c", d, 5))
    assert kv["s2c.trace"] == str(traces.TRACES_DIR / f"{ATT}.down")
    assert kv["s2c.aqm"] == "pie" and kv["s2c.ecn"] == "1"
    assert kv["s2c.pie_target_ns"] == "20000000" and kv["s2c.pie_tupdate_ns"] == "15000000"
    assert kv["s2c.pie_max_burst_ns"] == "150000000" and float(kv["s2c.pie_alpha"]) == 0.125
    kv = dict(x.split("=", 1) for x in direction_params("c2s", Direction(aqm=Aqm.parse("codel interval=50ms")), 5))
    assert kv["c2s.trace"] == "none" and kv["c2s.aqm"] == "codel" and kv["c2s.ecn"] == "0"
    assert kv["c2s.codel_target_ns"] == "5000000" and kv["c2s.codel_interval_ns"] == "50000000"


def test_pqlink_refuses_a_bad_trace_itself(tmp_path):
    """Python validates first, but pqlink must not replay a broken file either."""
    from pqbench.paths import native_binary
    bad = tmp_path / "bad"
    bad.write_text("0\nx\n")
    r = subprocess.run([str(native_binary("pqlink")), "--client-netns", "a", "--server-netns", "b",
                        f"c2s.trace={bad}"], capture_output=True, text=True)
    assert r.returncode == 2 and f"{bad} line 2: 'x' is not a whole number" in r.stderr


def test_netem_refuses_what_only_pqlink_emulates():
    for spec in (LinkSpec.parse(trace_up=ATT), LinkSpec.parse(aqm="codel"), LinkSpec.parse(aqm="droptail ecn")):
        with pytest.raises(MissingCapability, match="use --backend pqlink") as e:
            refuse_pqlink_only(spec)
        assert e.value.exit_code == 3
        with pytest.raises(MissingCapability):
            netem_args(spec.client_to_server if spec.client_to_server.trace or spec.client_to_server.aqm.kind != "droptail"
                       or spec.client_to_server.aqm.ecn else spec.server_to_client, 1500)
    refuse_pqlink_only(LinkSpec.parse(rate="10mbit", queue="50"))  # drop-tail is netem's own


# --- the CLI: bad input exits 2 naming the option ----------------------------------------------------------

def test_cli_bad_trace_exits_2_naming_the_line(tmp_path):
    bad = tmp_path / "t"
    bad.write_text("0\n7\n3\n")
    r = run_pqbench("net", "up", "--trace-down", bad)
    assert r.returncode == 2 and f"--trace-down: {bad} line 3: 3 is before the line above" in r.stderr, r.stderr
    bad.write_text("")
    r = run_pqbench("handshake", "--kex", "X25519", "--sig", "ecdsap256", "--trace-up", bad)
    assert r.returncode == 2 and f"--trace-up: {bad} line 1: the trace is empty" in r.stderr, r.stderr
    bad.write_text("0\n1e3\n")
    r = run_pqbench("net", "up", "--trace-up", bad)
    assert r.returncode == 2 and "line 2: '1e3' is not a whole number" in r.stderr, r.stderr


def test_cli_unknown_queue_discipline_exits_2_with_the_choices():
    r = run_pqbench("net", "up", "--aqm", "sfq")
    assert r.returncode == 2 and "--aqm: unknown queue discipline 'sfq' (allowed: droptail, codel, pie)" in r.stderr
    r = run_pqbench("net", "up", "--aqm", "pie target=5ms gain=2")
    assert r.returncode == 2 and "pie has no parameter 'gain' (allowed: target, tupdate, alpha, beta, max_burst, ecn)" \
        in r.stderr, r.stderr


# --- with root: pqlink through a real testbed ------------------------------------------------------------

@pytest.fixture(scope="module")
def tb():
    from pqbench.testbed import Testbed
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, TUN devices)")
    with Testbed(LinkSpec(), backend="pqlink") as t:
        yield t


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, TUN devices)")
@pytest.mark.parametrize("lines", [
    "0\n0\n0\n3\n6\n",  # 10 Mbit/s in bursts of three every 6 ms
    "".join(f"{t}\n{t}\n" for t in range(10)) + "20\n",  # 12.6 Mbit/s: 10 ms on, 10 ms off
])
def test_a_trace_delivers_at_its_mean_rate(tb, tmp_path, lines):
    """A bulk transfer over 3 s (after 1 s of slow start) moves the trace's mean, in TCP payload
    (1448 of each 1500 bytes), within 10 %; the record names the trace and the offset the
    transfer's connection started at."""
    from pqbench.testbed import probe
    f = tmp_path / "t.trace"
    f.write_text(lines)
    mean = traces.validate(f).mean_mbit
    tb.reconfigure(LinkSpec(Direction(delay_ms=5, trace=str(f)), Direction(delay_ms=5)))
    tb.reset_counters()
    r = probe.tcp_transfer(tb, "client_to_server", seconds=4, skip_s=1)
    payload_mean = mean * 1448 / 1500
    assert r["intact"] and 0.9 * payload_mean <= r["goodput_mbit"] <= 1.1 * payload_mean, (r, mean)
    c = tb.counters()["client_to_server"]
    t = c["trace"]
    assert t["file"] == str(f.resolve()) and t["lines"] == lines.count("\n")
    assert t["restarts"] >= 1 and 0 <= t["first_offset_ms"] < t["period_ms"]
    assert c["sojourn_us"]["n"] == c["packets"] and c["queue_drops"] == 0
    assert tb.counters()["server_to_client"]["trace"] is None


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, TUN devices)")
def test_the_same_seed_gives_every_measurement_the_same_offsets(tb):
    """The k-th connection after a reset meets the k-th offset of the seed's sequence."""
    from pqbench.testbed import probe
    def offsets(seed):
        tb.reconfigure(LinkSpec.parse(rtt="2ms", trace_up=ATT, trace_down=ATT, seed=seed))
        tb.reset_counters()
        probe.connect_rtts(tb, 3, warmup=0)
        t = tb.counters()
        return [(t[d]["trace"]["restarts"], t[d]["trace"]["first_offset_ms"], t[d]["trace"]["last_offset_ms"])
                for d in ("client_to_server", "server_to_client")]
    a, b, other = offsets(11), offsets(11), offsets(12)
    assert a == b and a[0][0] == 3 and a != other


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.solo  # PIE's sojourn against its target: beside four workers the emulator's dequeue ran late (p50 48 ms)
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, TUN devices)")
def test_queue_disciplines_against_an_unresponsive_overload(tb):
    """12.3 Mbit/s of UDP into 10 Mbit/s for 4 s: drop-tail lets a 1000-packet queue build (its
    queueing delay reaches several hundred ms); CoDel drops from it; PIE holds the median sojourn
    near its 15 ms target. The counters carry the queueing delay the traffic built."""
    from pqbench.testbed import probe
    seen = {}
    for aqm in ("droptail", "codel", "pie"):
        tb.reconfigure(LinkSpec.symmetric(0, rate_mbit=10, aqm=aqm))
        tb.reset_counters()
        r = probe.udp_burst(tb, "client_to_server", 6000, pps=1500, payload=1000)
        c = tb.counters()["client_to_server"]
        assert r["received"] + c["queue_drops"] == 6000 and c["lost"] == 0
        seen[aqm] = c
    tail, codel, pie = seen["droptail"], seen["codel"], seen["pie"]
    assert tail["aqm_drops"] == 0 and tail["sojourn_us"]["p95"] > 300e3
    assert codel["aqm_drops"] > 0 and codel["sojourn_us"]["p95"] < tail["sojourn_us"]["p95"]
    assert pie["aqm_drops"] > 0 and pie["sojourn_us"]["p50"] < 40e3 < tail["sojourn_us"]["p50"]
    for c in seen.values():
        s = c["sojourn_us"]
        assert s["n"] == c["packets"] and s["p50"] <= s["p95"] <= s["max"] and s["mean"] > 0
