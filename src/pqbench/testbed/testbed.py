"""Testbed: two namespaces joined by one emulated link, torn down whatever happens.

    with Testbed(LinkSpec.symmetric(rtt_ms=31.1, loss=0.01), tcp=TcpKnobs(initcwnd=10)) as tb:
        server = tb.popen("server", ["nginx", ...])
        tb.run("client", ["pqtimer", tb.server_addr, ...])
        tb.counters()["client_to_server"]["packets"]

Everything created is first written to the leftover registry (see registry.py); teardown runs on
normal exit, on exceptions and on SIGINT/SIGTERM (turned into TestbedInterrupted while the testbed
is up). A testbed started `detached` (pqbench net up) stays until `down(name)` or `clean()`; one
whose owner was killed (SIGKILL) is removed by the owner's guardian (lifeline.py) at once, or, if that
was killed too, when the next testbed comes up.
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from pqbench import interrupts
from pqbench.errors import BadInput, MeasurementFailed, MissingCapability
from pqbench.testbed import addressing, lifeline, netns, registry, sched
from pqbench.testbed.backend_netem import NetemBackend, VethBackend, kernel_has_netem
from pqbench.testbed.backend_pqlink import EmulatorOptions, PqlinkBackend
from pqbench.testbed.linkspec import LinkSpec, TcpKnobs
from pqbench.testbed.path import Path

BACKENDS = ("auto", "pqlink", "netem")
REFERENCE_BACKENDS = ("veth",)  # a bare veth pair, no emulation (benchmarks' reference)
SIDES = ("client", "server")
# per-namespace settings: a quiet link (no IPv6 chatter shifting loss patterns) and no TCP metrics
# cache (each connection starts from the route's settings, not from what the previous one learnt)
NAMESPACE_SYSCTLS = {
    "net.ipv6.conf.all.disable_ipv6": "1",
    "net.ipv6.conf.default.disable_ipv6": "1",
    "net.ipv4.tcp_no_metrics_save": "1",
}

_netem_support: bool | None = None


class TestbedInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived while a testbed was up (raised after or during teardown)."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


def require_root() -> None:
    if os.geteuid() != 0:
        raise MissingCapability("network namespaces and TUN devices need root",
                                "run pqbench as root (e.g. sudo pqbench ...)")


def validate_name(name: str) -> str:
    if not re.fullmatch(r"pqb-[a-z0-9]{1,8}", name):
        raise BadInput("name", f"{name!r} must look like pqb-<1 to 8 lowercase letters or digits>")
    return name


class Testbed(Path):
    __test__ = False  # not a pytest test class despite the name
    emulated = True

    def __init__(self, spec: LinkSpec | None = None, *, tcp: TcpKnobs | None = None, backend: str = "auto",
                 emulator: EmulatorOptions | None = None, name: str | None = None, detached: bool = False):
        if backend not in BACKENDS + REFERENCE_BACKENDS:
            raise BadInput("backend", f"{backend!r} is not one of {', '.join(BACKENDS)}")
        self.spec = spec or LinkSpec()
        self.tcp = tcp or TcpKnobs()
        self.requested_backend = backend
        self.emulator = emulator or EmulatorOptions()
        self.name = validate_name(name) if name else None
        self.detached = detached
        self.backend = None
        self.record: dict | None = None
        self.subnet = None
        self.final_counters: dict | None = None
        self._extra_server_addrs: list[str] = []
        self._is_up = False
        self._old_handlers: dict = {}
        self._deferred_signal: int | None = None
        self._tearing_down = False

    # --- names and addresses -----------------------------------------------------------------
    @property
    def client_ns(self) -> str:
        return f"{self.name}-cli"

    @property
    def server_ns(self) -> str:
        return f"{self.name}-srv"

    @property
    def _tag(self) -> str:
        return self.name.split("-", 1)[1]

    @property
    def client_dev(self) -> str:
        return f"pqb{self._tag}-c"

    @property
    def server_dev(self) -> str:
        return f"pqb{self._tag}-s"

    @property
    def client_addr(self) -> str:
        return str(self.subnet.network_address + 1)

    @property
    def server_addr(self) -> str:
        return str(self.subnet.network_address + 2)

    @property
    def server_addrs(self) -> list[str]:
        """The server namespace's addresses: its own first, then those add_server_addresses gave."""
        return [self.server_addr, *self._extra_server_addrs]

    @property
    def run_dir(self):
        return registry.run_dir(self.name)

    @property
    def backend_name(self) -> str | None:
        return self.backend.name if self.backend else None

    def ns(self, side: str) -> str:
        if side not in SIDES:
            raise BadInput("side", f"{side!r} is not client or server")
        return self.client_ns if side == "client" else self.server_ns

    def addr(self, side: str) -> str:
        self.ns(side)
        return self.client_addr if side == "client" else self.server_addr

    # --- running things inside ---------------------------------------------------------------
    def exec_argv(self, side: str, argv: list[str]) -> list[str]:
        return netns.exec_argv(self.ns(side), argv)

    def run(self, side: str, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(self.exec_argv(side, argv), **kwargs)

    def popen(self, side: str, argv: list[str], **kwargs) -> subprocess.Popen:
        """A process inside the namespace, with the CPU priority of measured processes (sched)."""
        with sched.measured(realtime=sched.realtime_safe(argv[0])):
            return subprocess.Popen(self.exec_argv(side, argv), **kwargs)

    def socket(self, side: str, family=socket.AF_INET, type=socket.SOCK_STREAM, proto: int = 0) -> socket.socket:
        return netns.socket_in(self.ns(side), family, type, proto)

    def call(self, side: str, fn, *args, **kwargs):
        """fn(*args) in a thread inside the side's namespace."""
        return netns.call_in(self.ns(side), fn, *args, **kwargs)

    # --- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> "Testbed":
        self._install_signal_handlers()
        sched.boost_session()  # what runs in the testbed comes before other sessions' work
        try:
            self.up()
        except BaseException:
            self._exit_cleanup(raising=True)
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._exit_cleanup(raising=exc_type is not None)
        return False

    def _exit_cleanup(self, *, raising: bool) -> None:
        try:
            self.down()
        finally:
            sched.release_session()
            deferred = self._deferred_signal
            self._restore_signal_handlers()
            if deferred is not None and not raising:
                raise TestbedInterrupted(deferred)

    def up(self) -> "Testbed":
        """Creates namespaces and the link. On failure (or SIGINT/SIGTERM meanwhile) everything
        made so far is removed; outside a with-block the signal handlers last only for this call."""
        require_root()
        temporary = not self._old_handlers
        if temporary:
            self._install_signal_handlers()
        try:
            self._up()
        except BaseException:
            self.down()
            raise
        finally:
            if temporary:
                self._restore_signal_handlers()
        self._is_up = True
        return self

    def _up(self) -> None:
        # Every new testbed first removes those of killed pqbench processes, so a `kill -9` costs
        # nothing beyond the next start; said on stderr whoever the caller is, as it changes the machine.
        reaped = registry.describe_reaped(registry.reap_stale())
        if reaped:
            print(f"[pqbench] {reaped}", file=sys.stderr, flush=True)
        if not self.detached:
            lifeline.ensure()  # before the record: whatever this process makes goes when it dies, even by SIGKILL
        with registry.locked():
            records = registry.all_records()
            if self.name is None:
                self.name = registry.new_name()
                while self.name in records or netns.exists(f"{self.name}-cli"):
                    self.name = registry.new_name()
            elif self.name in records or netns.exists(self.client_ns):
                raise BadInput("name", f"a testbed called {self.name} already exists (pqbench net down {self.name})")
            claimed = [r["subnet"] for r in records.values() if r.get("subnet")]
            self.subnet = addressing.pick_subnet(claimed)
            self.record = {
                "name": self.name, "subnet": str(self.subnet), "created": time.time(),
                "owner": registry.proc_ref(os.getpid()), "detached": self.detached,
                "namespaces": [self.client_ns, self.server_ns], "host_devices": [], "processes": [],
                "client": {"netns": self.client_ns, "dev": self.client_dev, "addr": self.client_addr},
                "server": {"netns": self.server_ns, "dev": self.server_dev, "addr": self.server_addr},
                "backend": None, "spec": self.spec.to_dict(), "tcp": self.tcp.to_dict(),
            }
            registry.write_record(self.name, self.record)  # before anything exists
            # with a Ctrl-C deferred until both exist: one that came as `ip netns add` started let the teardown look
            # before the namespace was there, and `ip` made it after (CI: a client namespace left with no record)
            with interrupts.deferred():
                for ns in (self.client_ns, self.server_ns):
                    netns.add(ns)
        for ns in (self.client_ns, self.server_ns):
            netns.ip("link", "set", "lo", "up", netns=ns)
            netns.write_sysctls(ns, NAMESPACE_SYSCTLS)
        self.backend = self._choose_backend()
        self.record["backend"] = self.backend.name
        registry.write_record(self.name, self.record)
        self.backend.create(self, self.spec, detached=self.detached)
        for side in SIDES:
            ns, dev = self.ns(side), self.client_dev if side == "client" else self.server_dev
            peer = self.server_addr if side == "client" else self.client_addr
            netns.ip("link", "set", "dev", dev, "mtu", str(self.spec.mtu), "up", netns=ns)
            netns.ip("addr", "add", f"{self.addr(side)}/32", "peer", f"{peer}/32", "dev", dev, netns=ns)
        self._apply_routes()

    def _choose_backend(self):
        global _netem_support
        want = self.requested_backend
        if want == "veth":
            return VethBackend()
        if want == "auto" and self.spec.needs_pqlink:
            want = "pqlink"  # a trace or CoDel/PIE: only pqlink emulates them
        if want == "auto":
            if _netem_support is None:
                _netem_support = kernel_has_netem(self.client_ns)
            want = "netem" if _netem_support else "pqlink"
        if want == "netem":
            if _netem_support is None:
                _netem_support = kernel_has_netem(self.client_ns)
            if not _netem_support:
                raise MissingCapability("this kernel has no netem qdisc (sch_netem)",
                                        "use --backend pqlink (the default here), or load sch_netem")
            return NetemBackend()
        return PqlinkBackend(self.emulator)

    def add_server_addresses(self, count: int) -> list[str]:
        """count more addresses in the server namespace, each reached from the client over the same
        emulated link (the origins of a multi-origin page, the hosts of a local population). They come
        from the testbed's own /16 (10.x.1.1, …), so nothing outside it is ever addressed. Returns them."""
        self._require_up()
        first = len(self._extra_server_addrs)
        if first + count > 250 * 254:
            raise BadInput("count", f"at most {250 * 254} addresses beside the server's own")
        new = [str(self.subnet.network_address + 256 * (1 + i // 254) + 1 + i % 254)
               for i in range(first, first + count)]
        for a in new:
            netns.ip("addr", "add", f"{a}/32", "dev", self.server_dev, netns=self.server_ns)
        self._extra_server_addrs += new
        self.record["server"]["extra_addrs"] = list(self._extra_server_addrs)
        registry.write_record(self.name, self.record)
        self._apply_routes(new)
        return new

    def _apply_routes(self, only: list[str] | None = None) -> None:
        """The routes to the peer (and to the server's other addresses): TCP's knobs ride on them."""
        for side in SIDES:
            ns = self.ns(side)
            dev = self.client_dev if side == "client" else self.server_dev
            peers = [self.client_addr] if side == "server" else self.server_addrs
            for peer in (peers if only is None else [p for p in peers if p in only]):
                self._route(ns, dev, peer, side)

    def _route(self, ns: str, dev: str, peer: str, side: str) -> None:
        cp = netns.ip("route", "replace", f"{peer}/32", "dev", dev, "src", self.addr(side),
                      *self.tcp.route_args(), netns=ns, check=False)
        if cp.returncode != 0:
            if self.tcp.congctl and "congctl" in " ".join(self.tcp.route_args()):
                avail = netns.read_sysctl(ns, "net.ipv4.tcp_available_congestion_control")
                if self.tcp.congctl not in avail.split():
                    raise BadInput("congctl", f"{self.tcp.congctl!r} is not available here (available: {avail})")
            raise MeasurementFailed(f"setting the route in {ns} failed ({cp.returncode}): {cp.stderr.strip()}")

    def note_process(self, pid: int) -> None:
        """Registers a process this testbed started, so clean can stop it after a crash."""
        self.record["processes"].append(registry.proc_ref(pid))
        registry.write_record(self.name, self.record)

    def down(self) -> dict | None:
        """Stops the link and removes namespaces, devices and processes. Idempotent."""
        if self.record is None or self._tearing_down:
            return self.final_counters
        self._tearing_down = True
        try:
            if self.backend is not None:
                try:
                    self.final_counters = self.backend.destroy()
                finally:
                    self.backend = None
        finally:
            registry.teardown(self.record)
            self.record = None
            self._is_up = False
        return self.final_counters

    # --- live changes and counters -------------------------------------------------------------
    def _require_up(self):
        if not self._is_up or self.backend is None:
            raise MeasurementFailed("the testbed is not up")

    def reconfigure(self, spec: LinkSpec) -> None:
        """Applies a new LinkSpec without tearing the link down (MTU included)."""
        self._require_up()
        if spec.mtu != self.spec.mtu:
            for side in SIDES:
                dev = self.client_dev if side == "client" else self.server_dev
                netns.ip("link", "set", "dev", dev, "mtu", str(spec.mtu), netns=self.ns(side))
        self.backend.reconfigure(spec)
        self.spec = spec
        self.record["spec"] = spec.to_dict()
        registry.write_record(self.name, self.record)

    def set_tcp(self, tcp: TcpKnobs) -> None:
        """New per-route TCP knobs; they apply to connections opened from now on."""
        self._require_up()
        self.tcp = tcp
        self._apply_routes()
        self.record["tcp"] = tcp.to_dict()
        registry.write_record(self.name, self.record)

    def congestion_control(self) -> dict:
        """{"client": name, "server": name}: the congestion control each endpoint's connections to the
        other use, as the kernel decides it: the route's congctl where one is set (it applies to
        connections opened and accepted alike), else the namespace's default, which a new namespace
        takes from the host (bbr here, where the published studies ran cubic)."""
        self._require_up()
        out = {}
        for side in SIDES:
            ns = self.ns(side)
            peer = self.server_addr if side == "client" else self.client_addr
            route = netns.ip("route", "show", f"{peer}/32", netns=ns, check=False).stdout.split()
            named = route[route.index("congctl") + 1:] if "congctl" in route else []
            named = [w for w in named if w != "lock"][:1]
            out[side] = named[0] if named else netns.read_sysctl(ns, "net.ipv4.tcp_congestion_control")
        return out

    def counters(self) -> dict:
        """Per-direction counters: packets/bytes forwarded, losses, queue drops, lateness..."""
        self._require_up()
        c = self.backend.counters()
        if isinstance(self.backend, PqlinkBackend):
            drops = self.backend.device_drops(self)
            for k in ("client_to_server", "server_to_client"):
                c[k]["device_drops"] = drops[k]
        return c

    def reset_counters(self) -> None:
        """Zeroes the link's counters; with pqlink also restarts the loss and jitter sequences from
        the seed, so each measurement (cell) meets the seed's loss pattern from its start."""
        self._require_up()
        self.backend.reset_counters()

    def info(self) -> dict:
        return {"name": self.name, "backend": self.backend_name, "subnet": str(self.subnet),
                "client": {"netns": self.client_ns, "dev": self.client_dev, "addr": self.client_addr},
                "server": {"netns": self.server_ns, "dev": self.server_dev, "addr": self.server_addr},
                "spec": self.spec.to_dict(), "tcp": self.tcp.to_dict(), "link": self.spec.describe(),
                "run_dir": str(self.run_dir),
                # how the emulator ran is part of the provenance (real-time priority, spin, keep-awake)
                "emulator": dataclasses.asdict(self.emulator) if self.backend_name == "pqlink" else None,
                # the CPU priority of what runs in it (slice, nice; the session's against others)
                "scheduling": sched.settings()}

    # --- signals -----------------------------------------------------------------------------
    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def handler(signum, frame):
            if self._tearing_down:
                self._deferred_signal = signum  # finish the teardown first
                return
            raise TestbedInterrupted(signum)

        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old_handlers[sig] = signal.signal(sig, handler)

    def _restore_signal_handlers(self) -> None:
        for sig, old in self._old_handlers.items():
            signal.signal(sig, old)
        self._old_handlers = {}
        self._deferred_signal = None


def running() -> list[dict]:
    """Records of every testbed in the registry."""
    return [r for r in registry.all_records().values() if r.get("namespaces")]


def down(name: str) -> dict | None:
    """Tears down a testbed by name (e.g. one left running by `pqbench net up`)."""
    validate_name(name)
    require_root()
    record = registry.read_record(name)
    if record is None:
        if netns.exists(f"{name}-cli") or netns.exists(f"{name}-srv"):
            registry.teardown({"name": name, "namespaces": [f"{name}-cli", f"{name}-srv"]})
            return None
        raise BadInput("name", f"no testbed called {name} (running: "
                               f"{', '.join(r['name'] for r in running()) or 'none'})")
    try:
        # a pqlink that ended before this has its counters in its stats file, or lost them: an error
        return PqlinkBackend.attach(record).destroy() if record.get("backend") == "pqlink" else None
    finally:
        registry.teardown(record)  # whatever became of the counters
