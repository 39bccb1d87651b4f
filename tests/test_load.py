"""Server capacity (`pqbench load`): offered rates in steps until the server saturates, both sides' CPU.

In a testbed: nginx signing with RSA-2048 and with RSA-4096 (the second costs the server several times
more per handshake, and neither costs the client much: RSA verification is cheap), load at rising rates;
the costlier one saturates the server at a lower rate, latency rises with the offered load, both sides'
CPU per handshake is stored, and the run stops at its bounds. A generator holding one handshake at a
time is a weak client: it falls behind its schedule and the cell says the client saturated, with no
server capacity. The rest checks plans and inputs without root. No assertion depends on this machine's
speed: the comparisons are between algorithms on the same machine at the same time."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_pqbench

from pqbench import store
from pqbench.errors import BadInput
from pqbench.experiment import cells as cellmod
from pqbench.experiment import spec as specmod
from pqbench.experiment.loadplan import LoadPlan
from pqbench.measure import capacity, cpu


def test_a_ramp_doubles_up_to_its_maximum_and_must_fit_its_time_bound():
    assert LoadPlan(start_rate=25, max_rate=200).schedule() == [25, 50, 100, 200]
    assert LoadPlan(rates=(5.0, 7.0)).schedule() == [5.0, 7.0]
    with pytest.raises(BadInput) as e:
        LoadPlan(start_rate=25, max_rate=200, step_ms=10_000, time_bound_s=30).check()
    assert e.value.field == "load.rates" and "4 steps" in str(e.value)


BURN = """import sys, threading, time
def burn():
    end = time.thread_time() + 0.003
    while time.thread_time() < end:
        pass
