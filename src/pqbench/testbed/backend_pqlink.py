"""Backend `pqlink`: our userspace emulator, one process per link, a TUN device in each namespace."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from pqbench.errors import MeasurementFailed, MissingCapability
from pqbench.paths import native_binary
from pqbench.testbed import middlebox, netns, registry, traces
from pqbench.testbed.linkspec import Direction, LinkSpec

READY_TIMEOUT_S = 10.0
# SIGTERM to exit takes pqlink a few ms; beside busy processes its threads may wait long for a CPU, and
# its final counters are worth the wait (they exist only once it exits)
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class EmulatorOptions:
    """How pqlink runs (not what the link does): real-time priority, spin before deadlines,
    capture. fifo_priority 0 = normal scheduling. capture_dir: write link-c2s.pcap,
    link-s2c.pcap (what crossed the link) and drops.log (every drop) there; it outlives the testbed. The defaults cut median lateness from ~45 us
    to ~1 us on a 2-core VM (bench/bench_pqlink.py) at the cost of <= 50 us busy-wait per deadline."""

    fifo_priority: int = 50
    # PQBENCH_PQLINK_SPIN_US: for paired benchmarks of the spin's cost to the CPU (bench/bench_grids.py spin0)
    spin_us: int = int(os.environ.get("PQBENCH_PQLINK_SPIN_US", 50))
    # one idle-priority spinner per CPU: a halted vCPU wakes 50-150 us late for every process on the
    # path; with them the handshake p95 at 31.1 ms fell from 67.4 to 65.4 ms (p50 -0.13 ms)
    keep_awake: int = int(os.environ.get("PQBENCH_PQLINK_KEEP_AWAKE", os.cpu_count() or 1))  # (env: benchmarks)
    capture_dir: str | None = None
    snaplen: int = 65535
    # connections the wire recorder keeps (PqlinkBackend.flows); 0 turns it off (its cost: bench_pqlink.py)
    flows: int = 65536


def direction_params(prefix: str, d: Direction, seed: int) -> list[str]:
    """pqlink's key=value parameters for one direction (prefix 'c2s' or 's2c')."""
    kv = {
        "delay_ns": round(d.delay_ms * 1e6),
        "jitter_ns": round(d.jitter_ms * 1e6),
        "reorder": int(d.reorder),
        "rate_bps": round(d.rate_mbit * 1e6) if d.rate_mbit is not None else 0,
        "overhead": d.overhead_bytes,
        "queue_packets": d.queue_packets,
        "queue_bytes": d.queue_bytes or 0,
        "seed": seed,
    }
    kv["trace"] = traces.whitespace_free(traces.resolve(d.trace)) if d.trace is not None else "none"
    q = d.aqm
    kv["aqm"] = q.kind
    kv["ecn"] = int(q.ecn)
    # every parameter of the discipline, defaults included, so a live change back to a default applies
    if q.kind == "codel":
        kv.update(codel_target_ns=round(q.value("target") * 1e6), codel_interval_ns=round(q.value("interval") * 1e6))
    elif q.kind == "pie":
        kv.update(pie_target_ns=round(q.value("target") * 1e6), pie_tupdate_ns=round(q.value("tupdate") * 1e6),
                  pie_max_burst_ns=round(q.value("max_burst") * 1e6), pie_alpha=repr(q.value("alpha")),
                  pie_beta=repr(q.value("beta")))
    kv.update(d.middlebox.params() if d.middlebox is not None else middlebox.OFF_PARAMS)
    loss = d.loss
    if loss.model == "gemodel":
        kv.update(loss_model="gemodel", ge_p=repr(loss.p), ge_r=repr(loss.r), ge_1h=repr(loss.one_minus_h),
                  ge_1k=repr(loss.one_minus_k))
    elif loss.model == "bernoulli":
        kv.update(loss_model="bernoulli", loss=repr(loss.p))
    else:
        kv.update(loss_model="none", loss=0)
    return [f"{prefix}.{k}={v}" for k, v in kv.items()]


def link_params(spec: LinkSpec) -> list[str]:
    return (direction_params("c2s", spec.client_to_server, spec.seed)
            + direction_params("s2c", spec.server_to_client, spec.seed))


