"""What an SSH server offers, from its identification line and its SSH_MSG_KEXINIT (RFC 4253 §4.2,
§6, §7.1): one connection, nothing after the KEXINIT (no key exchange, no authentication).

We send our identification and a KEXINIT of our own first: a server may wait for the client's before it
sends its own (RFC 4253 lets either side go first)."""

from __future__ import annotations

import os
import socket
import struct
import time

from pqbench.algorithms import catalog
from pqbench.endpoints.base import Place
from pqbench.remote.address import Address
from pqbench.scan import failure, pq

# RFC 4253 §4.2's comment names the scanner, as a User-Agent would (docs/scan.md)
IDENT = b"SSH-2.0-pqbench_scan pqbench post-quantum readiness scan, see docs/scan.md\r\n"
MSG_KEXINIT = 20
MAX_PREAMBLE_LINES = 20  # lines a server may send before its identification
MAX_LINE = 255  # RFC 4253 §4.2, CR LF included
MAX_PACKET = 35000  # §6.1: what every implementation must accept
MAX_PACKETS = 5  # packets read while waiting for the KEXINIT
NAME_LISTS = ("kex", "host_key", "ciphers_c2s", "ciphers_s2c", "macs_c2s", "macs_s2c", "compression_c2s",
              "compression_s2c", "languages_c2s", "languages_s2c")


class ProtocolError(Exception):
    pass


def name_list(names: list[str]) -> bytes:
    raw = ",".join(names).encode()
    return struct.pack(">I", len(raw)) + raw


def build_kexinit(lists: dict[str, list[str]], cookie: bytes | None = None, first_follows: bool = False) -> bytes:
    """A KEXINIT payload (message type included)."""
    out = bytes([MSG_KEXINIT]) + (cookie if cookie is not None else os.urandom(16))
    for key in NAME_LISTS:
        out += name_list(lists.get(key, []))
    return out + bytes([first_follows]) + struct.pack(">I", 0)


def packet(payload: bytes, block: int = 8) -> bytes:
    """An unencrypted binary packet (§6): length, padding length, payload, at least 4 bytes of padding."""
    pad = block - (len(payload) + 5) % block
    pad += block if pad < 4 else 0
    return struct.pack(">IB", len(payload) + pad + 1, pad) + payload + bytes(pad)


def parse_kexinit(payload: bytes) -> dict:
    """A KEXINIT payload (type byte first) -> cookie (hex), the ten name-lists, first_kex_packet_follows."""
    if not payload or payload[0] != MSG_KEXINIT:
        raise ProtocolError(f"not a KEXINIT (message type {payload[0] if payload else 'none'})")
    if len(payload) < 17:
        raise ProtocolError("KEXINIT shorter than its cookie")
    out = {"cookie": payload[1:17].hex()}
    pos = 17
    for key in NAME_LISTS:
        if pos + 4 > len(payload):
            raise ProtocolError(f"KEXINIT ends before its {key} name-list")
        (n,) = struct.unpack_from(">I", payload, pos)
        pos += 4
        if pos + n > len(payload):
            raise ProtocolError(f"KEXINIT's {key} name-list runs past its end ({n} bytes)")
        text = payload[pos:pos + n].decode("ascii", errors="replace")
        out[key] = [s for s in text.split(",") if s]
        pos += n
    if pos + 5 > len(payload):
        raise ProtocolError("KEXINIT ends before first_kex_packet_follows")
    out["first_kex_packet_follows"] = bool(payload[pos])
    return out


