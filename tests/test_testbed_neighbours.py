"""A testbed's measured client beside other testbeds (root only): another emulator busy with bulk flows does not
hold the client back.

pqlink forwards at real-time priority 50, above the measured servers and clients (10), and spins for up to 50 µs
before each deadline. It used to spin at 50 too: beside two testbeds carrying bulk TCP, a handshake's client time
came out 0.3-0.5 ms longer than the same connection's on the wire (their spins held the client off its CPU), where
alone it is 0.05 ms. It now spins at the lowest real-time priority (native/pqlink/link.c, SPIN_FIFO). What is
asserted is how the scheduler orders the processes, not how fast they are.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.root,
    pytest.mark.solo,  # its bulk flows would slow the suite's other tests, and theirs would blur its figure
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, TUN devices)"),
]

from pqbench import endpoints  # noqa: E402
from pqbench.algorithms import certs  # noqa: E402
from pqbench.endpoints.base import DEFAULT_WORKERS, STUDY_PAGES, ClientJob, Serving, Site  # noqa: E402
from pqbench.measure import wire  # noqa: E402
from pqbench.measure.rig import Rig  # noqa: E402
from pqbench.testbed import LinkSpec  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "src"
PORT = 4471
NEIGHBOURS = 2
NEIGHBOURS_ADD_MS = 0.1  # what two bulk-flowing neighbours may add to the client's agreement with the wire
# Bulk TCP through a testbed of its own at 10 ms RTT and 100 Mbit/s, until stdin closes; a line once it flows.
BULK = """
import sys, threading
from pqbench.testbed import LinkSpec, Testbed, probe
with Testbed(LinkSpec.symmetric(10, rate_mbit=100)) as tb:
    print("up", flush=True)
    ended = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), ended.set()), daemon=True).start()
    while not ended.is_set():
        r = probe.tcp_transfer(tb, seconds=2, check=False)
        print("flowed", round(r["goodput_mbit"]), flush=True)
"""


def handshakes(tmp_path, n: int = 100) -> dict:
    """pqtimer's agreement with the wire over n handshakes at 10 ms RTT through a testbed of its own."""
    chain = certs.make_chain("ecdsap256", tmp_path / "certs")
    serving = Serving(tmp_path / "nginx", [Site(PORT, chain)], ["X25519"], STUDY_PAGES, DEFAULT_WORKERS)
    link = LinkSpec.symmetric(rtt_ms=10)
    with Rig(endpoints.get("openssl"), serving, link) as rig:
        job = ClientJob(host=rig.tb.server_addr, port=PORT, groups=["X25519"], cafile=str(chain.root_cert),
                        servername=chain.server_name)
        rig.begin_cell(link)
        samples = rig.sample(job, n, 1, tmp_path)
        rig.end_cell(samples, "handshake", tmp_path)
    w = wire.agreement(samples, "handshake_done")
    assert w["n"] == n, w
    return w


def test_a_client_is_not_held_back_by_another_testbeds_emulator(built_stack, tmp_path):
    """Judged against the same client alone on this machine, just before (paired): what the neighbours add, not
    what a slower machine adds to every handshake (alone 0.05 ms here; 0.17 ms beside the neighbours on a slower
    machine, where a fixed bound of 0.15 ms failed)."""
    alone = handshakes(tmp_path / "alone")
    neighbours = [subprocess.Popen([sys.executable, "-c", BULK], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   text=True, env=dict(os.environ, PYTHONPATH=str(SRC))) for _ in range(NEIGHBOURS)]
    try:
        for n in neighbours:
            assert n.stdout.readline().strip() == "up"
            assert n.stdout.readline().startswith("flowed")  # a first transfer ended: they are flowing
        beside = handshakes(tmp_path / "beside")
        running = [n.poll() is None for n in neighbours]
    finally:
        for n in neighbours:
            n.stdin.close()
        outs = [n.stdout.read() for n in neighbours]  # to the end: each closes its testbed once stdin closes
        for n in neighbours:
            n.wait(timeout=60)
    assert all(running), outs  # the neighbours flowed the whole time
    print(f"pqtimer - wire median: alone {alone['median_diff_ms']} ms, beside {NEIGHBOURS} bulk flows "
          f"{beside['median_diff_ms']} ms")
    # beside two bulk flows, 0.04-0.10 ms against 0.045-0.05 alone in 12 rounds of 40; 0.19-0.53 ms when the
    # emulators spun at priority 50 (+0.15 to +0.48 over alone)
    assert 0 <= beside["median_diff_ms"] < alone["median_diff_ms"] + NEIGHBOURS_ADD_MS, (alone, beside)
