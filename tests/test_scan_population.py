"""A population scan's parts on their own (no root): the target file (bad lines with their numbers,
duplicates, no expansion), the global pace across threads, the backoff after refusals, and the aggregate
of known results; the whole command on the local population is in tests/test_scan_probes.py."""

import threading
import time

import pytest

from pqbench.errors import BadInput
from pqbench.scan import aggregate, polite, population


def test_target_file_reports_bad_lines_and_keeps_the_rest(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("# fleet\n10.0.0.1:443\n\n10.0.0.1:x\nssh://10.0.0.2:22  # sshd\n10.0.0.0/24:443\n10.0.0.1:443\n"
                 "https://a.test\n10.0.0.3\n")
    tf = population.read(f)
    assert [(k, str(a)) for k, a in tf.targets] == [(2, "10.0.0.1:443"), (5, "ssh://10.0.0.2:22"), (9, "10.0.0.3:443")]
    assert [k for k, _, _ in tf.bad] == [4, 6, 8]
    assert "nothing is expanded" in tf.bad[1][2]  # a range is a bad line, never expanded (nor looked up)
    assert all(why for _, _, why in tf.bad)
    f2 = tmp_path / "t2.txt"
    f2.write_text(f.read_text())
    assert population.read(f2).digest == tf.digest  # the same bytes: the same scan to resume
    with pytest.raises(BadInput, match="--file"):
        population.read(tmp_path / "missing.txt")


def test_targets_are_grouped_per_host_in_file_order(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("10.0.0.1:1\n10.0.0.2:1\n10.0.0.1:2\nssh://10.0.0.1:22\n")
    groups = population.by_host(population.read(f).targets)
    assert [[str(a) for _, a in g] for g in groups] == [["10.0.0.1:1", "10.0.0.1:2", "ssh://10.0.0.1:22"],
                                                        ["10.0.0.2:1"]]


def test_pace_spaces_slots_across_threads():
    pace = polite.Pace(rate=100)  # a slot every 10 ms
    times, lock = [], threading.Lock()

    def worker():
        for _ in range(10):
            pace.reserve(1)
            with lock:
                times.append(time.monotonic())
    threads = [threading.Thread(target=worker) for _ in range(4)]
    t_start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    times.sort()
    assert len(times) == 40 and pace.taken == 40
    # no slot before its time: the 40th is at least 39 intervals after the start, however slow the machine
    assert times[-1] - t_start >= 39 * 0.010 - 1e-9  # (floating-point sums)
    pace.reserve(3)  # a run of three connections takes three slots
    assert pace.taken == 43 and pace.next >= times[-1] + 3 * 0.010 - 1e-9


def test_pace_and_backoff_stop_at_once():
    stop = threading.Event()
    pace = polite.Pace(rate=0.01, stop=stop)  # a slot every 100 s
    pace.reserve(1)
    stop.set()
    t0 = time.monotonic()
    with pytest.raises(polite.Stopped):
        pace.reserve(1)
    assert time.monotonic() - t0 < 5


def test_backoff_doubles_per_refusal_in_a_row_and_resets():
    hosts = polite.Hosts(backoff_s=0.01)
    assert hosts.before("h") == 0
    for n, want in ((1, 0.01), (2, 0.02), (3, 0.04)):
        hosts.after("h", refused=True)
        assert hosts.before("h") == pytest.approx(want)
    assert hosts.before("other") == 0
    hosts.after("h", refused=False)
    assert hosts.before("h") == 0
    many = polite.Hosts(backoff_s=1)
    many.refusals["x"] = 20
    many.stop = threading.Event()
    many.stop.set()
    with pytest.raises(polite.Stopped):
        many.before("x")  # capped at 30 s, and a stop ends the wait


def tls_result(accepted, *, pq_kex, hrr, split="accepted", over="accepted", flight="fits", chain=1000, cert_pq=False):
    return {"protocol": "tls", "groups": {"accepted": accepted}, "certificate": {"total_bytes": chain},
            "readiness": {"hybrid_mlkem_accepted": [g for g in accepted if "MLKEM" in g and g != "MLKEM768"],
                          "post_quantum_accepted": [g for g in accepted if "MLKEM" in g], "pq_key_exchange": pq_kex,
                          "pq_authentication": cert_pq, "hrr_for_x25519": {"needed": hrr, "group": None}},
            "probes": [{"probe": "split ClientHello", "verdict": split},
                       {"probe": "oversized ClientHello", "verdict": over},
                       {"probe": "first flight vs TCP initial window", "verdict": flight}]}


def test_aggregate_counts_shares_of_those_that_answered():
    results = [
        tls_result(["X25519MLKEM768", "X25519"], pq_kex="by default", hrr=False),
        tls_result(["X25519"], pq_kex="no", hrr=False, split="reset", chain=20000, flight="costs a round trip"),
        tls_result(["MLKEM768"], pq_kex="by default", hrr=True, over="silent", cert_pq=True, chain=5000),
        {"protocol": "tls", "failure": {"class": "refused", "error": "x"}},
        {"protocol": "ssh", "kex": ["sntrup761x25519-sha512", "curve25519-sha256"], "software": "OpenSSH_9.2p1",
         "kex_post_quantum": ["sntrup761x25519-sha512"], "readiness": {"kex_first_post_quantum": True}},
        {"protocol": "ssh", "kex": ["curve25519-sha256"], "software": "OpenSSH_8.4p1", "kex_post_quantum": [],
         "readiness": {"kex_first_post_quantum": False}},
        {"protocol": "ssh", "failure": {"class": "timeout", "error": "x"}},
    ]
    a = aggregate.aggregate(results)
    t, s = a["tls"], a["ssh"]
    assert a["targets"] == 7 and a["failures"] == {"refused": 1, "timeout": 1}
    assert (t["targets"], t["answered"]) == (4, 3)
    assert t["hybrid_pq_accepted"] == {"n": 1, "of": 3, "percent": 33.3}
    assert t["pq_accepted"]["n"] == 2 and t["pq_by_default"]["n"] == 2 and t["hrr_for_x25519"]["n"] == 1
    assert t["pq_certificate"]["n"] == 1 and t["flight_over_initial_window"]["n"] == 1
    assert t["split_intolerant"]["n"] == 1 and t["oversized_intolerant"]["n"] == 1
    assert t["chain_bytes"] == {"min": 1000, "median": 5000, "max": 20000, "initial_window_bytes": 14480}
    assert s["pq_offered"] == {"n": 1, "of": 2, "percent": 50.0} and s["pq_first"]["n"] == 1
    assert s["by_version"] == {"OpenSSH_8.4p1": {"n": 0, "of": 1, "percent": 0.0},
                               "OpenSSH_9.2p1": {"n": 1, "of": 1, "percent": 100.0}}
    text = "\n".join(aggregate.lines(a))
    assert "TLS: accept a hybrid post-quantum key exchange" in text and "33.3 % (1 of 3)" in text
    assert "published: 49.3 %" in text and "published: 6 %" in text
    assert "SSH OpenSSH_9.2p1: post-quantum key exchange offered by 100.0 % (1 of 1)" in text


def test_stacks_are_registered_once_for_threads_asking_at_once():
    # a population scan's threads ask for pqtimer at the same time; one of them found no stack at all
    import subprocess
    import sys
    code = ("import threading\nfrom pqbench import endpoints\nout = []\n"
            "ts = [threading.Thread(target=lambda: out.append(endpoints.get('openssl', 'client').name)) for _ in range(16)]\n"
            "[t.start() for t in ts]\n[t.join() for t in ts]\nprint(len(out), set(out))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "16 {'openssl'}", r.stderr


def test_local_population_layout_and_its_expected_aggregate():
    from pqbench.scan import local
    entries = local.layout(["10.9.1.1", "10.9.1.2"], "10.9.1.3", "10.9.1.4")
    per_host = len(local.KINDS)
    assert len(entries) == 2 * per_host + 2 and len({e["target"] for e in entries}) == len(entries)
    assert {e["host"] for e in entries} == {"10.9.1.1", "10.9.1.2", "10.9.1.3", "10.9.1.4"}
    assert "ssh://10.9.1.2:22" in {e["target"] for e in entries}
    want = local.expected_aggregate(entries)
    tls_kinds = [k for k, v in local.KINDS.items() if v.protocol == "tls" and k != "closed"]
    assert want["tls_answered"] == 2 * len(tls_kinds) + 2 and want["failures"] == {"refused": 2}
    assert want["pq_certificate"] == 1 and want["split_intolerant"] == 1 == want["oversized_intolerant"]
    assert want["ssh_answered"] == want["ssh_pq_offered"] == want["ssh_pq_first"] == 2
    # nginx-pq-first, -pq-tie, -secp-only, s2n, rustls, gotls per host; quic-big
    assert want["hybrid_pq_accepted"] == 2 * 6 + 1 and want["pq_accepted"] == 2 * 7 + 1
    assert want["flight_over_initial_window"] == 1


def test_local_population_hosts_are_bad_input():
    from pqbench.scan import local
    with pytest.raises(BadInput, match="--hosts"):
        local.up(0, __import__("pathlib").Path("/nonexistent"))


def test_local_population_compare_names_what_differs():
    from pqbench.scan import local
    entries = local.layout(["10.9.1.1"], "10.9.1.3", "10.9.1.4")
    want = local.expected_aggregate(entries)
    results = [tls_result(["X25519"], pq_kex="no", hrr=False)]
    differ = local.compare(aggregate.aggregate(results), want)
    assert differ["targets"] == {"got": 1, "want": len(entries)} and "ssh_pq_offered" in differ


def test_population_report_bad_input(tmp_path):
    from conftest import run_pqbench
    r = run_pqbench("population", "report", "--db", tmp_path / "none.duckdb")
    assert r.returncode == 2 and "--db" in r.stderr, r.stderr
    (tmp_path / "c.json").write_text("{}")
    (tmp_path / "x.duckdb").write_bytes(b"")
    r = run_pqbench("population", "report", "--db", tmp_path / "x.duckdb", "--composition", tmp_path / "c.json")
    assert r.returncode == 2 and "--composition" in r.stderr, r.stderr