class _Reader:
    def __init__(self, sock: socket.socket, deadline: float):
        self.sock, self.deadline, self.buf = sock, deadline, b""

    def _fill(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the server did not send its KEXINIT in time")
        self.sock.settimeout(left)
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionResetError("the server closed the connection")
        self.buf += chunk

    def line(self) -> bytes:
        while b"\n" not in self.buf:
            if len(self.buf) > MAX_LINE:
                raise ProtocolError("a line longer than 255 bytes before the identification")
            self._fill()
        line, _, self.buf = self.buf.partition(b"\n")
        return line.rstrip(b"\r")

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def our_kexinit() -> bytes:
    """Every SSH key exchange and host key the catalog names, and common ciphers: a server that checks
    our list finds a match and still sends its own."""
    lists = {"kex": [*catalog.ssh_names("kem"), "sntrup761x25519-sha512@openssh.com", "curve25519-sha256@libssh.org"],
             "host_key": [n for n in catalog.ssh_names("sig")  # the catalog's RSA sizes are its own names
                          if not catalog.is_size_only(n) and not n.endswith(("-2048", "-3072", "-4096"))],
             "ciphers_c2s": ["chacha20-poly1305@openssh.com", "aes128-gcm@openssh.com", "aes256-gcm@openssh.com",
                             "aes128-ctr", "aes256-ctr"],
             "macs_c2s": ["hmac-sha2-256-etm@openssh.com", "hmac-sha2-256", "hmac-sha2-512"],
             "compression_c2s": ["none"]}
    for a, b in (("ciphers_c2s", "ciphers_s2c"), ("macs_c2s", "macs_s2c"), ("compression_c2s", "compression_s2c")):
        lists[b] = lists[a]
    return build_kexinit(lists)


def fetch(place: Place, ip: str, port: int, timeout_s: float) -> tuple[str, bytes]:
    """The server's identification line and its KEXINIT payload."""
    sock = place.socket()
    deadline = time.monotonic() + timeout_s
    try:
        sock.settimeout(timeout_s)
        sock.connect((ip, port))
        sock.sendall(IDENT + packet(our_kexinit()))
        r = _Reader(sock, deadline)
        for _ in range(MAX_PREAMBLE_LINES + 1):
            line = r.line()
            if line.startswith(b"SSH-"):
                break
        else:
            raise ProtocolError(f"no SSH identification in the first {MAX_PREAMBLE_LINES} lines")
        ident = line.decode("utf-8", errors="replace")
        if not ident.startswith(("SSH-2.0-", "SSH-1.99-")):
            raise ProtocolError(f"not SSH 2.0: {ident!r}")
        for _ in range(MAX_PACKETS):
            length, padding = struct.unpack(">IB", r.exactly(5))
            if not 1 + padding <= length <= MAX_PACKET:
                raise ProtocolError(f"a packet of {length} bytes with {padding} of padding")
            body = r.exactly(length - 1)
            payload = body[:length - 1 - padding]
            if payload and payload[0] == MSG_KEXINIT:
                return ident, payload
            if payload and payload[0] == 1:  # SSH_MSG_DISCONNECT
                raise ProtocolError("the server disconnected before its KEXINIT")
        raise ProtocolError(f"no KEXINIT in the server's first {MAX_PACKETS} packets")
    finally:
        sock.close()


def software(ident: str) -> dict:
    """RFC 4253 §4.2: SSH-protoversion-softwareversion SP comments."""
    rest = ident.split("-", 2)[2] if ident.count("-") >= 2 else ""
    version, _, comments = rest.partition(" ")
    return {"software": version or None, "software_comments": comments or None}


def scan(address: Address, place: Place, *, timeout_s: float = 5.0, pace=None) -> dict:
    result = {"protocol": "ssh", "target": str(address), "address": address.endpoint, "failure": None}
    if pace is not None:
        pace.reserve(1)
    try:
        ident, payload = fetch(place, address.ip, address.port, timeout_s)
        kexinit = parse_kexinit(payload)
    except ProtocolError as e:
        result["failure"] = failure.failure("protocol", str(e))
        return result
    except OSError as e:
        result["failure"] = failure.failure(failure.from_oserror(e), str(e) or type(e).__name__)
        return result
    kex = [k for k in kexinit["kex"] if not k.startswith(("ext-info-", "kex-strict-"))]  # markers, not exchanges
    result |= {"identification": ident, **software(ident), "kex": kex, "host_key": kexinit["host_key"],
               "kex_markers": [k for k in kexinit["kex"] if k not in kex],
               "ciphers": kexinit["ciphers_s2c"], "macs": kexinit["macs_s2c"], "compression": kexinit["compression_s2c"],
               "kex_post_quantum": [k for k in kex if pq.ssh_kex_is_pq(k)],
               # each post-quantum exchange's place in the server's order (1 = its first choice)
               "kex_post_quantum_place": {k: i + 1 for i, k in enumerate(kex) if pq.ssh_kex_is_pq(k)},
               "host_key_post_quantum": [h for h in kexinit["host_key"] if pq.ssh_hostkey_is_pq(h)]}
    return result
