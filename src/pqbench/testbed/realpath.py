"""The host's own network as the path between a client and a server: nothing emulated, nothing to
configure, no emulator floor to calibrate; the path is measured instead (connect_rtt, before and after
each cell). It is a Path beside the Testbed (pqbench.testbed.path), the one that is not emulated.

`netns` puts the side named in it inside an existing namespace rather than the host's: tests run
targets from a testbed's client namespace (the "real" path is then the emulated link), and a user can
measure from a namespace of their own (a VRF, a VPN)."""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import time
from typing import Callable

from pqbench import stats
from pqbench.errors import BadInput
from pqbench.testbed import lifeline, netns as nsmod, registry, sched
from pqbench.testbed.linkspec import LinkSpec, TcpKnobs
from pqbench.testbed.path import Path

CONNECT_TIMEOUT_S = 3.0


class RealPath(Path):
    emulated = False
    backend = None  # no emulator: no counters, no wire record
    backend_name = "real"  # as provenance names it

    def __init__(self, *, netns: dict[str, str] | None = None, bind: str | None = None):
        """netns: side -> an existing namespace that side runs in (default: the host's). bind: the
        server side's address (`pqbench serve`); the client side lets the kernel choose."""
        self.netns = dict(netns or {})
        self.bind = bind
        self.spec = LinkSpec()
        self.tcp = TcpKnobs()
        self.name = "real path"
        self._procs: list[subprocess.Popen] = []

    def __enter__(self) -> "RealPath":
        for side, ns in self.netns.items():
            if not nsmod.exists(ns):
                raise BadInput("--netns", f"there is no network namespace {ns!r} (`ip netns list` shows them)")
        return self

    def __exit__(self, *exc) -> bool:
        for proc in self._procs:  # what a crash left running; servers and clients stop their own first
            registry.kill_child(proc)
        return False

    def ns(self, side: str) -> str | None:
        return self.netns.get(side)

    def addr(self, side: str) -> str:
        return self.bind if side == "server" and self.bind else ""

    server_addr = property(lambda self: self.bind or "")

    def _argv(self, side: str, argv: list[str]) -> list[str]:
        ns = self.ns(side)
        return nsmod.exec_argv(ns, argv) if ns else argv

    def popen(self, side: str, argv: list[str], **kw) -> subprocess.Popen:
        """A process in the side, with the CPU priority of measured processes (sched), as in a testbed: at normal
        priority, an sshd `pqbench serve` started forked each connection into a session of its own (an autogroup
        at nice 0) that beside busy pqbench sessions at nice -20 did not finish a key exchange in 5 s."""
        with sched.measured(realtime=sched.realtime_safe(argv[0])):
            proc = lifeline.popen(self._argv(side, argv), **kw)  # dies with us, even by SIGKILL
        self._procs.append(proc)
        return proc

    def run(self, side: str, argv: list[str], **kw) -> subprocess.CompletedProcess:
        return subprocess.run(self._argv(side, argv), **kw)

    def socket(self, side: str, family=socket.AF_INET, type=socket.SOCK_STREAM, proto: int = 0) -> socket.socket:
        ns = self.ns(side)
        return nsmod.socket_in(ns, family, type, proto) if ns else socket.socket(family, type, proto)

    def note_process(self, pid: int) -> None:
        pass  # popen keeps them

    def reconfigure(self, spec: LinkSpec) -> None:
        if spec != LinkSpec():
            raise BadInput("link", f"a real path cannot be emulated ({spec.describe()}): targets replace the "
                                   "link axes (rtt, loss, rate, mtu, initcwnd, congctl)")

    def set_tcp(self, tcp: TcpKnobs) -> None:
        if tcp != TcpKnobs():
            raise BadInput("tcp", "a real path keeps the host's TCP settings (initcwnd and congctl are testbed axes)")

    def reset_counters(self) -> None:
        pass

    def counters(self) -> dict:
        return {}

    def congestion_control(self) -> dict:
        """The client's default congestion control (the server's is the server's business)."""
        key = "net.ipv4.tcp_congestion_control"
        ns = self.netns.get("client")
        value = nsmod.read_sysctl(ns, key) if ns else open("/proc/sys/" + key.replace(".", "/")).read().strip()
        return {"client": value, "server": None}

    def info(self) -> dict:
        return {"name": self.name, "backend": self.backend_name, "netns": self.netns or None, "bind": self.bind,
                "link": "the host's network (measured, not emulated)"}


@dataclasses.dataclass
class PathRtt:
    """TCP-connect times to a target: what replaces the emulator's calibration on a real path."""
    n: int
    ok: int
    p5_ms: float | None
    p50_ms: float | None
    p95_ms: float | None
    spread_ms: float | None  # p95 - p5
    errors: list[str]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def connect_rtt(new_socket: Callable[[], socket.socket], ip: str, port: int, n: int = 10,
                pause_s: float = 0.05) -> PathRtt:
    """n TCP connects to ip:port, each from a socket new_socket() opens (in one side of a path), one at a
    time with a pause between; each is closed at once. A connect takes one round trip (SYN, SYN-ACK) plus
    the kernel's and Python's own microseconds."""
    times, errors = [], []
    for k in range(n):
        s = new_socket()
        s.settimeout(CONNECT_TIMEOUT_S)
        t0 = time.perf_counter_ns()
        try:
            s.connect((ip, port))
            times.append((time.perf_counter_ns() - t0) / 1e6)
        except OSError as e:
            errors.append(type(e).__name__ if isinstance(e, TimeoutError) else (e.strerror or str(e)))
        finally:
            s.close()
        if k + 1 < n:
            time.sleep(pause_s)
    if not times:
        return PathRtt(n, 0, None, None, None, None, sorted(set(errors)))
    v = sorted(times)
    q = {p: stats.percentile(v, p) for p in (5, 50, 95)}
    return PathRtt(n, len(v), q[5], q[50], q[95], q[95] - q[5], sorted(set(errors)))