def control(path: str | Path, command: str, *, timeout: float = 10.0) -> dict:
    """Sends one command line to pqlink's control socket and returns its JSON answer."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(path))
            s.sendall(command.encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError as e:
        raise MeasurementFailed(f"pqlink control socket {path}: {e}") from None
    try:
        reply = json.loads(data)
    except json.JSONDecodeError:
        raise MeasurementFailed(f"pqlink control socket {path}: unreadable answer {data[:200]!r}") from None
    if not reply.get("ok"):
        raise MeasurementFailed(f"pqlink rejected `{command}`: {reply.get('error')}")
    return reply


def normalise(d: dict) -> dict:
    """pqlink's per-direction counters under the names the rest of pqbench uses."""
    return {
        "packets": d["forwarded_packets"],
        "bytes": d["forwarded_bytes"],
        "offered_packets": d["rx_packets"],
        "offered_bytes": d["rx_bytes"],
        "lost": d["lost"],
        "queue_drops": d["queue_drops"],
        "memory_drops": d["memory_drops"],
        "write_errors": d["write_errors"],
        "peak_queue_packets": d["peak_queue_packets"],
        "peak_queue_bytes": d["peak_queue_bytes"],
        "max_packet_bytes": d["max_packet_bytes"],
        "in_flight": d["in_flight"],
        "lateness_us": d["lateness_us"],
        # the queue's discipline and the queueing delay delivered packets met (native/pqlink/README.md)
        "aqm_drops": d.get("aqm_drops"),
        "ecn_marks": d.get("ecn_marks"),
        "sojourn_us": d.get("sojourn_us"),
        # the trace replayed and the phase restarts since the last reset: {file, lines, period_ms,
        # bytes_per_opportunity, restarts, first_offset_ms, last_offset_ms}, or None without a trace
        "trace": d.get("trace"),
    }


def end_at_once(pid: int) -> None:
    """SIGKILL, and the CPU to exit: real-time priority (never runs the process's own code again, as the
    kill is pending), or else normal priority outside the lowest-weight CPU group of a keep-awake helper."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    try:
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(1))
        return
    except OSError:
        pass
    try:
        os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
        Path(f"/proc/{pid}/autogroup").write_text("0")
    except OSError:
        pass


def _ended(code: int) -> str:
    """A process's end as its exit code says: killed by SIGKILL, or exit status 1."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"


