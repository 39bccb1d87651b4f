"""The testbed beside a CPU hog (root only): closing it leaves no pqlink process behind, and its final
counters are always recorded, or the close is an error naming the link.

Two busy loops at normal priority take both CPUs of a 2-core machine. They run in this session, as the
suite's own work does: while a testbed is up pqbench raises its session's CPU group (sched.boost_session),
so they compete as hard as anything can. pqlink's keep-awake helpers run at SCHED_IDLE in the
lowest-weight CPU group: beside the loops they wait seconds for the CPU they need to exit, and pqlink's
exit used to wait for them (killed after 5 s, it wrote no counters; its helpers outlived the close).
Nothing here depends on how fast the machine is: each step waits for what it needs, and what is asserted
holds on any machine.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.root,
    pytest.mark.solo,  # its busy loops would slow the suite's other tests
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, TUN devices)"),
]

from pqbench.errors import MeasurementFailed  # noqa: E402
from pqbench.testbed import EmulatorOptions, LinkSpec, Testbed, probe, registry  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "src"
ENV = dict(os.environ, PYTHONPATH=str(SRC))
HOGS = 2


def pqlink_processes(name: str) -> list[int]:
    """pqlink and its helpers (forks: the same program and command line) serving testbed name."""
    return [p for p in registry.pqlink_pids() if f"{name}-cli" in registry.pqlink_netns(p)]


def leftovers(name: str) -> dict:
    left = {"processes": pqlink_processes(name), "run_dir": registry.run_dir(name).exists(),
            "namespaces": [ns for ns in (f"{name}-cli", f"{name}-srv") if os.path.exists(f"/var/run/netns/{ns}")]}
    return {k: v for k, v in left.items() if v}


@pytest.fixture(scope="module")
def cpu_hog():
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(HOGS)]
    try:
        yield hogs
    finally:
        for h in hogs:
            h.kill()
            h.wait()


@pytest.fixture(autouse=True)
def hog_still_running(cpu_hog):
    yield
    assert all(h.poll() is None for h in cpu_hog), "the CPU hog ended early: the test ran beside nothing"


def test_closed_testbed_has_its_final_counters_and_no_pqlink_left(cpu_hog, tmp_path):
    # keep_awake=2 whatever the machine: a helper per hog to starve
    with Testbed(LinkSpec.symmetric(2, loss=0.1, seed=3),
                 emulator=EmulatorOptions(capture_dir=str(tmp_path), keep_awake=2)) as t:
        r = probe.udp_burst(t, "client_to_server", 500)
        assert len(pqlink_processes(t.name)) == 1 + 2  # pqlink and its helpers, found as the check finds them
    assert leftovers(t.name) == {}, "close returned with something of the testbed still there"
    final = t.final_counters["client_to_server"]
    assert final["lost"] == len(r["missing"]) and final["offered_packets"] >= 500
    drops = [ln for ln in (tmp_path / "drops.log").read_text().splitlines()[1:] if ln.split()[1] == "c2s"]
    assert len(drops) == final["lost"]  # the final counters are those of the end, as the drop log's


def test_net_down_reports_the_counters(cpu_hog):
    up = subprocess.run([sys.executable, "-m", "pqbench", "net", "up", "--rtt", "2ms", "--keep-awake", "2", "--json"],
                        capture_output=True, text=True, env=ENV, timeout=120)
    assert up.returncode == 0, up.stderr
    name = json.loads(up.stdout)["name"]
    try:
        down = subprocess.run([sys.executable, "-m", "pqbench", "net", "down", name, "--json"],
                              capture_output=True, text=True, env=ENV, timeout=300)
        assert down.returncode == 0, down.stderr
        counters = json.loads(down.stdout)["counters"]
        assert counters is not None and counters["client_to_server"]["offered_packets"] >= 0, down.stdout
        assert leftovers(name) == {}
    finally:
        if registry.read_record(name):
            subprocess.run([sys.executable, "-m", "pqbench", "net", "down", name], env=ENV, timeout=300)


def test_signal_tears_the_testbed_down(cpu_hog):
    holder = subprocess.Popen([sys.executable, "-c", "import time\nfrom pqbench.testbed import Testbed, LinkSpec\n"
                               "with Testbed(LinkSpec.symmetric(10)) as tb:\n"
                               "    print(tb.name, flush=True)\n    time.sleep(300)\n"],
                              stdout=subprocess.PIPE, text=True, env=ENV)
    name = holder.stdout.readline().strip()
    assert name.startswith("pqb-"), name
    holder.send_signal(signal.SIGINT)
    assert holder.wait(timeout=300) != 0
    assert leftovers(name) == {}


def test_a_killed_emulator_is_an_error_and_leaves_nothing(cpu_hog):
    """pqlink killed: its helpers die of their parent-death signal, at idle priority, and its counters
    are lost. Closing says so, and returns only once every helper has gone."""
    with pytest.raises(MeasurementFailed, match="final counters") as e:
        with Testbed(LinkSpec.symmetric(1), emulator=EmulatorOptions(keep_awake=2)) as t:
            name = t.name
            os.kill(t.backend.pid, signal.SIGKILL)
            t.backend.proc.wait(timeout=60)
    assert name in str(e.value)
    assert t.final_counters is None
    assert leftovers(name) == {}