threads = [threading.Thread(target=burn) for _ in range(2)]
[t.start() for t in threads]; [t.join() for t in threads]
print(time.process_time(), flush=True)
sys.stdin.read()
"""


def test_a_process_trees_cpu_is_counted_to_well_under_a_tick_with_its_ended_threads():
    """Python's start and two threads of 3 ms, ended: the count matches the child's own clock to 2 ms, which
    whole stat ticks (10 ms) cannot."""
    proc = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        own = float(proc.stdout.readline())  # the child's own clock, after its threads ended
        assert own >= 0.006
        assert cpu.seconds([proc.pid]) == pytest.approx(own, abs=0.002)
    finally:
        proc.kill()
        proc.wait()


def test_a_process_tree_is_its_root_and_every_live_descendant():
    """A shell with a child that has a child of its own: the tree is all three, and a process outside it is not
    in it (the kernel's own children lists are the reference)."""
    proc = subprocess.Popen(["sh", "-c", "sh -c 'sleep 30 & wait' & wait"], start_new_session=True)

    def kids(pid):
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    try:
        deadline = time.monotonic() + 10
        while not (kids(proc.pid) and kids(kids(proc.pid)[0])) and time.monotonic() < deadline:
            time.sleep(0.01)
        child = kids(proc.pid)[0]
        assert cpu.tree([proc.pid]) == sorted([proc.pid, child, *kids(child)])
        assert os.getpid() not in cpu.tree([proc.pid])
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the three at once (one by one, a shell ends when its child does)
        proc.wait()


def step(offered, achieved, p50, **kw):
    return {"offered_rate": offered, "drawn_rate": offered, "throughput": achieved, "scheduled": int(offered),
            "duration_s": 1.0, "latency_ms": {"p50": p50}, "failures": {}, "skipped": 0, **kw}


def test_saturation_and_which_side_it_was():
    first = step(100, 100, 2.0)
    assert not capacity.saturated(first, None)
    assert capacity.saturated(step(400, 300, 2.5), first)  # achieved under 90 % of offered
    assert capacity.saturated(step(400, 400, 11.0), first)  # the latency knee
    assert capacity.saturated(step(400, 400, 2.0, failures={"timeout": 9}), first)  # over 2 % lost
    assert capacity.client_bound(step(400, 400, 2.0, client_util=0.95))
    assert capacity.client_bound(step(400, 400, 2.0, start_lag_ms={"p99": 25.0}))
    assert capacity.client_bound(step(400, 400, 2.0, skipped=3))
    assert capacity.client_bound(step(400, 400, 2.0, client_util=0.3, start_lag_ms={"p99": 0.2})) is None
    last = {**step(400, 380, 30.0, completed=380, server_cpu_s=0.9, client_cpu_s=0.2), "saturated": True,
            "client_bound": None}
    v = capacity.verdict([first, last], ({1}, {0}))
    assert v["saturated_by"] == "server" and v["capacity_hs"] == 380
    assert v["server_cpu_ms_per_hs"] == pytest.approx(1000 * 0.9 / 380)
    v = capacity.verdict([first, {**last, "client_bound": "the load generator used 95% of its CPU"}], None)
    assert v["saturated_by"] == "client" and v["capacity_hs"] is None and v["at_least_hs"] == 380


def _spec(tmp_path, body: str):
    (tmp_path / "l.toml").write_text(body)
    return specmod.read(tmp_path / "l.toml")


def test_a_load_spec_makes_load_cells_with_the_protocol_generator_as_client(tmp_path):
    s = _spec(tmp_path, 'kind = "load"\n[load]\nrates = [50, 100]\nstep = "1s"\n[axes]\nkex = ["X25519"]\n'
                        'sig = ["rsa2048"]\nserver = ["openssl", "rustls"]\n')
    assert s.load.schedule() == [50, 100] and s.load.step_ms == 1000 and s.lanes == 1
    cells = cellmod.expand(s)
    assert {(c.server, c.client, c.kind) for c in cells} == {("openssl", "openssl", "load"), ("rustls", "openssl", "load")}
    plain = _spec(tmp_path, '[axes]\nkex = ["X25519"]\nsig = ["rsa2048"]\nserver = ["openssl", "rustls"]\n')
    assert not {c.cell_id for c in cells} & {c.cell_id for c in cellmod.expand(plain)}


@pytest.mark.parametrize("body, field", [
    ('kind = "lod"\n[axes]\nkex = ["X25519"]\nsig = ["rsa2048"]\n', "kind"),
    ('[load]\nrates = [1]\n[axes]\nkex = ["X25519"]\nsig = ["rsa2048"]\n', "load"),
    ('kind = "load"\n[load]\nrate = [1]\n[axes]\nkex = ["X25519"]\nsig = ["rsa2048"]\n', "load.rate"),
    ('kind = "load"\n[load]\nrates = [0]\n[axes]\nkex = ["X25519"]\nsig = ["rsa2048"]\n', "load.rates[0]"),
    ('kind = "load"\n[load]\nstep = "60s"\ntime_bound = "100s"\n[axes]\nkex = ["X25519"]\nsig = ["rsa2048"]\n',
     "load.rates"),
    ('kind = "load"\n[axes]\nkex = ["X25519"]\nsig = ["rsa2048"]\nclient = ["gotls"]\n', "axes.client"),
    ('kind = "load"\n[axes]\nkex = ["X25519"]\nsig = ["rsa2048"]\npad = [100]\n', "axes.pad"),
    ('kind = "load"\n[axes]\nkex = ["X25519"]\nsig = ["rsa2048"]\noffer = ["X25519"]\n', "axes.offer"),
])
def test_bad_load_specs_name_the_field(tmp_path, body, field):
    with pytest.raises(BadInput) as e:
        _spec(tmp_path, body)
    assert e.value.field == field


def test_a_ramp_that_cannot_fit_its_time_bound_exits_2_before_starting():
    r = run_pqbench("load", "--kex", "X25519", "--sig", "rsa2048", "--rates", "10,20,40", "--step", "60s",
                    "--time-bound", "100s")
    assert r.returncode == 2 and "--rates" in r.stderr and "time bound" in r.stderr


# --- in the testbed ----------------------------------------------------------------------------------

@pytest.fixture
def root(built_stack):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")


solo = pytest.mark.solo  # a load step saturates a server on this machine's CPUs: alone, not beside other tests


@solo
def test_the_costlier_signature_saturates_the_server_at_a_lower_rate(root, tmp_path):
    (tmp_path / "l.toml").write_text('''name = "capacity"
kind = "load"
workers = 2
[load]
start = 100
max_rate = 3200
step = "1s"
time_bound = "60s"
[axes]
kex = ["X25519"]
sig = ["rsa2048", "rsa3072"]
''')
    db = tmp_path / "r.duckdb"
    r = run_pqbench("run", tmp_path / "l.toml", "--db", db)
    assert r.returncode == 0, r.stderr[-3000:]
    con = store.connect(db, read_only=True)
    run_id = store.resolve_run(con, None)
    cells = {c["sig"]: c for c in store.cell_rows(con, run_id)}
    by_cell: dict = {}
    for s in store.load_step_rows(con, run_id):
        by_cell.setdefault(s["cell_id"], []).append(s)
    con.close()
    verdict = {sig: json.loads(c["load"]) for sig, c in cells.items()}
    assert {c["kind"] for c in cells.values()} == {"load"}
    slow, fast = verdict["rsa3072"], verdict["rsa2048"]
    assert slow["saturated_by"] == "server", slow
    assert fast["at_least_hs"] > slow["capacity_hs"]  # the cheaper signature saturates at a higher rate
    for sig, c in cells.items():
        rows = by_cell[c["cell_id"]]
        assert 2 <= len(rows) <= len(LoadPlan(start_rate=100, max_rate=3200).schedule())  # stopped at its bounds
        assert [r["offered_rate"] for r in rows] == [100 * 2 ** k for k in range(len(rows))]
        assert rows[-1]["p50_ms"] > rows[0]["p50_ms"]  # latency rises with the offered load
        assert all(r["server_cpu_s"] > 0 and r["client_cpu_s"] > 0 for r in rows)
        assert verdict[sig]["server_cpu_ms_per_hs"] > 0 and verdict[sig]["client_cpu_ms_per_hs"] > 0
    assert slow["server_cpu_ms_per_hs"] > fast["server_cpu_ms_per_hs"]

    out = tmp_path / "report"
    r = run_pqbench("report", "--db", db, "--out", out)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (out / "figures" / "load-latency.png").exists() and (out / "figures" / "load-capacity.png").exists()
    md = (out / "summary.md").read_text()
    assert "## Server capacity" in md and "X25519 + rsa3072" in md


@solo
def test_a_weak_client_is_reported_as_the_bottleneck(root):
    """One handshake in flight at a time over 30 ms of RTT cannot start 200 a second."""
    r = run_pqbench("load", "--kex", "X25519", "--sig", "ecdsap256", "--rates", "200", "--step", "1s",
                    "--max-inflight", "1", "--rtt", "30ms", "--workers", "2", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    record = json.loads(r.stdout)
    v = record["load"]
    assert v["saturated_by"] == "client" and v["capacity_hs"] is None
    assert "generator" in v["why"]
    assert record["stop_reason"].startswith("the client saturated first")


@solo
@pytest.mark.parametrize("server", ["openssh", "gossh"])
def test_ssh_load_accounts_for_both_sides(root, server):
    """sshload to NEWKEYS against sshd (a process per connection: its reaped sessions' CPU counts) and Go's."""
    r = run_pqbench("load", "--kex", "mlkem768x25519-sha256", "--sig", "ssh-ed25519", "--server", server,
                    "--rates", "10,20", "--step", "1s", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    record = json.loads(r.stdout)
    assert record["ok"] > 0 and record["failures"] == 0
    assert all(s["group"] == "mlkem768x25519-sha256" for s in record["steps"])
    v = record["load"]
    assert v["server_cpu_ms_per_hs"] > 0 and v["client_cpu_ms_per_hs"] > 0


def test_a_server_stack_without_the_algorithm_skips_the_load_cell_with_the_reason(built_stack, tmp_path):
    s = _spec(tmp_path, 'kind = "load"\n[axes]\nkex = ["p256_frodo640aes"]\nsig = ["ecdsap256"]\n'
                        'server = ["openssl", "rustls"]\n')
    reasons = {c.server: cellmod.unavailable_reason(c, s) for c in cellmod.expand(s)}
    assert reasons["openssl"] is None
    assert "p256_frodo640aes" in reasons["rustls"]


def test_each_server_serves_only_the_credentials_of_its_runnable_cells(built_stack, tmp_path):
    """sshd cannot load an ML-DSA host key: its cells are skipped, and it must not be handed the key."""
    from pqbench.measure import session
    s = _spec(tmp_path, 'kind = "load"\nprotocol = "ssh"\n[axes]\nkex = ["X25519"]\nsig = ["ed25519", "mldsa44"]\n'
                        'server = ["openssh", "gossh"]\n')
    runnable = [c for c in cellmod.expand(s) if cellmod.unavailable_reason(c, s) is None]
    assert {(c.server, c.sig) for c in runnable} == {("openssh", "ssh-ed25519"), ("gossh", "ssh-ed25519"),
                                                      ("gossh", "ssh-mldsa-44")}
    _, servings = session.servers(s, runnable, tmp_path / "run", session.make_credentials(runnable, tmp_path / "run"))
    served = {srv: sorted(site.chain.sig for site in serving.sites) for srv, serving in servings(0).items()}
    assert served == {"openssh": ["ssh-ed25519"], "gossh": ["ssh-ed25519", "ssh-mldsa-44"]}
