"""Which local ports the client namespace's connections to the server use, from the kernel's own tables.

A browser does not say which local port a connection used; the wire record (pqbench.measure.wire) is keyed
by it. A worker lists its namespace's sockets to the server before a page load and watches them while it runs:
the sockets a process held that were not there before are that load's connections. Each is known by its inode
(ports alone do not tell: the kernel hands a closed connection's local port out again at once for the same
server), and it is looked for while the load runs, not only after it: a slower machine's Chromium had closed its
0-RTT load's connection before the load's end was seen."""

from __future__ import annotations

import socket
import struct
import threading

from pqbench.testbed import sched

TABLES = {"tcp": ("/proc/self/net/tcp", "/proc/self/net/tcp6"), "udp": ("/proc/self/net/udp", "/proc/self/net/udp6")}
WATCH_S = 0.001  # how often a watch looks at the tables: a connection lives at least a round trip


def _addr(hexaddr: str) -> tuple[str, int]:
    host, port = hexaddr.split(":")
    if len(host) == 8:
        return socket.inet_ntop(socket.AF_INET, struct.pack("<I", int(host, 16))), int(port, 16)
    raw = bytes.fromhex(host)  # IPv6: four 32-bit words, each in host order
    return socket.inet_ntop(socket.AF_INET6, b"".join(raw[k:k + 4][::-1] for k in range(0, 16, 4))), int(port, 16)


def connections(proto: str, remote_hosts: set[str]) -> set[tuple[int, str, int, str]]:
    """(local port, remote host, remote port, inode) of this namespace's proto sockets to any of remote_hosts; the
    inode is "0" for one no process holds any more (TIME_WAIT)."""
    out = set()
    for path in TABLES[proto]:
        try:
            lines = open(path).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            (_, lport), (rhost, rport) = _addr(fields[1]), _addr(fields[2])
            if rhost.removeprefix("::ffff:") in remote_hosts and rport:
                out.add((lport, rhost.removeprefix("::ffff:"), rport, fields[9]))
    return out


def opened(before: set, seen: set) -> set[tuple[int, str, int]]:
    """(local port, remote host, remote port) of the sockets a process held in `seen` that `before` lacked."""
    inodes = {c[3] for c in before}
    return {c[:3] for c in seen if c[3] != "0" and c[3] not in inodes}


class Watch:
    """with Watch(proto, hosts, before) as w: ... — w.seen: the sockets to hosts listed while the block ran (at its
    start and end, and every WATCH_S until a socket not in `before` showed: the load's first connection, which a
    browser may close before the load ends; its other connections stay in its pool, and a look at the end finds
    them). Looking no longer than that keeps the watch off the CPU the browser needs."""

    def __init__(self, proto: str, remote_hosts: set[str], before: set):
        self.proto, self.hosts, self.before = proto, remote_hosts, before
        self.seen: set = set()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._look, name="pqbench-socket-watch", daemon=True)

    def __enter__(self) -> "Watch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        self.seen |= connections(self.proto, self.hosts)

    def _look(self) -> None:
        sched.leave_realtime()  # the worker runs real-time; its watch must never take a CPU from the browser it times
        while not self._done.wait(WATCH_S):
            self.seen |= connections(self.proto, self.hosts)
            if opened(self.before, self.seen):
                return
