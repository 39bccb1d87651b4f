"""Testbed plumbing that needs no root: subnet choice, the leftover registry's bookkeeping."""

import ipaddress
import os
import subprocess
import sys

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
