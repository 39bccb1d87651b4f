"""pqbench.analysis on a store filled with samples drawn from known distributions (no root).

The samples have pqtimer's JSON shape and go through store.save_cell, so loading, statistics,
pairing and warnings are exercised as on a real run; the real-run report is in test_report.py.
"""

import numpy as np
import pytest

from pqbench import analysis, store
from pqbench.testbed import LinkSpec

MSGS_SENT = {"client_hello": 1416, "finished": 52}
MSGS_RECV = {"server_hello": 1210, "encrypted_extensions": 10, "certificate": 518, "certificate_verify": 79,
             "finished": 52}


def sample(i: int, ms: float | None, group: str = "X25519MLKEM768") -> dict:
    if ms is None:
        return {"worker": 0, "i": i, "ok": False, "error_class": "timeout", "error": "timed out", "t_ns": {}}
    ns = lambda f: int(ms * f * 1e6)  # noqa: E731 - phases at fixed fractions of the total
    return {"worker": 0, "i": i, "ok": True, "error_class": None, "error": None,
            "t_ns": {"start": 0, "tcp_connected": ns(0.4), "client_hello_sent": ns(0.42),
                     "server_hello_received": ns(0.85), "server_finished_received": ns(0.95),
                     "handshake_done": ns(1.0), "first_byte": None, "last_byte": None},
            "group": group, "sigalg": "ecdsa_secp256r1_sha256", "resumed": False,
            "msg_bytes_sent": MSGS_SENT, "msg_bytes_received": MSGS_RECV, "records_sent": 3, "records_received": 6,
            "tcp_handshake": {"bytes_sent": 1501, "bytes_received": 1968, "segs_out": 6, "segs_in": 4,
                              "retransmits": 0, "rtt_us": 10000, "cwnd": 10}}


def save(con, run_id, kex, durations, *, rtt=10.0, loss=0.0, group=None, status="done", reason=None, node=None):
    spec = LinkSpec.symmetric(rtt, loss=loss, seed=42)
    cell = {"cell_id": f"{kex}-{rtt}-{loss}", "position": 0, "status": status, "reason": reason, "kex": kex,
            "sig": "ecdsap256", "scenario": None, "rtt_ms": rtt, "loss": loss, "loss_model": "bernoulli",
            "rate_mbit": None, "mtu": 1500, "initcwnd": None, "mode": "handshake", "page": None, "requests": None,
            "pad": 0, "link": spec.to_dict() if status == "done" else None, "metric": "handshake_done",
            "n": len(durations), "ok": sum(d is not None for d in durations),
            "failures": sum(d is None for d in durations), **({"node": node} if node else {})}
    samples = [sample(i, d, group or kex) for i, d in enumerate(durations)]
    store.save_cell(con, run_id, cell, samples, "handshake_done")


@pytest.fixture
def con(tmp_path):
    c = store.connect(tmp_path / "r.duckdb")
    store.create_run(c, "synthetic", name="synthetic", spec={"axes": {"kex": ["X25519", "X25519MLKEM768"]}})
    yield c
    c.close()


def test_identical_algorithms_differ_by_zero_within_the_ci(con):
    x = (22 + np.random.default_rng(1).lognormal(0, 0.3, 300)).tolist()
    save(con, "synthetic", "X25519", x)
    save(con, "synthetic", "X25519MLKEM768", x)
    a = analysis.analyse(con, "synthetic", resamples=300)
    (p,) = a.paired
    assert p.axis == "kex" and p.baseline.kex == "X25519" and p.other.kex == "X25519MLKEM768"
    assert p.diff[0] == 0 and p.diff[1] <= 0 <= p.diff[2] and not p.significant
    assert a.variant_fields == ("kex",) and a.labels() == ["X25519", "X25519MLKEM768"]


def test_a_shift_between_algorithms_is_found(con):
    rng = np.random.default_rng(2)
    save(con, "synthetic", "X25519", (25 + rng.normal(0, 0.5, 200)).tolist())
    save(con, "synthetic", "X25519MLKEM768", (27 + rng.normal(0, 0.5, 200)).tolist())
    (p,) = analysis.analyse(con, "synthetic", resamples=300).paired
    assert p.significant and p.diff[1] <= 2 <= p.diff[2]
    assert p.relative == pytest.approx(2 / 25, abs=0.01)


