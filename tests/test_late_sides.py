"""The late-sample detector names the side that held a sample up (issue 31, item 3): synthetic wire
records with a late server answer, a late client and late emulator releases."""

from pqbench.measure import late

RTT = 5.6


def sample(total_ms, *, answer_gap_ms=RTT + 0.6, cpu_wait_ms=0.05, link_late_ms=0.01, retrans=0):
    """A handshake whose client flight ends 6 ms in and whose server answers answer_gap_ms later."""
    hello_end = 6.0
    return {"ok": True, "t_ns": {"handshake_done": int(total_ms * 1e6)}, "cpu_wait_ns": int(cpu_wait_ms * 1e6),
            "wire": {"flights_ms": [["c2s", 5.99, hello_end, 7, 1], ["s2c", hello_end + answer_gap_ms,
                                                                    hello_end + answer_gap_ms + 0.2, 4, 2],
                                    ["c2s", total_ms, total_ms, 1, 1]],
                     "retrans_c2s": retrans, "retrans_s2c": 0, "link_late_ms": link_late_ms}}


def clean_cell(n=60):
    return [sample(12.6 + 0.01 * (k % 10)) for k in range(n)]


def test_a_late_server_answer_is_the_servers():
    samples = clean_cell() + [sample(15.6, answer_gap_ms=RTT + 3.6) for _ in range(6)]
    d = late.detect(samples, "handshake_done", 0.02)
    assert d["late"] == 6 and d["by_side"] == {"server": 6, "client": 0, "link": 0, "unexplained": 0}
    assert abs(d["excess_ms"]["server"] - 3.0) < 0.1
    assert abs(d["server_answer_ms"] - (RTT + 0.6)) < 1e-6  # the typical answer, computation included


def test_a_client_waiting_for_a_cpu_is_the_clients():
    samples = clean_cell() + [sample(15.6, cpu_wait_ms=2.8) for _ in range(4)]
    d = late.detect(samples, "handshake_done", 0.02)
    assert d["by_side"] == {"server": 0, "client": 4, "link": 0, "unexplained": 0} and d["late_client_cpu"] == 4


def test_late_emulator_releases_are_the_links():
    samples = clean_cell() + [sample(15.6, link_late_ms=2.9) for _ in range(3)]
    d = late.detect(samples, "handshake_done", 0.02)
    assert d["by_side"] == {"server": 0, "client": 0, "link": 3, "unexplained": 0}


def test_what_no_instrument_saw_is_unexplained_and_retransmissions_are_not_late():
    samples = clean_cell() + [sample(15.6) for _ in range(2)] + [sample(250.0, retrans=1) for _ in range(5)]
    d = late.detect(samples, "handshake_done", 0.02)
    assert d["late"] == 2 and d["by_side"]["unexplained"] == 2
    assert d["untouched"] == 62


def test_the_percentiles_with_and_without_the_late_samples():
    samples = clean_cell(100) + [sample(15.6, answer_gap_ms=RTT + 3.6) for _ in range(10)]
    d = late.detect(samples, "handshake_done", 0.02)
    assert d["p95_ms"] > 15 and d["p95_without_late_ms"] < 12.7  # the late tenth is the whole p95
    assert abs(d["p50_ms"] - d["p50_without_late_ms"]) < 0.02


def _warned(samples, check="late", detector=True):
    """The cell's verdicts of one check as the report makes them: warnings, or notes."""
    from pqbench.analysis import cells, warnings
    from pqbench.analysis.data import cell_data
    row = {"kex": "X25519", "sig": "ecdsap256", "loss": 0, "mode": "handshake",
           "detector": late.detect(samples, "handshake_done", 0.02) if detector else None}
    c = cells.analyse_cell(cell_data(row, samples, "handshake_done"), {}, resamples=300)
    return [w for w in warnings.cell_warnings(c) if w.check.startswith(check)]


def test_far_samples_at_no_loss_are_told_by_side_and_once():
    """Three far samples among 200 (1.5 %): the late detector's split names the server, and as dropping them
    moves no percentile beyond its CI it is a note. Where the late check already reports them, the far
    samples are not told twice; a store without a detector keeps the bare warning."""
    few = clean_cell(200) + [sample(15.6, answer_gap_ms=RTT + 3.6) for _ in range(3)]
    (w,) = _warned(few, "outliers")
    assert w.note and w.check == "outliers_note" and "3 the server's" in w.message
    assert _warned(few, "late") == []  # 1.5 % late: under the late check's share
    many = clean_cell(200) + [sample(15.6, answer_gap_ms=RTT + 3.6) for _ in range(30)]
    assert _warned(many, "outliers") == [] and len(_warned(many, "late")) == 1
    (w,) = _warned(few, "outliers", detector=False)
    assert not w.note and "other processes" in w.fix


def test_late_samples_that_move_no_percentile_beyond_its_ci_are_a_note_not_a_warning():
    few = clean_cell(200) + [sample(13.5, answer_gap_ms=RTT + 1.5) for _ in range(8)]  # 4 %, p95 unmoved
    (w,) = _warned(few)
    assert w.note and w.check == "late_note" and "8 the server's" in w.message
    many = clean_cell(200) + [sample(15.6, answer_gap_ms=RTT + 3.6) for _ in range(30)]  # 13 %: p95 is theirs
    (w,) = _warned(many)
    assert not w.note and w.check == "late" and "without them p95 would be" in w.message
    assert w.fix.startswith("the server answered late")


def test_mode_shares_and_a_p95_between_modes_is_a_note_with_the_shares():
    from pqbench.analysis import cells, warnings
    from pqbench.analysis.data import cell_data
    clean = [{"ok": True, "t_ns": {"handshake_done": int((12 + 0.01 * (k % 7)) * 1e6)}} for k in range(270)]
    fast = [{"ok": True, "t_ns": {"handshake_done": int(30e6)}, "tcp_handshake": {"retransmits": 1}}] * 15
    rto = [{"ok": True, "t_ns": {"handshake_done": int(1012e6)}, "wire": {"retrans_c2s": 0, "retrans_s2c": 1}}] * 15
    c = cells.analyse_cell(cell_data({"kex": "X25519", "loss": 0.03, "mode": "handshake"}, clean + fast + rto,
                                     "handshake_done"), {}, resamples=300)
    assert c.modes["clean"][0] == 0.9 and c.modes["fast"][0] == 0.05 and c.modes["timeout"][0] == 0.05
    assert c.modes["timeout"][1] < 0.05 < c.modes["timeout"][2]  # a Wilson interval around it
    (w,) = [w for w in warnings.cell_warnings(c) if w.check in ("wide_ci", "modes")]
    assert w.check == "modes" and w.note and "90.0 % clean" in w.message
