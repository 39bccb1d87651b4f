"""Measurements through a testbed's link with real kernel sockets.

- connect_rtts: TCP connect() time (SYN -> SYN-ACK, one RTT) from client to server.
- cpu_stalls: how long a busy normal-priority thread is kept off its CPU.
- udp_burst: numbered UDP datagrams in one direction, paced; which ones arrived.
- tcp_transfer: a bulk TCP transfer between two processes (one per namespace, so neither the
  GIL nor this process limits it); goodput as the receiver saw it, with a content check.

`python -m pqbench.testbed.probe sink|source ...` are the two ends of tcp_transfer.
"""

from __future__ import annotations

import argparse
import array
import fcntl
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

from pqbench.errors import MeasurementFailed
from pqbench.testbed import sched

DIRECTIONS = {"client_to_server": ("client", "server"), "server_to_client": ("server", "client")}
_PATTERN = bytes(range(256)) * 1024  # the source repeats this; the sink hashes what arrives
_CHUNK = len(_PATTERN)


# --- TCP connect RTT -------------------------------------------------------------------------------

PROBE_FIFO_PRIORITY = 40  # below pqlink's default 50: the emulator still comes first


def _realtime_thread() -> bool:
    """Makes the calling thread SCHED_FIFO (Linux policies are per thread), so that busy CPUs
    do not delay the probe's wake-ups; False where that is not allowed."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PROBE_FIFO_PRIORITY))
        return True
    except (OSError, AttributeError):
        return False


def connect_rtts(tb, n: int, *, timeout_s: float = 10.0, warmup: int = 2, realtime: bool = True,
                 to: str | None = None) -> list[float]:
    """n TCP connect() durations in ms, client -> server (its address `to`, by default its own), one
    after another.

    The server only listens (the kernel completes handshakes without accept()); the queue is
    drained between samples, so nothing else runs in this process while a sample is timed.
    The sampling thread runs SCHED_FIFO when realtime (and allowed), else as a normal-priority client does (a
    browser: sched.measured without real-time). Samples that time out are recorded as timeout_s (a lost SYN
    shows as a ~1 s sample)."""
    listener = tb.socket("server")
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    to = to or tb.server_addr
    listener.bind((to, 0))
    listener.listen(4096)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    linger = struct.pack("ii", 1, 0)  # close with RST: no TIME_WAIT pile-up over many samples

    def drain():
        while True:
            try:
                conn, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            conn.close()

    def sample_all():
        if realtime:
            _realtime_thread()
            return sample_each()
        with sched.measured(realtime=False):
            return sample_each()

    def sample_each():
        out = []
        for i in range(n + warmup):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            s.settimeout(timeout_s)
            t0 = time.perf_counter_ns()
            try:
                s.connect((to, port))
                dt = (time.perf_counter_ns() - t0) / 1e6
            except (socket.timeout, OSError):
                dt = timeout_s * 1e3
            s.close()
            drain()
            if i >= warmup:
                out.append(dt)
        return out

    try:
        return tb.call("client", sample_all)  # the sampling thread lives in the client namespace
    finally:
        drain()
        listener.close()


def cpu_stalls(n: int, chunk_ms: float = 1.0) -> list[float]:
    """n chunks of chunk_ms of a busy thread's own CPU time, the thread scheduled as a normal-priority client is (a
    browser: sched.measured without real-time); per chunk, the wall time beyond its CPU time in ms: how long it was
    kept off a CPU it wanted. A connect probe sleeps until the kernel wakes it and is placed on a free CPU then; a
    browser's threads are running when real-time work or a host's steal takes their CPU, and wait it out."""
    chunk_ns, out = int(chunk_ms * 1e6), []

    def run():
        with sched.measured(realtime=False):
            for _ in range(n):
                w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
                while (c := time.thread_time_ns()) - c0 < chunk_ns:
                    pass
                out.append(max(0, time.perf_counter_ns() - w0 - (c - c0)) / 1e6)
    thread = threading.Thread(target=run, name="pqbench-cpu-stalls")  # its own thread: its priority is set per thread
    thread.start()
    thread.join()
    return out


# --- UDP bursts --------------------------------------------------------------------------------

def udp_burst(tb, direction: str, count: int, *, pps: float = 20000, payload: int = 64, settle_s: float | None = None,
              port: int = 0) -> dict:
    """Sends count numbered datagrams in direction ('client_to_server' or 'server_to_client'),
    paced at pps, and reports which arrived. settle_s: how long to wait for stragglers
    (default: the direction's delay + jitter + 0.3 s)."""
    if direction not in DIRECTIONS:
        raise ValueError(direction)
    src, dst = DIRECTIONS[direction]
    payload = max(payload, 8)
    rx = tb.socket(dst, socket.AF_INET, socket.SOCK_DGRAM)
    tx = tb.socket(src, socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE (root): hold the whole burst
        rx.bind((tb.addr(dst), port))
        rx.setblocking(False)
        target = (tb.addr(dst), rx.getsockname()[1])
        pad = b"\0" * (payload - 8)
        start = due = time.perf_counter()
        sent = 0
        chunk = max(1, int(pps / 1000))  # send in ~1 ms slices, then wait for the schedule
        while sent < count:
            for _ in range(min(chunk, count - sent)):
                tx.sendto(struct.pack("!Q", sent) + pad, target)
                sent += 1
            # the pace holds after this process was held up: catching up would send what it owes at once, a
            # burst the TUN device's queue (500 packets) cannot hold (a CI run's 10 % loss case lost 113 there)
            due = max(due + chunk / pps, time.perf_counter() - 0.002)
            while time.perf_counter() < due:
                pass  # spin: sleep() granularity would make bursts
        send_s = time.perf_counter() - start
        spec_dir = tb.spec.directions[direction]
        if settle_s is None:
            settle_s = (spec_dir.delay_ms + spec_dir.jitter_ms) / 1e3 + 0.3
            if spec_dir.rate_mbit:  # the bottleneck has sent since the first datagram: what it still holds
                settle_s += max(0.0, count * (payload + 28) * 8 / (spec_dir.rate_mbit * 1e6)
                                - (time.perf_counter() - start))
        time.sleep(settle_s)
        seqs = []
        while True:
            try:
                data = rx.recv(65536)
            except BlockingIOError:
                break
            seqs.append(struct.unpack("!Q", data[:8])[0])
    finally:
        rx.close()
        tx.close()
    received = set(seqs)
    missing = [i for i in range(count) if i not in received]
    return {"direction": direction, "sent": count, "received": len(received), "missing": missing,
            "duplicates": len(seqs) - len(received),
            "reordered": sum(1 for a, b in zip(seqs, seqs[1:]) if b < a),
            "seconds": time.perf_counter() - start, "send_seconds": send_s}


# --- TCP bulk transfer -------------------------------------------------------------------------

def _probe_argv(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "pqbench.testbed.probe", *args]


def _env() -> dict:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def tcp_transfer(tb, direction: str = "client_to_server", *, seconds: float | None = None, nbytes: int | None = None,
                 during=None, timeout_s: float = 120, check: bool = True, skip_s: float = 0.0) -> dict:
    """Bulk TCP from one side to the other, for seconds or nbytes. during(elapsed_fn) runs in this
    process while the transfer is going (e.g. to reconfigure the link). Returns goodput (receiver's
    view, first to last byte), bytes and whether the content arrived intact (check=False skips
    the hashing, which costs CPU at multi-Gbit/s; intact is then None). skip_s leaves the first
    seconds (slow start) out of goodput_mbit; goodput_total_mbit counts from the first byte."""
    if (seconds is None) == (nbytes is None):
        raise ValueError("give seconds or nbytes")
    src, dst = DIRECTIONS[direction]
    nohash = [] if check else ["--no-hash"]
    sink = tb.popen(dst, _probe_argv(["sink", "--bind", tb.addr(dst), "--skip", str(skip_s), *nohash]), stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True, env=_env())
    source = None
    try:
        line = sink.stdout.readline()
        if not line.startswith("listening "):
            raise MeasurementFailed(f"probe sink did not start: {line}{sink.stderr.read()}")
        port = line.split()[1]
        limit = ["--seconds", str(seconds)] if seconds is not None else ["--bytes", str(nbytes)]
        source = tb.popen(src, _probe_argv(["source", "--host", tb.addr(dst), "--port", port, *limit, *nohash]),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
        t0 = time.monotonic()
        if during is not None:
            during(lambda: time.monotonic() - t0)
        out_src, err_src = source.communicate(timeout=timeout_s)
        if source.returncode != 0:
            sink.kill()  # it would wait for a connection that is gone
        out_sink, err_sink = sink.communicate(timeout=timeout_s)
    except BaseException:
        for p in (source, sink):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        raise
    if source.returncode != 0 or sink.returncode != 0:
        raise MeasurementFailed(f"TCP transfer failed: source {source.returncode} {err_src.strip()}; "
                                f"sink {sink.returncode} {err_sink.strip()}")
    s, r = json.loads(out_src), json.loads(out_sink)
    return {"direction": direction, "bytes_sent": s["bytes"], "bytes_received": r["bytes"],
            "intact": (s["sha256"] == r["sha256"] and s["bytes"] == r["bytes"]) if check else None,
            "goodput_mbit": r["goodput_mbit"], "goodput_total_mbit": r["goodput_total_mbit"],
            "seconds": r["seconds"]}


def _sink(bind: str, hashing: bool, skip: float) -> int:
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind((bind, 0))
    ls.listen(1)
    print(f"listening {ls.getsockname()[1]}", flush=True)
    conn, _ = ls.accept()
    buf = bytearray(1 << 20)
    view = memoryview(buf)
    h = hashlib.sha256()
    total = 0
    # the goodput window opens at the first read after `skip` that leaves the socket empty (the sink caught up:
    # every byte after it arrived after its time). A sink held up as the window opens reads a backlog of earlier
    # bytes first: counted, they made a 20 Mbit/s link's goodput 1.021 of what the rate allows on a busy machine
    t_first = t_last = None
    first_n, window = 0, None  # the first read's bytes; (time, bytes read by then) where the window opened
    queued = array.array("i", [0])
    while True:
        n = conn.recv_into(buf)
        if not n:
            break
        t_last = time.perf_counter()
        total += n
        if t_first is None:
            t_first, first_n = t_last, n
        if skip > 0 and window is None and t_last >= t_first + skip:
            fcntl.ioctl(conn, termios.FIONREAD, queued)  # only until the window opens: no cost per read after
            if queued[0] == 0:
                window = (t_last, total)
        if hashing:
            h.update(view[:n])
    if t_first is None:  # nothing arrived
        t_first = t_last = 0.0

    def rate(since: float, before: int) -> float:  # the bytes read after `since` over the time to the last read
        return (total - before) * 8 / (t_last - since) / 1e6 if t_last > since else 0.0
    total_rate = rate(t_first, first_n)
    print(json.dumps({"bytes": total, "seconds": t_last - t_first, "goodput_total_mbit": total_rate,
                      "goodput_mbit": (rate(*window) if window else 0.0) if skip > 0 else total_rate,
                      "sha256": h.hexdigest()}))
    return 0


def _source(host: str, port: int, seconds: float | None, nbytes: int | None, hashing: bool) -> int:
    s = socket.create_connection((host, port), timeout=60)
    s.settimeout(None)  # a slow (lossy) link may stall sendall for a long time: that is measured
    h = hashlib.sha256()
    view = memoryview(_PATTERN)
    total = 0
    end = time.perf_counter() + seconds if seconds is not None else None
    while True:
        if end is not None and time.perf_counter() >= end:
            break
        n = _CHUNK if nbytes is None else min(_CHUNK, nbytes - total)
        if n <= 0:
            break
        chunk = view[:n]
        s.sendall(chunk)
        if hashing:
            h.update(chunk)
        total += n
    s.shutdown(socket.SHUT_WR)
    s.recv(1)  # wait for the sink to close: everything was delivered
    s.close()
    print(json.dumps({"bytes": total, "sha256": h.hexdigest()}))
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m pqbench.testbed.probe")
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("sink")
    a.add_argument("--bind", required=True)
    a.add_argument("--no-hash", dest="hashing", action="store_false")
    a.add_argument("--skip", type=float, default=0.0, help="seconds after the first byte left out of goodput")
    b = sub.add_parser("source")
    b.add_argument("--host", required=True)
    b.add_argument("--port", type=int, required=True)
    b.add_argument("--seconds", type=float)
    b.add_argument("--bytes", type=int)
    b.add_argument("--no-hash", dest="hashing", action="store_false")
    args = p.parse_args(argv)
    if args.cmd == "sink":
        return _sink(args.bind, args.hashing, args.skip)
    return _source(args.host, args.port, args.seconds, args.bytes, args.hashing)


if __name__ == "__main__":
    raise SystemExit(main())