def test_cell_statistics_percentiles_failures_wire_and_phases(con):
    x = np.random.default_rng(3).normal(30, 1, 400)
    save(con, "synthetic", "X25519", x.tolist() + [None] * 4, loss=0.02)
    (c,) = analysis.analyse(con, "synthetic", resamples=300).cells
    assert (c.n, c.ok, c.failures) == (404, 400, 4)
    for q in analysis.QS:
        est, lo, hi = c.pct[q]
        assert est == pytest.approx(np.percentile(x, q)) and lo <= est <= hi
    p, lo, hi = c.failure_rate
    assert p == pytest.approx(4 / 404) and lo < p < hi
    assert c.failure_classes == {"timeout": 4}
    assert c.wire == {"bytes_c2s": 1501, "bytes_s2c": 1968, "packets_c2s": 6, "packets_s2c": 4,
                      "retransmits_mean": 0.0, "server_flight_packets": None,
                      "server_flight_pushes": None, "stall_share": None, "stall_ms": None}  # stalls: QUIC's
    assert c.phases["ClientHello→ServerHello"] == pytest.approx(0.43 * np.median(x), rel=0.01)
    # Lower bound: 2 RTT, flights from the samples' message sizes; no crypto measured in this run.
    assert c.bound.total_ms == pytest.approx(20.0)
    assert c.bound.flights.client_hello == 1421 and c.bound.flights.server_flight == 1968


def test_warnings_name_the_problem_and_the_fix(con):
    rng = np.random.default_rng(4)
    heavy = (25 * rng.lognormal(0, 1.0, 300)).clip(21).tolist()  # p99/p50 about 10 at 0 % loss
    save(con, "synthetic", "X25519", heavy)
    save(con, "synthetic", "X25519MLKEM768", (15 + rng.normal(0, 0.2, 300)).tolist())  # faster than 2 RTT
    save(con, "synthetic", "secp256r1", (25 + rng.normal(0, 0.3, 8)).tolist() + [None], group="X25519")
    a = analysis.analyse(con, "synthetic", resamples=300)
    checks = {c.kex: {w.check: w for w in c.warnings} for c in a.cells}
    assert "--parallel" in checks["X25519"]["tail"].text() and "p99/p50" in checks["X25519"]["tail"].message
    assert "samples.max" in checks["X25519"]["wide_ci"].text()
    assert "below_bound" in checks["X25519MLKEM768"]
    assert "tail" not in checks["X25519MLKEM768"]
    small = checks["secp256r1"]
    assert {"few_samples", "failures", "group"} <= set(small)
    assert "instead of secp256r1" in small["group"].message


def test_skipped_cells_are_kept_with_their_reason(con):
    save(con, "synthetic", "X25519", [25.0] * 50)
    save(con, "synthetic", "mceliece348864", [], status="skipped", reason="no TLS code point")
    a = analysis.analyse(con, "synthetic", resamples=200)
    assert [c.kex for c in a.cells] == ["X25519"]
    assert [(r["kex"], r["reason"]) for r in a.not_run] == [("mceliece348864", "no TLS code point")]


def test_unfinished_run_and_runner_warnings_are_reported(con):
    store.update_run(con, "synthetic", warnings=["the emulator floor drifted from 0.05 ms to 0.2 ms"])
    save(con, "synthetic", "X25519", [25.0] * 30)
    texts = [w.text() for w in analysis.analyse(con, "synthetic", resamples=200).warnings]
    assert any("floor drifted" in t for t in texts)
    assert any("running" in t and "--resume" in t for t in texts)


def test_algorithms_are_ordered_as_the_spec_lists_them(tmp_path):
    con = store.connect(tmp_path / "r.duckdb")
    store.create_run(con, "ordered", name="ordered",
                     spec_toml='[axes]\nkex = ["x25519mlkem768", "secp256r1", "X25519"]\nsig = ["ecdsap256"]\n')
    for kex in ("X25519", "X25519MLKEM768", "secp256r1"):
        save(con, "ordered", kex, [25.0] * 10)
    a = analysis.analyse(con, "ordered", resamples=100)
    con.close()
    assert a.labels() == ["X25519MLKEM768", "secp256r1", "X25519"]
    assert {p.baseline.kex for p in a.paired} == {"X25519"}  # classical and first by name


