"""The kernel's process events (the proc connector, root only): every fork, exec and exit on the machine as it
happens, each exit with the parent the process had when it ended. A test that asks "whose child was it when it
ended" reads the kernel's answer instead of polling /proc, where a process that lives a few milliseconds on a
slower machine is seen or missed by chance."""

from __future__ import annotations

import os
import socket
import struct
import threading
from pathlib import Path

NETLINK_CONNECTOR = 11
CN_IDX_PROC = 1
CN_VAL_PROC = 1
PROC_CN_MCAST_LISTEN, PROC_CN_MCAST_IGNORE = 1, 2
FORK, EXEC, EXIT = 0x1, 0x2, 0x80000000
NLMSG_DONE = 3
NLMSG_HEADER, CN_HEADER, EVENT_HEADER = "=IHHII", "=IIIIHH", "=IIQ"
BODY_AT = struct.calcsize(NLMSG_HEADER) + struct.calcsize(CN_HEADER)


class ProcEvents:
    """with ProcEvents() as ev: ... — ev.parent[child], ev.cmdline[tgid] (read at its exec), ev.exit_parent[tgid]."""

    def __init__(self):
        self.parent: dict[int, int] = {}
        self.cmdline: dict[int, str] = {}
        self.exit_parent: dict[int, int] = {}
        self.lost = False  # the socket's buffer overflowed: some events are missing
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 << 20)
        self._sock.bind((0, CN_IDX_PROC))
        self._sock.settimeout(0.1)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)

    def _control(self, op: int) -> None:
        payload = struct.pack("=I", op)
        cn = struct.pack(CN_HEADER, CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(payload), 0) + payload
        self._sock.send(struct.pack(NLMSG_HEADER, struct.calcsize(NLMSG_HEADER) + len(cn), NLMSG_DONE, 0, 0,
                                    os.getpid()) + cn)

    def __enter__(self) -> "ProcEvents":
        self._control(PROC_CN_MCAST_LISTEN)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        try:
            self._control(PROC_CN_MCAST_IGNORE)
        finally:
            self._sock.close()

    def _read(self) -> None:
        while not self._done.is_set():
            try:
                data = self._sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:  # ENOBUFS
                self.lost = True
                continue
            what = struct.unpack_from(EVENT_HEADER, data, BODY_AT)[0]
            body = BODY_AT + struct.calcsize(EVENT_HEADER)
            if what == FORK:
                _, parent_tgid, _, child_tgid = struct.unpack_from("=4i", data, body)
                self.parent[child_tgid] = parent_tgid
            elif what == EXEC:
                _, tgid = struct.unpack_from("=2i", data, body)
                try:  # read at once: the process runs its new program now
                    self.cmdline[tgid] = Path(f"/proc/{tgid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
                        errors="replace")
                except OSError:
                    pass
            elif what == EXIT:
                pid, tgid, _, _, _, parent_tgid = struct.unpack_from("=6i", data, body)
                if pid == tgid:  # the process, not one of its threads
                    self.exit_parent[tgid] = parent_tgid

    def descendants(self, root: int) -> set[int]:
        """Every process forked under root (itself included) while watching."""
        out, grew = {root}, True
        while grew:
            more = {c for c, p in self.parent.items() if p in out} - out
            out |= more
            grew = bool(more)
        return out
