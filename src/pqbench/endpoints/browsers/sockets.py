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


def connections(proto: str, remote_hosts: set[str]) -> set[tuple[int, str, int, str]]:
    """(local port, remote host, remote port, inode) of this namespace's proto sockets to any of remote_hosts; the
    inode is "0" for a socket no process holds any more (TIME_WAIT)."""
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


def opened(before: set, after: set) -> set[tuple[int, str, int]]:
    """(local port, remote host, remote port) of the connections opened between two looks: a socket a process holds
    that was not there before (by its inode: the kernel hands a closed connection's local port out again at once
    for the same server, and a slower machine's Chromium got one, so ports alone mistook its new connection for the
    old one), or a TIME_WAIT entry on ports nothing used before (a connection the browser already closed)."""
    inodes = {c[3] for c in before}
    ports = {c[:3] for c in before}
    return {c[:3] for c in after if (c[3] != "0" and c[3] not in inodes) or (c[3] == "0" and c[:3] not in ports)}