def kem_result(name: str, keygen_ms: float, encaps_ms: float, decaps_ms: float) -> dict:
    """A crypto.measure result as cryptobench reports it (only what the store keeps)."""
    op = lambda ms: {"median_us": ms * 1000, "p25_us": ms * 950, "p75_us": ms * 1050, "n": 50}  # noqa: E731
    return {"name": name, "kind": "kem", "sizes": {"pk": 1216, "ct": 1120},
            "ops": {"keygen": op(keygen_ms), "encaps": op(encaps_ms), "decaps": op(decaps_ms)}}


def test_the_model_takes_each_operations_fastest_round_and_a_drifting_cpu_is_named(con):
    store.save_crypto(con, "synthetic", [[kem_result("X25519MLKEM768", 2.0, 4.0, 6.0)]])  # a slow spell
    store.save_crypto(con, "synthetic", [[kem_result("X25519MLKEM768", 1.2, 2.2, 3.6)],
                                         [kem_result("X25519MLKEM768", 1.1, 2.5, 3.5)]])
    assert con.execute("SELECT list(DISTINCT round ORDER BY round) FROM crypto").fetchone()[0] == [0, 1, 2]
    save(con, "synthetic", "X25519MLKEM768", (35 + np.random.default_rng(5).normal(0, 0.3, 200)).tolist())
    a = analysis.analyse(con, "synthetic", resamples=200)
    (c,) = a.cells
    assert c.bound.parts["crypto_ms"] == pytest.approx(1.1 + 2.2 + 3.5)
    decaps = a.crypto["X25519MLKEM768"]["decaps"]
    assert (decaps.fastest, decaps.slowest, decaps.rounds) == pytest.approx((3.5, 6.0, 3))
    (w,) = [w for w in a.warnings if w.check == "cpu_speed"]
    assert "X25519MLKEM768 keygen" in w.message and "1.82×" in w.message and "fixed CPU clock" in w.fix


def test_each_cell_s_model_uses_its_own_node_s_crypto_and_unequal_nodes_are_named(con):
    store.save_crypto(con, "synthetic", [[kem_result("X25519MLKEM768", 1.0, 2.0, 3.0)]], node="fast", segment="s1")
    store.save_crypto(con, "synthetic", [[kem_result("X25519MLKEM768", 1.5, 3.0, 4.5)]], node="slow", segment="s2")
    store.join_node(con, "synthetic", "s1", "fast", {})
    store.join_node(con, "synthetic", "s2", "slow", {})
    save(con, "synthetic", "X25519MLKEM768", [35.0] * 50, rtt=10.0, node="fast")
    save(con, "synthetic", "X25519MLKEM768", [75.0] * 50, rtt=30.0, node="slow")
    a = analysis.analyse(con, "synthetic", resamples=100)
    crypto = {c.row["node"]: c.bound.parts["crypto_ms"] for c in a.cells}
    assert crypto == pytest.approx({"fast": 6.0, "slow": 9.0})
    assert {n["node"]: n["crypto_speed"] for n in a.nodes} == pytest.approx({"fast": 1.0, "slow": 1.5})
    (w,) = [w for w in a.warnings if w.check == "node_speed"]
    assert "node slow took 1.50× as long as node fast" in w.message
    data = analysis.read(con, "synthetic").of_node("slow")  # report --by-node: one node's part alone
    assert [c.row["node"] for c in data.cells] == ["slow"] and set(data.crypto_nodes) == {"slow"}


def test_nodes_within_a_quarter_of_each_other_raise_no_node_warning(con):
    store.save_crypto(con, "synthetic", [[kem_result("X25519MLKEM768", 1.0, 2.0, 3.0)]], node="a", segment="s1")
    store.save_crypto(con, "synthetic", [[kem_result("X25519MLKEM768", 1.2, 2.4, 3.6)]], node="b", segment="s2")
    save(con, "synthetic", "X25519MLKEM768", [35.0] * 30, node="a")
    assert not [w for w in analysis.analyse(con, "synthetic", resamples=100).warnings if w.check == "node_speed"]


