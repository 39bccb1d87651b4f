"""Competing traffic: N bulk TCP flows across the emulated link, from the server namespace to the client
one (the direction of the server's handshake flight, which then queues behind them), started before a cell
and kept running through it, so its handshakes meet a standing queue (bufferbloat) or the queue management
that holds it down. The flows are plain processes (pqbench.testbed.bulk) without the real-time priority
measured processes get (sched.measured): they compete for the link, and yield the CPU to what is measured."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
import time

from pqbench.errors import BadInput, MeasurementFailed
from pqbench.testbed.linkspec import congctl_name

PORT = 5301  # the sink's port in the client namespace
SETTLE_S = 3.0  # the flows fill the bottleneck's queue before the cell starts (1000 packets at 10 Mbit/s: 1.2 s)
MAX_FLOWS = 64
DRAIN_S = 120.0  # the longest a full queue may take to empty (1000 packets over EV-DO's slowest spell)


@dataclasses.dataclass(frozen=True)
class Cross:
    flows: int
    cc: str = "cubic"

    def label(self) -> str:
        return f"{self.flows} {self.cc}"


def parse(field: str, value) -> Cross | None:
    """0, "none" -> None; 2 -> two cubic flows; "1 bbr" -> one BBR flow."""
    if value in (0, "0", "none", None):
        return None
    parts = str(value).split()
    try:
        flows = int(parts[0])
    except (ValueError, IndexError):
        raise BadInput(field, f"{value!r} is not a number of flows with an optional congestion control "
                              "(e.g. 1, \"2 bbr\", \"none\")") from None
    if not 1 <= flows <= MAX_FLOWS or len(parts) > 2:
        raise BadInput(field, f"{value!r}: 0 to {MAX_FLOWS} flows, then at most a congestion control name")
    return Cross(flows, congctl_name(field, parts[1]) if len(parts) == 2 else "cubic")


@contextlib.contextmanager
def running(tb, cross: Cross | None, settle_s: float = SETTLE_S):
    """The flows run while the block runs. Yields a dict that holds the flows' totals (bytes sent and
    received, the source's goodput) once the block has ended."""
    if cross is None:
        yield {}
        return
    out: dict = {"flows": cross.flows, "cc": cross.cc}
    python = [sys.executable, "-m", "pqbench.testbed.bulk"]
    sink = subprocess.Popen(tb.exec_argv("client", [*python, "sink", "--port", str(PORT)]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    source = None
    try:
        _expect(sink, "listening", "the competing traffic's sink")
        source = subprocess.Popen(tb.exec_argv("server", [*python, "send", "--to", tb.addr("client"), "--port",
                                                          str(PORT), "--flows", str(cross.flows), "--cc", cross.cc]),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _expect(source, "flows", "the competing traffic's source")
        time.sleep(settle_s)
        if source.poll() is not None or sink.poll() is not None:
            raise MeasurementFailed(f"the competing traffic stopped before the cell: {_err(source)}{_err(sink)}")
        yield out
    finally:
        for name, proc in (("sent", source), ("received", sink)):
            if proc is None:
                continue
            proc.terminate()
            try:
                stdout, _ = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, _ = proc.communicate()
            last = (stdout or "").strip().splitlines()[-1:] or ["{}"]
            with contextlib.suppress(ValueError):
                totals = json.loads(last[0])
                out[f"bytes_{name}"] = totals.get("bytes")
                if totals.get("seconds"):
                    out["goodput_mbit"] = round(totals["bytes"] * 8 / totals["seconds"] / 1e6, 3)
        out["drained_s"] = drain(tb)


def drain(tb, timeout_s: float = DRAIN_S) -> float | None:
    """Waits until the emulator holds no packet (the flows' standing queue has left), so the next cell
    starts on an empty link; the seconds it took (None: the emulator does not say, e.g. netem)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        counters = tb.counters() or {}
        held = [d.get("in_flight") for d in counters.values() if isinstance(d, dict) and "in_flight" in d]
        if not held:
            return None
        if not any(held):
            return round(time.monotonic() - t0, 3)
        time.sleep(0.05)
    raise MeasurementFailed(f"the link still held packets {timeout_s:g} s after the competing flows stopped")


def _expect(proc: subprocess.Popen, key: str, what: str) -> None:
    line = proc.stdout.readline()
    if key not in line:
        proc.kill()
        raise MeasurementFailed(f"{what} did not start: {line.strip()} {_err(proc)}")


def _err(proc) -> str:
    if proc is None or proc.poll() is None:
        return ""
    return (proc.stderr.read() or "").strip()[-500:]
