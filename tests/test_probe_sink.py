"""The bulk-transfer sink's goodput (pqbench.testbed.probe) counts only bytes that arrived inside its window: a
sink held up just as the window opens reads a buffer of earlier bytes at once, which must not count."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

from conftest import ROOT

RATE_BPS = 8_000_000  # paced by this test: 10 kB every 10 ms
SKIP_S, STALL_S, SECONDS = 1.0, 0.6, 3.0


def test_a_sink_held_up_as_its_window_opens_does_not_count_what_queued_meanwhile():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    sink = subprocess.Popen([sys.executable, "-m", "pqbench.testbed.probe", "sink", "--bind", "127.0.0.1", "--skip",
                             str(SKIP_S), "--no-hash"], stdout=subprocess.PIPE, text=True, env=env)
    port = int(sink.stdout.readline().split()[1])
    chunk, period = b"x" * (RATE_BPS // 8 // 100), 0.01
    with socket.create_connection(("127.0.0.1", port)) as out:
        began = time.monotonic()
        stopped = resumed = False
        k = 0
        while time.monotonic() - began < SECONDS:
            out.sendall(chunk)
            k += 1
            elapsed = time.monotonic() - began
            if not stopped and elapsed >= SKIP_S - 0.1:  # held up from just before its window opens
                sink.send_signal(signal.SIGSTOP)
                stopped = True
            if stopped and not resumed and elapsed >= SKIP_S - 0.1 + STALL_S:
                sink.send_signal(signal.SIGCONT)
                resumed = True
            time.sleep(max(0.0, began + k * period - time.monotonic()))
    r = json.loads(sink.stdout.read())
    sink.wait()
    sent_rate = RATE_BPS / 1e6
    # the stalled sink's first read in its window carried STALL_S of bytes: counted, goodput came out ~1.35 x
    assert r["goodput_mbit"] <= sent_rate * 1.05, (r, sent_rate)
    assert r["goodput_mbit"] >= sent_rate * 0.8, (r, sent_rate)