def test_steady_or_tiny_operations_raise_no_cpu_speed_warning(con):
    steady = [kem_result("X25519MLKEM768", 1.0, 2.0, 3.0), kem_result("X25519MLKEM768", 1.1, 2.1, 3.1)]
    tiny = [kem_result("X25519", 0.05, 0.05, 0.05), kem_result("X25519", 0.09, 0.09, 0.09)]
    store.save_crypto(con, "synthetic", [list(pair) for pair in zip(steady, tiny)])
    save(con, "synthetic", "X25519", [25.0] * 30)
    assert not [w for w in analysis.analyse(con, "synthetic", resamples=100).warnings if w.check == "cpu_speed"]


def test_a_store_from_before_crypto_rounds_still_loads(tmp_path):
    """Older stores have no round column: their microbenchmark counts as one round, read-only too."""
    import duckdb
    path = tmp_path / "old.duckdb"
    old = duckdb.connect(str(path))
    first_schema = store.MIGRATIONS[0][2]  # before crypto rounds, stores had this without the round column
    old.execute(first_schema.replace(", round INTEGER", "").replace(
        "ALTER TABLE crypto ADD COLUMN IF NOT EXISTS round INTEGER;", ""))
    assert "round" not in [c[0] for c in old.execute("DESCRIBE crypto").fetchall()]  # really the old layout
    old.execute("INSERT INTO crypto VALUES ('r', 'X25519', 'kem', 'keygen', 50.0, 45.0, 55.0, 100, 32, 32)")
    store.create_run(old, "r", name="r")
    save(old, "r", "X25519", [25.0] * 30)
    old.close()
    con = store.connect(path, read_only=True)
    spread = analysis.read(con, "r").crypto
    con.close()
    assert spread["X25519"]["keygen"].rounds == 1 and spread["X25519"]["keygen"].fastest == pytest.approx(0.05)


def test_a_median_between_two_modes_is_flagged_and_a_steady_one_is_not(con):
    rng = np.random.default_rng(6)
    rto = np.concatenate([25 + rng.normal(0, 0.3, 151), 230 + rng.normal(0, 3, 149)])  # half wait for an RTO
    save(con, "synthetic", "X25519", rng.permutation(rto).tolist(), loss=0.15)
    save(con, "synthetic", "X25519MLKEM768", (26 + rng.normal(0, 0.5, 300)).tolist(), loss=0.15)
    checks = {c.kex: {w.check: w for w in c.warnings} for c in analysis.analyse(con, "synthetic", resamples=300).cells}
    split = checks["X25519"]["split_median"]
    assert "retransmission timeout" in split.message and "p25/p75" in split.fix
    assert "split_median" not in checks["X25519MLKEM768"]


def test_a_cell_whose_client_stands_beyond_the_machines_allowance_is_reported_on_the_wires_clock(con):
    """The machine's allowance comes from the emulator floor the run measured (±0.25 ms plus its p95 - p50); a cell
    whose client's median stands further from the wire than that is reported on the wire's clock with the reason
    (its client's median beside), and one within it is not; a comparison never mixes clocks: a pair with a cell on
    the wire's clock is compared on the wire's for both."""
    from pqbench.measure import wire
    store.update_run(con, "synthetic", calibration_start={"p50_ms": 0.06, "p95_ms": 0.11})
    assert wire.allowance_ms({"p50_ms": 0.06, "p95_ms": 0.11}) == pytest.approx(0.30)
    for kex, late in (("X25519", 0.05), ("X25519MLKEM768", 1.5)):  # a client 1.5 ms behind the wire: woken late
        durations = [10.0 + 0.01 * i for i in range(40)]
        samples = [{**sample(i, d, kex), "start_mono_ns": i, "wire": {"ms": d - late}} for i, d in enumerate(durations)]
        cell = {"cell_id": kex, "position": 0, "status": "done", "kex": kex, "sig": "ecdsap256", "rtt_ms": 10.0,
                "loss": 0.0, "mode": "handshake", "pad": 0, "metric": "handshake_done", "n": 40, "ok": 40, "failures": 0,
                "link": LinkSpec.symmetric(10.0, seed=42).to_dict(), "wire": wire.agreement(samples, "handshake_done")}
        store.save_cell(con, "synthetic", cell, samples, "handshake_done")
    a = analysis.analyse(con, "synthetic", resamples=200)
    by = {c.row["kex"]: c for c in a.cells}
    assert by["X25519"].wire_clock is None and by["X25519"].p50 == pytest.approx(10.195, abs=0.01)
    assert by["X25519"].clock == "client"
    held = by["X25519MLKEM768"]
    assert "+1.500 ms" in held.wire_clock and "0.300 ms this machine allows" in held.wire_clock
    assert "reported on the wire's clock (p50 8.695 ms, its client's 10.195 ms)" in held.wire_clock
    assert held.clock == "wire" and held.p50 == pytest.approx(8.695, abs=0.01)
    assert [w.check for w in held.warnings if w.check.startswith("wire")] == ["wire_clock"]
    # the pair on the wire's clock: 10.145 against 8.695 ms, not the clients' equal 10.195 ms
    (pair,) = [p for p in a.paired if p.axis == "kex"]
    assert pair.clock == "wire" and pair.medians == pytest.approx((10.145, 8.695), abs=0.01)
    assert pair.diff[0] == pytest.approx(-1.45, abs=0.01) and pair.significant


