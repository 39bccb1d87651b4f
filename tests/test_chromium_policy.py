"""Chromium's CACertificates policy file, which pqbench writes for roots NSS cannot hold (ML-DSA): it lists the
roots of the processes alive that asked for one, and nothing of a process once it is gone, however it ended (its
guardian prunes it). The machine's policy folder is real: these tests need root."""

import os
import signal
import ssl
import subprocess
import sys
import time

import pytest

from conftest import ROOT
from pqbench.algorithms import certs
from pqbench.endpoints.chromium import policy

pytestmark = pytest.mark.root
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "src"))


def owner(ca) -> subprocess.Popen:
    """A process that trusts ca through the policy, says so, and waits to be ended."""
    code = ("import sys, time\nfrom pqbench.endpoints.chromium import policy\n"
            f"policy.trust({str(ca)!r})\nprint('trusted', flush=True)\ntime.sleep(600)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=ENV)
    assert p.stdout.readline().strip() == "trusted"
    return p


def der(chain) -> bytes:
    return ssl.PEM_cert_to_DER_cert(chain.root_cert.read_text())


def test_each_live_owner_s_root_is_listed_and_a_killed_owner_s_goes_with_its_guardian(tmp_path):
    a, b = (certs.make_chain("mldsa44", tmp_path / name) for name in ("a", "b"))
    first, second = owner(a.root_cert), owner(b.root_cert)
    try:
        assert {der(a), der(b)} <= set(policy.listed())
        assert oct(policy.POLICY_FILE.stat().st_mode & 0o777) == "0o644"  # Chromium reads it; only root writes it
        second.send_signal(signal.SIGKILL)
        second.wait()
        deadline = time.monotonic() + 30  # its guardian runs `policy prune` once it has ended
        while der(b) in policy.listed() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert der(b) not in policy.listed() and der(a) in policy.listed()
    finally:
        for p in (first, second):
            p.kill()
            p.wait()
    deadline = time.monotonic() + 30
    while der(a) in policy.listed() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert der(a) not in policy.listed()


def test_an_entry_whose_owner_is_gone_is_pruned_by_the_next_change(tmp_path):
    """A guardian killed too: the next process to trust or untrust a root prunes the dead one's entry."""
    chain = certs.make_chain("ecdsap256", tmp_path / "c")
    policy.ENTRIES.mkdir(parents=True, exist_ok=True)
    dead = policy.ENTRIES / f"999999-1-{'0' * 16}.pem"  # no process 999999 started at tick 1
    dead.write_text(chain.root_cert.read_text())
    entry = policy.trust(chain.root_cert)
    try:
        assert not dead.exists() and policy.listed().count(der(chain)) == 1
    finally:
        policy.untrust(entry)
    assert der(chain) not in policy.listed()
