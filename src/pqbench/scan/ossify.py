"""Does a ClientHello the field's middleboxes choke on reach the server? Two probes, each a real
handshake of pqtimer (our OpenSSL) through a relay of ours on the scanning side's loopback, so the
ClientHello's segmentation is ours to choose and the server's first answer is seen on the relay's own
TCP connection:

- split: the ClientHello's record in two TCP segments (TCP_NODELAY, two writes) with a pause between
  them, as a ClientHello larger than one segment arrives at a middlebox that reads only the first;
- oversized: a ClientHello with key shares for two post-quantum groups and the server's favourite
  (several kB, several segments back to back).

Verdict from the relay's connection to the server: "accepted" (the server answered with a handshake
record: a ServerHello or a HelloRetryRequest), "alert" (it read the ClientHello and refused it with an
alert), "reset" (a RST), "closed" (a FIN without an answer) or "silent" (nothing before the timeout).
"""

from __future__ import annotations

import dataclasses
import errno
import select
import socket
import threading
import time

from pqbench.endpoints.base import Place
from pqbench.remote.address import Address

SPLIT_PAUSE_S = 0.2  # between the two segments of the split ClientHello
# two post-quantum key shares (1,216 + 1,665 bytes): with the server's favourite, a ClientHello of 3-4 kB
OVERSIZED_SHARES = ("X25519MLKEM768", "SecP384r1MLKEM1024")
RECORD_HEADER = 5
VERDICTS = ("accepted", "alert", "reset", "closed", "silent")


@dataclasses.dataclass
class Seen:
    """What the relay saw on its connection to the server."""
    verdict: str | None = None
    client_hello_bytes: int = 0  # the record, header included, as the client wrote it
    segments: list[int] = dataclasses.field(default_factory=list)  # the writes it was sent in
    first_answer_ms: float | None = None  # from the ClientHello's last byte to the server's first byte
    error: str | None = None


def _read_record(conn: socket.socket, deadline: float) -> bytes:
    """One whole TLS record from the client (the ClientHello)."""
    buf = b""
    need = RECORD_HEADER
    while len(buf) < need:
        conn.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = conn.recv(65536)
        if not chunk:
            break
        buf += chunk
        if len(buf) >= RECORD_HEADER:
            need = RECORD_HEADER + int.from_bytes(buf[3:5], "big")
    return buf


def _pipe(a: socket.socket, b: socket.socket, deadline: float) -> None:
    """Both ways until either side closes or the deadline."""
    socks = [a, b]
    while time.monotonic() < deadline:
        ready, _, _ = select.select(socks, [], [], max(0.0, min(0.2, deadline - time.monotonic())))
        for s in ready:
            try:
                data = s.recv(65536)
            except OSError:
                return
            if not data:
                return
            try:
                (b if s is a else a).sendall(data)
            except OSError:
                return


class Relay:
    """Listens on 127.0.0.1 in place's namespace; the first client it accepts is connected to target, its
    first record sent as `segments` says, and everything after relayed both ways."""

    def __init__(self, place: Place, target: Address, *, split: bool, timeout_s: float):
        self.place, self.target, self.split, self.timeout_s = place, target, split, timeout_s
        self.seen = Seen()
        self.listener = place.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._run, daemon=True, name="scan-relay")

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.listener.close()
        self.thread.join(self.timeout_s * 2 + 5)

    def _run(self) -> None:
        deadline = time.monotonic() + self.timeout_s * 2 + 2
        try:
            self.listener.settimeout(self.timeout_s + 2)
            client, _ = self.listener.accept()
        except OSError as e:
            self.seen.error = f"the client never connected to the relay: {e}"
            return
        upstream = self.place.socket()
        try:
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            upstream.settimeout(self.timeout_s)
            upstream.connect((self.target.ip, self.target.port))
            hello = _read_record(client, deadline)
            self.seen.client_hello_bytes = len(hello)
            self._send(upstream, hello)
            sent_at = time.monotonic()
            first = self._first_answer(upstream, sent_at)
            if first:
                client.sendall(first)
                _pipe(client, upstream, deadline)
        except OSError as e:
            self.seen.verdict = self.seen.verdict or ("reset" if e.errno == errno.ECONNRESET else "silent"
                                                      if isinstance(e, TimeoutError) else "closed")
            self.seen.error = f"{type(e).__name__}: {e}"
        finally:
            upstream.close()
            client.close()

    def _send(self, upstream: socket.socket, hello: bytes) -> None:
        if not self.split or len(hello) < 2 * RECORD_HEADER:
            upstream.sendall(hello)
            self.seen.segments = [len(hello)]
            return
        cut = len(hello) // 2  # the record header and the first half of the ClientHello, then the rest
        upstream.sendall(hello[:cut])
        time.sleep(SPLIT_PAUSE_S)
        upstream.sendall(hello[cut:])
        self.seen.segments = [cut, len(hello) - cut]

    def _first_answer(self, upstream: socket.socket, sent_at: float) -> bytes:
        upstream.settimeout(self.timeout_s)
        try:
            data = upstream.recv(65536)
        except TimeoutError:
            self.seen.verdict = "silent"
            return b""
        except ConnectionResetError:
            self.seen.verdict = "reset"
            return b""
        self.seen.first_answer_ms = round((time.monotonic() - sent_at) * 1000, 3)
        if not data:
            self.seen.verdict = "closed"
        elif data[0] == 22:
            self.seen.verdict = "accepted"
        elif data[0] == 21:
            self.seen.verdict = "alert"
        else:
            self.seen.verdict = "closed"
            self.seen.error = f"the server answered with a record of type {data[0]}"
        return data


def probe(prober, target: Address, groups: str, *, split: bool) -> dict:
    """One handshake of prober's pqtimer offering groups, through a relay; the verdict and what pqtimer saw."""
    with Relay(prober.place, target, split=split, timeout_s=prober.timeout_ms / 1000) as relay:
        sample = prober.one(groups, via=("127.0.0.1", relay.port))
    seen = relay.seen
    hellos = sample.get("client_hellos") or []
    shares = [s["group"] for s in (hellos[0].get("key_shares") or [])] if hellos else []
    return {"verdict": seen.verdict or "silent", "offered": groups, "key_shares": shares,
            "client_hello_bytes": seen.client_hello_bytes, "segments": seen.segments,
            "first_answer_ms": seen.first_answer_ms, "handshake_ok": bool(sample.get("ok")),
            **({"group": sample.get("group")} if sample.get("ok") else {"error": sample.get("error") or seen.error})}


def oversized_offer(accepted: list[str], favourite: str | None) -> str:
    """Key shares for the two post-quantum groups and the server's favourite; the other accepted groups listed."""
    shares = list(OVERSIZED_SHARES) + ([favourite] if favourite and favourite not in OVERSIZED_SHARES else [])
    rest = [g for g in accepted if g not in shares]
    return ":".join([*(f"*{g}" for g in shares), *rest])


def split_offer(accepted: list[str], favourite: str | None) -> str:
    """What the server accepts, a key share for its favourite: a ClientHello it should answer with a
    ServerHello, whatever its size."""
    first = favourite or accepted[0]
    return ":".join([f"*{first}", *(g for g in accepted if g != first)])