def test_a_browser_cell_is_judged_by_the_floor_of_a_normal_priority_process(con):
    """A browser runs at normal priority (it must not run real-time), so a busy machine wakes it later than the
    measured processes: the run measures the floor from such a process too ("normal"), and a browser's cell is
    judged by that one. The same 1.5 ms offset is beyond what a real-time client may claim and within a browser's;
    a run from before (no normal floor) judges the browser by the measured processes' (the stricter)."""
    from pqbench.measure import wire
    floor = {"p50_ms": 0.06, "p95_ms": 0.11, "normal": {"p50_ms": 0.1, "p95_ms": 2.1}}
    assert wire.allowance_ms(floor, "normal") == pytest.approx(2.25)
    assert wire.allowance_ms(floor) == wire.allowance_ms({"p50_ms": 0.06, "p95_ms": 0.11}, "normal") == \
        pytest.approx(0.30)
    with pytest.raises(ValueError, match="priority"):
        wire.allowance_ms(floor, "idle")
    store.update_run(con, "synthetic", calibration_start=floor)
    for client in ("openssl", "chromium"):
        durations = [10.0 + 0.01 * i for i in range(40)]
        samples = [{**sample(i, d, "X25519"), "start_mono_ns": i, "wire": {"ms": d - 1.5}} for i, d in enumerate(durations)]
        cell = {"cell_id": client, "position": 0, "status": "done", "kex": "X25519", "sig": "ecdsap256", "rtt_ms": 10.0,
                "loss": 0.0, "mode": "page", "pad": 0, "metric": "handshake_done", "n": 40, "ok": 40, "failures": 0,
                "client": client, "link": LinkSpec.symmetric(10.0, seed=42).to_dict(),
                "wire": wire.agreement(samples, "handshake_done")}
        store.save_cell(con, "synthetic", cell, samples, "handshake_done")
    by = {c.row["client"]: c for c in analysis.analyse(con, "synthetic", resamples=200).cells}
    assert "0.300 ms this machine allows" in by["openssl"].wire_clock
    assert by["chromium"].wire_clock is None and by["chromium"].agreement_allowance_ms == pytest.approx(2.25)


def test_a_cell_beyond_the_allowance_whose_samples_lack_wire_times_keeps_its_clients_figures(con):
    from pqbench.measure import wire
    store.update_run(con, "synthetic", calibration_start={"p50_ms": 0.06, "p95_ms": 0.11})
    durations = [10.0 + 0.01 * i for i in range(40)]
    samples = [{**sample(i, d, "X25519"), "start_mono_ns": i, **({"wire": {"ms": d - 1.5}} if i % 2 else {})}
               for i, d in enumerate(durations)]
    cell = {"cell_id": "half", "position": 0, "status": "done", "kex": "X25519", "sig": "ecdsap256", "rtt_ms": 10.0,
            "loss": 0.0, "mode": "handshake", "pad": 0, "metric": "handshake_done", "n": 40, "ok": 40, "failures": 0,
            "link": LinkSpec.symmetric(10.0, seed=42).to_dict(),
            "wire": {**wire.agreement(samples, "handshake_done"), "n": 20, "median_diff_ms": 1.5}}
    store.save_cell(con, "synthetic", cell, samples, "handshake_done")
    (c,) = analysis.analyse(con, "synthetic", resamples=200).cells
    assert c.clock == "client" and c.p50 == pytest.approx(10.195, abs=0.01)
    assert "20 of 40 samples: the figures stay the client's" in c.wire_clock, c.wire_clock