class PqlinkBackend:
    name = "pqlink"

    def __init__(self, options: EmulatorOptions | None = None):
        self.options = options or EmulatorOptions()
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None
        self.control_path: Path | None = None
        self.stats_path: Path | None = None
        self.final: dict | None = None
        self.testbed: str | None = None  # the testbed's name, to name the link in errors
        self.client_ns: str | None = None  # to find pqlink's helper processes (their command line is its)
        self.ready = False  # came up: from then on its final counters are due
        self._ref: dict | None = None  # an attached pqlink's pid and start time (pids are reused)

    @staticmethod
    def available() -> tuple[bool, str]:
        binary = native_binary("pqlink")
        if not binary.exists():
            return False, f"{binary} is not built (run `make native`)"
        if not os.path.exists("/dev/net/tun"):
            return False, "/dev/net/tun is missing (modprobe tun)"
        return True, ""

    def create(self, tb, spec: LinkSpec, *, detached: bool) -> tuple[str, str]:
        """Starts pqlink; returns the (client, server) device names once both TUNs exist."""
        ok, why = self.available()
        if not ok:
            raise MissingCapability("the pqlink emulator cannot run", why)
        rd = Path(tb.run_dir)
        self.testbed, self.client_ns = tb.name, tb.client_ns
        self.control_path = rd / "pqlink.sock"
        self.stats_path = rd / "pqlink-stats.json"
        argv = [str(native_binary("pqlink")), "--client-netns", tb.client_ns, "--server-netns", tb.server_ns,
                "--client-dev", tb.client_dev, "--server-dev", tb.server_dev,
                "--control", str(self.control_path), "--stats", str(self.stats_path)]
        o = self.options
        if o.fifo_priority:
            argv += ["--fifo", str(o.fifo_priority)]
        if o.spin_us:
            argv += ["--spin-us", str(o.spin_us)]
        if o.keep_awake:
            argv += ["--keep-awake", str(min(o.keep_awake, 64))]
        argv += ["--flows", str(o.flows)]
        if o.capture_dir:
            cap = Path(o.capture_dir)
            cap.mkdir(parents=True, exist_ok=True)
            argv += ["--pcap", str(cap / "link"), "--snaplen", str(o.snaplen), "--drop-log", str(cap / "drops.log")]
        if not detached:
            argv.append("--die-with-parent")  # a killed pqbench takes the devices along
        argv += link_params(spec)
        out = open(rd / "pqlink.out", "wb")
        err = open(rd / "pqlink.log", "wb")
        try:
            # Own process group: Ctrl-C reaches pqbench, which then stops pqlink in order. Not an own
            # session: with autogroup scheduling a session is a CPU group, and pqlink's control thread
            # (not real-time) must not wait behind pqbench's raised session (sched). Its keep-awake
            # spinners are processes in sessions of their own at the lowest weight (native/pqlink/link.c).
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         process_group=0, close_fds=True)
        finally:
            out.close()
            err.close()
        self.pid = self.proc.pid
        tb.note_process(self.pid)
        self._wait_ready(rd)
        self.ready = True
        return tb.client_dev, tb.server_dev

    def _wait_ready(self, rd: Path) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            text = (rd / "pqlink.out").read_text(errors="replace")
            if '"event":"ready"' in text:
                return
            if self.proc.poll() is not None:
                log = (rd / "pqlink.log").read_text(errors="replace").strip()
                raise MeasurementFailed(f"pqlink exited with {self.proc.returncode} during start-up: {log}")
            time.sleep(0.005)
        raise MeasurementFailed(f"pqlink did not get ready within {READY_TIMEOUT_S} s (log: {rd / 'pqlink.log'})")

    @classmethod
    def attach(cls, record: dict) -> "PqlinkBackend":
        """Reconnects to the pqlink of a running testbed from its registry record."""
        b = cls()
        rd = registry.run_dir(record["name"])
        b.testbed = record["name"]
        b.client_ns = (record.get("client") or {}).get("netns") or f"{record['name']}-cli"
        b.control_path = rd / "pqlink.sock"
        b.stats_path = rd / "pqlink-stats.json"
        procs = record.get("processes", [])
        b._ref = procs[0] if procs else None
        b.pid = procs[0]["pid"] if procs else None
        b.ready = b.pid is not None  # its record outlived the start (a failed start removes it)
        return b

    def _control(self, command: str) -> dict:
        """control(), and when pqlink cannot answer because it has died, an error that says so (a crashed
        emulator takes its devices, so the link is gone: nothing more can be measured on this testbed)."""
        try:
            return control(self.control_path, command)
        except MeasurementFailed:
            died = self.died()
            if died:
                raise MeasurementFailed(f"the emulator of testbed {self.testbed} died ({died}): its link is gone") \
                    from None
            raise

    def died(self) -> str | None:
        """How pqlink ended, if it did while it should be running (None: it runs, or never started)."""
        if self.proc is not None:
            code = self.proc.poll()
            return None if code is None else f"pqlink {_ended(code)}"
        if self._ref is not None and self.pid is not None and not registry.is_alive(self._ref):
            return "pqlink ended"
        return None

    def reconfigure(self, spec: LinkSpec) -> None:
        self._control("set " + " ".join(link_params(spec)))

    def counters(self) -> dict:
        stats = self._control("stats")["stats"]
        return {"client_to_server": normalise(stats["c2s"]), "server_to_client": normalise(stats["s2c"]),
                "emulator": {"pid": stats["pid"], "sched_fifo": stats["sched_fifo"], "spin_us": stats["spin_us"],
                             "keep_awake": stats.get("keep_awake", 0)}}

    def reset_counters(self) -> None:
        """Zeroes the counters and empties the wire recorder's table."""
        self._control("reset")

    def flows(self, path: str | Path) -> list[dict]:
        """The wire recorder's connections since the last reset (native/pqlink/README.md, "Wire
        recorder"): pqlink writes them to path (JSON lines, mode 0600), read back here. Times are
        pqlink's CLOCK_MONOTONIC ns."""
        path = Path(path).resolve()  # pqlink's working directory is not ours
        self._control(f"flows {path}")
        try:
            lines = path.read_text().splitlines()
        except OSError as e:
            raise MeasurementFailed(f"reading pqlink's flow record {path}: {e.strerror}") from None
        try:
            return [json.loads(line) for line in lines if line]
        except json.JSONDecodeError as e:
            raise MeasurementFailed(f"pqlink's flow record {path} is not JSON lines: {e}") from None

    def destroy(self) -> dict | None:
        """Stops pqlink (SIGTERM: it writes its final counters and removes its devices), waits until it
        and its keep-awake helpers are gone, and returns the final counters (None only for a pqlink
        that never came up). Counters that cannot be had raise MeasurementFailed naming the testbed,
        after everything has stopped: a lost record of what the link did is an error, never None."""
        if self.pid is None:
            return self.final
        died = self.died()
        pid, self.pid = self.pid, None
        how = self._stop(pid)
        self._end_helpers()
        if not self.ready:
            return None  # the start failed: that error is the one to report
        try:
            stats = json.loads(self.stats_path.read_text())
            self.final = {"client_to_server": normalise(stats["c2s"]),
                          "server_to_client": normalise(stats["s2c"])}
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
            if died:  # what the user must hear first: the emulator crashed (the counters went with it)
                raise MeasurementFailed(f"the emulator of testbed {self.testbed} died ({died}): its link and its "
                                        "final counters are gone") from None
            raise MeasurementFailed(f"the link of testbed {self.testbed}: pqlink {how} without its final counters "
                                    f"({self.stats_path}: {getattr(e, 'strerror', None) or e})") from None
        return self.final

    def _stop(self, pid: int) -> str:
        """SIGTERM, STOP_TIMEOUT_S for pqlink to exit, then SIGKILL; waits until it has ended and says how."""
        if self.proc is not None:
            if self.proc.poll() is not None:
                return f"had died before ({_ended(self.proc.returncode)})"
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
                return f"ended (exit status {self.proc.returncode})"
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return f"did not stop within {STOP_TIMEOUT_S:g} s of SIGTERM and was killed"
        # an attached pqlink (net up's) is no child of ours: known by its pid and start time
        if not registry.is_alive(self._ref):
            return "had already ended"
        if not registry.kill(self._ref, grace=STOP_TIMEOUT_S):
            raise MeasurementFailed(f"the link of testbed {self.testbed}: pqlink (pid {pid}) survived SIGKILL")
        return "ended"

    def _end_helpers(self) -> None:
        """Waits until no process of this pqlink remains. A pqlink that exits reaps its keep-awake
        helpers; a killed one leaves them to die of their parent-death signal, but at idle priority
        beside busy processes they may wait seconds for the CPU to do so: raised to real time with
        the SIGKILL pending, they only exit."""
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while True:
            left = [p for p in registry.pqlink_pids() if self.client_ns in registry.pqlink_netns(p)]
            if not left:
                return
            if time.monotonic() > deadline:
                raise MeasurementFailed(f"the link of testbed {self.testbed}: pqlink processes {left} outlived "
                                        f"SIGKILL for {STOP_TIMEOUT_S:g} s")
            for p in left:
                end_at_once(p)
            time.sleep(0.01)

    def device_drops(self, tb) -> dict:
        """Packets the kernel dropped on the TUN devices before pqlink read them (should be 0)."""
        def tx_dropped(ns, dev):
            cp = netns.ip("-s", "-j", "link", "show", "dev", dev, netns=ns, check=False)
            try:
                return json.loads(cp.stdout)[0]["stats64"]["tx"]["dropped"]
            except (json.JSONDecodeError, IndexError, KeyError):
                return None
        return {"client_to_server": tx_dropped(tb.client_ns, tb.client_dev),
                "server_to_client": tx_dropped(tb.server_ns, tb.server_dev)}
