"""Which local ports the client namespace's connections to the server use, from the kernel's own tables.

A browser does not say which local port a connection used; the wire record (pqbench.measure.wire) is keyed
by it. A worker lists its namespace's sockets to the server before and after a page load: the new ones are
that load's connections (a browser keeps them open in its pool until its context is closed)."""

from __future__ import annotations

import socket
import struct

TABLES = {"tcp": ("/proc/self/net/tcp", "/proc/self/net/tcp6"), "udp": ("/proc/self/net/udp", "/proc/self/net/udp6")}


def _addr(hexaddr: str) -> tuple[str, int]:
    host, port = hexaddr.split(":")
    if len(host) == 8:
        return socket.inet_ntop(socket.AF_INET, struct.pack("<I", int(host, 16))), int(port, 16)
    raw = bytes.fromhex(host)  # IPv6: four 32-bit words, each in host order
    return socket.inet_ntop(socket.AF_INET6, b"".join(raw[k:k + 4][::-1] for k in range(0, 16, 4))), int(port, 16)


def connections(proto: str, remote_hosts: set[str]) -> set[tuple[int, str, int]]:
    """(local port, remote host, remote port) of this namespace's proto sockets to any of remote_hosts."""
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
                out.add((lport, rhost.removeprefix("::ffff:"), rport))
    return out
