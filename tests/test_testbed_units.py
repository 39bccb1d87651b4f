"""Testbed plumbing that needs no root: subnet choice, the leftover registry's bookkeeping."""

import ipaddress
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pqbench.errors import BadInput
from pqbench.testbed import addressing, registry
from pqbench.testbed.testbed import Testbed, validate_name

net = ipaddress.ip_network


def test_first_free_subnet_avoids_everything_in_use():
    assert addressing.first_free([]) == net("10.100.0.0/16")
    used = [net("10.100.7.0/24"), net("10.101.0.5/32"), net("10.102.0.0/16")]
    assert addressing.first_free(used) == net("10.103.0.0/16")
    assert addressing.first_free([net("10.0.0.0/8")]) == net("172.16.0.0/16")
    assert addressing.first_free([net("10.0.0.0/8"), net("172.16.0.0/12")]) is None


def test_pick_subnet_skips_claimed_ranges_of_other_testbeds():
    first = addressing.pick_subnet([])
    assert addressing.pick_subnet([str(first)]) != first


def test_names():
    assert registry.new_name().startswith("pqb-") and len(registry.new_name()) == 10
    assert validate_name("pqb-abc123") == "pqb-abc123"
    for bad in ("abc", "pqb-", "pqb-ABC", "pqb-123456789", "pqb-a;rm"):
        with pytest.raises(BadInput):
            validate_name(bad)
    with pytest.raises(BadInput, match="backend"):
        Testbed(backend="dummynet")


def test_process_identity_survives_pid_reuse_checks():
    me = registry.proc_ref(os.getpid())
    assert registry.is_alive(me)
    assert not registry.is_alive({"pid": os.getpid(), "start": me["start"] + 1})  # same pid, other process
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    ref = registry.proc_ref(p.pid)
    p.wait()
    assert not registry.is_alive(ref)
    assert not registry.is_alive(None) and not registry.is_alive({"pid": None})


def test_records_and_teardown_of_what_no_longer_exists(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "RUN_ROOT", tmp_path)
    rec = {"name": "pqb-zz9", "namespaces": ["pqb-zz9-cli"], "host_devices": [], "processes": [],
           "owner": registry.proc_ref(os.getpid())}
    registry.write_record("pqb-zz9", rec)
    assert registry.read_record("pqb-zz9") == rec
    assert registry.owner_alive(rec) and not registry.owner_alive({**rec, "detached": True})
    assert set(registry.all_records()) == {"pqb-zz9"}
    removed = registry.teardown(rec)  # nothing exists any more: only the run directory goes
    assert removed == {"processes": [], "namespaces": [], "devices": []}
    assert registry.all_records() == {}


def test_reap_stale_removes_only_testbeds_of_dead_owners(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "RUN_ROOT", tmp_path)
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    dead = registry.proc_ref(p.pid)
    p.wait()
    owners = {"pqb-dead1": {"owner": dead}, "pqb-live1": {"owner": registry.proc_ref(os.getpid())},
              "pqb-net1": {"owner": dead, "detached": True}}  # `net up`: alive until net down
    for name, owner in owners.items():
        registry.write_record(name, {"name": name, "namespaces": [f"{name}-cli", f"{name}-srv"],
                                     "host_devices": [], "processes": [], **owner})
    (tmp_path / "pqb-new1").mkdir()  # no record (yet): nobody can tell whose it is
    summary = registry.reap_stale()
    assert summary == {"testbeds": ["pqb-dead1"], "namespaces": [], "devices": [], "processes": []}
    assert set(registry.all_records()) == {"pqb-live1", "pqb-net1", "pqb-new1"}
    assert registry.describe_reaped(summary) == \
        "removed 1 stale testbed of a dead process (pqb-dead1): 0 namespaces, 0 processes"
    again = registry.reap_stale()
    assert again["testbeds"] == [] and registry.describe_reaped(again) is None


def test_reaped_summary_counts_what_went():
    line = registry.describe_reaped({"testbeds": ["pqb-1a2b3c", "pqb-4d5e6f"], "devices": ["pqb1a2b3c-c"],
                                     "namespaces": ["a", "b", "c", "d"], "processes": list(range(17))})
    assert line == ("removed 2 stale testbeds of dead processes (pqb-1a2b3c, pqb-4d5e6f): 4 namespaces, "
                    "1 host devices, 17 processes")


def test_a_killed_process_nobody_waited_for_is_dead():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ref = registry.proc_ref(p.pid)
    assert registry.is_alive(ref)
    os.kill(p.pid, signal.SIGKILL)
    for _ in range(500):  # until the kernel has made it a zombie
        if Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.01)
    assert not registry.is_alive(ref)  # an owner's zombie tears nothing down: its testbed is stale
    p.wait()


def test_a_killed_child_is_waited_for_but_not_past_its_bound():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    registry.kill_child(p)
    assert p.returncode == -signal.SIGKILL

    class Unending:  # a child whose exit never comes to an end: poll() never answers, its pid stays alive
        pid, kills = os.getpid(), 0

        def poll(self):
            return None

        def kill(self):
            self.kills += 1

    stuck = Unending()
    began = time.monotonic()
    registry.kill_child(stuck, wait_s=0.3)
    assert stuck.kills == 1 and 0.3 <= time.monotonic() - began < 5  # a Ctrl-C is not held past the bound
