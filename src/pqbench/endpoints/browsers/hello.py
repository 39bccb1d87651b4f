"""What a TLS client offers, read off its real ClientHello: the groups (supported_groups), the key shares and
the signature schemes (signature_algorithms) by their code points, GREASE left out (RFC 8701).

A browser's capabilities come from here, not from a list written by hand: the browser is pointed at a listener
on loopback that reads its first ClientHello and closes (no TLS is answered, nothing leaves the machine)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

from pqbench import paths
from pqbench.errors import MeasurementFailed

HANDSHAKE, CLIENT_HELLO = 22, 1
SUPPORTED_GROUPS, SIGNATURE_ALGORITHMS, KEY_SHARE = 10, 13, 51
TRUST_ANCHORS = 0xCA34  # draft-ietf-tls-trust-anchor-ids: the trust anchors the client has, by their IDs
MAX_HELLO = 1 << 16  # a ClientHello this long is not one we read (a PQ share and padding are well under it)


@dataclasses.dataclass(frozen=True)
class Hello:
    groups: tuple[int, ...]
    key_shares: tuple[int, ...]
    sigalgs: tuple[int, ...]
    extensions: tuple[int, ...] = ()  # their types, in order
    trust_anchors: tuple[str, ...] = ()  # trust anchor IDs (relative OIDs, dotted) the client says it has

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "Hello":
        return cls(**{f.name: tuple(d[f.name]) for f in dataclasses.fields(cls)})


def grease(v: int) -> bool:
    """RFC 8701's reserved values: 0x0a0a, 0x1a1a, ... 0xfafa."""
    return v & 0x0F0F == 0x0A0A and v >> 8 == v & 0xFF


def _u16s(data: bytes) -> tuple[int, ...]:
    return tuple(v for (v,) in struct.iter_unpack("!H", data) if not grease(v))


def parse(message: bytes) -> Hello:
    """A ClientHello handshake message (type, length, body) -> what it offers. ValueError if it is not one."""
    if len(message) < 4 or message[0] != CLIENT_HELLO:
        raise ValueError("not a ClientHello")
    body, at = message[4:4 + int.from_bytes(message[1:4], "big")], 2 + 32  # legacy_version, random
    at += 1 + body[at]  # session id
    at += 2 + int.from_bytes(body[at:at + 2], "big")  # cipher suites
    at += 1 + body[at]  # compression methods
    end = at + 2 + int.from_bytes(body[at:at + 2], "big")
    at += 2
    found = {}
    while at + 4 <= end:
        kind, size = struct.unpack("!HH", body[at:at + 4])
        found[kind] = body[at + 4:at + 4 + size]
        at += 4 + size
    shares, data = [], found.get(KEY_SHARE, b"\0\0")[2:]
    while len(data) >= 4:
        group, size = struct.unpack("!HH", data[:4])
        shares.append(group)
        data = data[4 + size:]
    return Hello(groups=_u16s(found.get(SUPPORTED_GROUPS, b"\0\0")[2:]),
                 key_shares=tuple(g for g in shares if not grease(g)),
                 sigalgs=_u16s(found.get(SIGNATURE_ALGORITHMS, b"\0\0")[2:]),
                 extensions=tuple(k for k in found if not grease(k)),
                 trust_anchors=_anchor_ids(found.get(TRUST_ANCHORS, b"\0\0")[2:]))


def _anchor_ids(data: bytes) -> tuple[str, ...]:
    """A TrustAnchorIDList's IDs (each opaque<1..255>, a relative OID in DER's base-128 arcs) as dotted strings."""
    ids = []
    while data:
        size, item, data = data[0], data[1:1 + data[0]], data[1 + data[0]:]
        arcs, value = [], 0
        for byte in item[:size]:
            value = value << 7 | byte & 0x7F
            if not byte & 0x80:
                arcs.append(str(value))
                value = 0
        ids.append(".".join(arcs))
    return tuple(ids)


def read_message(conn: socket.socket) -> bytes:
    """The first handshake message a client sends on conn (its records joined)."""
    data = b""
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[1:4], "big"):
        head = _exactly(conn, 5)
        kind, size = head[0], int.from_bytes(head[3:5], "big")
        if kind != HANDSHAKE:
            raise ValueError(f"a TLS record of type {kind} before the ClientHello")
        data += _exactly(conn, size)
        if len(data) > MAX_HELLO:
            raise ValueError("a ClientHello longer than 64 kB")
    return data


def _exactly(conn: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = conn.recv(n - len(out))
        if not chunk:
            raise ValueError("the client closed before its ClientHello was complete")
        out += chunk
    return out


GONE_S = 10.0  # how long a killed client's process group may take to end


def capture(start: Callable[[int], subprocess.Popen], what: str, timeout_s: float = 60.0) -> Hello:
    """The ClientHello of a client that start(port) points at a listener on 127.0.0.1:port, started in a process
    group of its own; the group is killed once it has been read, and gone when this returns (a browser's helper
    processes would go on writing to its profile). MeasurementFailed naming `what` if none comes within
    timeout_s."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.settimeout(timeout_s)
        proc = start(server.getsockname()[1])
        try:
            conn, _ = server.accept()
            with conn:
                conn.settimeout(timeout_s)
                return parse(read_message(conn))
        except (OSError, ValueError) as e:
            raise MeasurementFailed(f"{what} sent no ClientHello to a listener on loopback: {e}") from None
        finally:
            _end_group(proc)


def _end_group(proc: subprocess.Popen) -> None:
    """The client and, if it leads a process group (a browser), the group, ended and gone."""
    leads = False
    with contextlib.suppress(ProcessLookupError):
        leads = os.getpgid(proc.pid) == proc.pid  # not reaped yet: the pid is still this child's
        os.killpg(proc.pid, signal.SIGKILL) if leads else proc.kill()
    proc.wait()
    if not leads:
        return
    deadline = time.monotonic() + GONE_S
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)


def of_browser(stack: str, label: str, version: str | None, start: Callable[[Path, str], subprocess.Popen],
               fix: str) -> Hello | str:
    """What a browser's ClientHello offers: read off a real one once per version, start(home, url) starting it
    with a fresh profile in home, and kept in build/<stack>; a string: why it cannot be read."""
    if version is None:
        return f"{label} is not installed: {fix}"
    cache = paths.BUILD / stack / f"client-hello-{version}.json"
    try:
        return Hello.from_json(json.loads(cache.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    with tempfile.TemporaryDirectory(prefix=f"pqbench-{stack}-hello-", ignore_cleanup_errors=True) as home:
        try:
            found = capture(lambda port: start(Path(home), f"https://127.0.0.1:{port}/"), f"{label} {version}")
        except MeasurementFailed as e:
            return str(e)
    cache.parent.mkdir(parents=True, exist_ok=True)
    part = cache.with_suffix(f".{os.getpid()}.part")  # whole or not at all: other processes may read it meanwhile
    part.write_text(json.dumps(found.to_json()))
    part.replace(cache)
    return found
