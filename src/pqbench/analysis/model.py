"""A lower bound on the time a cell measures, from first principles, shown beside the measurement.

What the client cannot beat on a loss-free link:
  - TCP handshake: SYN and SYN-ACK, 1 RTT;
  - TLS 1.3: ClientHello out, the server's flight (ServerHello … Finished) back, 1 RTT;
  - each HTTP request (page fetch, or one of N requests on the connection): 1 RTT;
  - serialisation of every flight at the link rate, counting IPv4+TCP headers per segment;
  - extra round trips while TCP slow start opens the window: a flight larger than initcwnd
    segments waits for ACKs (cwnd grows by one segment per ACK, so it doubles per round);
  - crypto on the critical path: client keygen, server encaps + sign, client decaps + verifies.

Flights are simulated segment by segment (send when the window and the link allow, arrive one-way
delay later, ACK one-way delay after that). ACKs are taken as immediate and free, so the result
stays a lower bound with delayed ACKs and real scheduling.

Over QUIC (RFC 9000/9001) there is no TCP handshake: the ClientHello leaves in Initial datagrams of at
least 1200 bytes, and until the client's address is validated the server sends at most 3 × the bytes it
received (§8.1). A server flight bigger than that waits for the client's next datagram, which the client
sends on receiving the server's first packets: one more round trip, after which the client's Handshake
packets have validated its address. QUIC's initial window (RFC 9002, 14720 bytes) is larger than any
budget the limit leaves, so the limit, not slow start, is what a large chain meets first.
"""

from __future__ import annotations

import dataclasses
import math

from pqbench import transport as transportmod

IP_TCP_HEADER = 52  # IPv4 20 + TCP 20 + timestamps option 12, on every data segment
SYN_BYTES = 60  # IPv4 20 + TCP 40 (MSS, SACK-permitted, timestamps, window scale)
TLS_RECORD = 5  # record header of a plaintext record (ClientHello, ServerHello)
TLS_AEAD_RECORD = 22  # header 5 + inner content type 1 + AEAD tag 16 of an encrypted record
TLS_MAX_RECORD = 16384
CCS = 6  # middlebox-compatibility ChangeCipherSpec record each side sends once
FINISHED = 52  # Finished message with a SHA-384 transcript hash (OpenSSL's default suite)
HTTP_REQUEST = 40  # shortest GET line + Host header: a floor, real requests are longer
HTTP_RESPONSE_HEADER = 150  # floor of nginx's status line and headers
DEFAULT_INITCWND = 10  # Linux's initial congestion window (RFC 6928)
IP_UDP_HEADER = 28  # IPv4 20 + UDP 8, on every datagram
QUIC_PACKET_OVERHEAD = 45  # a long header (≈ 25 with 8-byte connection ids) + CRYPTO frame header + AEAD tag 16
QUIC_DATAGRAM = 1200  # the UDP payload a server fills before it has probed the path (RFC 9000 §14)
QUIC_INITIAL_WINDOW = 14720  # RFC 9002 §7.2

# Catalog-based flight estimates (used when a cell has no measured message sizes): fixed parts
# of the messages around the key share / certificate, fitted to OpenSSL 3.5's ClientHello,
# ServerHello and a one-certificate chain; approximate, so the model says which source it used.
CLIENT_HELLO_BASE = 200
SERVER_HELLO_BASE = 90
ENCRYPTED_EXTENSIONS = 10
CERT_BASE = 381  # DER certificate without the subject key and the signature, plus message framing
CERT_VERIFY_BASE = 8


@dataclasses.dataclass(frozen=True)
class Link:
    """The parts of a LinkSpec the model needs, per direction (None = unlimited rate)."""

    delay_c2s_ms: float
    delay_s2c_ms: float
    rate_c2s_mbit: float | None = None
    rate_s2c_mbit: float | None = None
    mtu: int = 1500
    overhead_bytes: int = 0  # per-packet bytes the emulator counts at the rate
    initcwnd: int = DEFAULT_INITCWND

    @property
    def rtt_ms(self) -> float:
        return self.delay_c2s_ms + self.delay_s2c_ms

    @property
    def mss(self) -> int:
        return self.mtu - IP_TCP_HEADER

    @classmethod
    def symmetric(cls, rtt_ms: float, rate_mbit: float | None = None, mtu: int = 1500,
                  initcwnd: int | None = None, overhead_bytes: int = 0) -> "Link":
        return cls(rtt_ms / 2, rtt_ms / 2, rate_mbit, rate_mbit, mtu or 1500, overhead_bytes,
                   initcwnd or DEFAULT_INITCWND)

    @classmethod
    def from_linkspec(cls, d: dict, initcwnd: int | None = None) -> "Link":
        """From LinkSpec.to_dict() (as stored in cells.link)."""
        c2s, s2c = d["client_to_server"], d["server_to_client"]
        return cls(c2s["delay_ms"], s2c["delay_ms"], c2s.get("rate_mbit"), s2c.get("rate_mbit"),
                   d.get("mtu") or 1500, c2s.get("overhead_bytes") or 0, initcwnd or DEFAULT_INITCWND)


@dataclasses.dataclass(frozen=True)
class Flights:
    """TCP payload bytes (TLS records) of each flight of the exchange."""

    client_hello: int  # ClientHello record(s)
    server_flight: int  # ServerHello … server Finished, with CCS and record overheads
    client_finished: int = CCS + FINISHED + TLS_AEAD_RECORD
    request: int = HTTP_REQUEST + TLS_AEAD_RECORD  # one HTTP request
    response: int = 0  # one HTTP response (header + body in records); 0 = handshake only
    source: str = "measured"  # "measured" (message sizes of the samples) or "catalog"


@dataclasses.dataclass(frozen=True)
class Crypto:
    """Milliseconds of each operation on the critical path."""

    keygen: float = 0.0  # client key share
    encaps: float = 0.0  # server
    decaps: float = 0.0  # client
    sign: float = 0.0  # server CertificateVerify
    verify: float = 0.0  # client, per signature checked
    source: str = "none"

    def client_ms(self, verifies: int) -> float:
        return self.keygen + self.decaps + verifies * self.verify

    def server_ms(self, signs: bool) -> float:
        return self.encaps + (self.sign if signs else 0.0)


@dataclasses.dataclass(frozen=True)
class Bound:
    total_ms: float
    round_trips: int  # round trips on a link with unlimited rate and window
    parts: dict  # rtt_ms, serialisation_ms, slow_start_ms, crypto_ms (they add up to total_ms)
    flights: Flights
    crypto_source: str


def records(payload: int, per_record: int) -> int:
    """Bytes of payload carried in TLS records of at most 16 KiB, per_record overhead each."""
    return payload + max(1, math.ceil(payload / TLS_MAX_RECORD)) * per_record


def segments(payload: int, mss: int) -> list[int]:
    """Wire sizes (IP packets) of the segments carrying payload bytes."""
    full, rest = divmod(payload, mss)
    return [mss + IP_TCP_HEADER] * full + ([rest + IP_TCP_HEADER] if rest else [])


class _Sender:
    """One direction of a TCP connection: its congestion window and its link (rate, delay)."""

    def __init__(self, delay_ms: float, rate_mbit: float | None, overhead: int, cwnd: int, mss: int):
        self.delay = delay_ms
        self.bytes_per_ms = rate_mbit * 1000 / 8 if rate_mbit else math.inf
        self.overhead = overhead
        self.cwnd = cwnd
        self.mss = mss
        self.link_free = 0.0

    def _serialise(self, wire: int) -> float:
        return (wire + self.overhead) / self.bytes_per_ms

    def packet(self, t: float, wire: int) -> float:
        """A lone packet (SYN) sent at t: its arrival time."""
        start = max(t, self.link_free)
        self.link_free = start + self._serialise(wire)
        return self.link_free + self.delay

    def flight(self, t: float, payload: int, ack_delay: float) -> float:
        """Sends payload bytes from time t under slow start; returns when the last byte arrives.

        Segment j may leave once cwnd + acks >= j + 1 - acks, i.e. after ceil((j+1-cwnd)/2) ACKs;
        ACK k returns ack_delay after segment k arrived. cwnd ends grown by one per segment.
        """
        arrivals: list[float] = []
        for j, wire in enumerate(segments(payload, self.mss)):
            need = max(0, math.ceil((j + 1 - self.cwnd) / 2))
            allowed = t if need == 0 else arrivals[need - 1] + ack_delay
            start = max(allowed, self.link_free)
            self.link_free = start + self._serialise(wire)
            arrivals.append(self.link_free + self.delay)
        self.cwnd += len(arrivals)
        return arrivals[-1] if arrivals else t


def _timeline(link: Link, flights: Flights, mode: str, requests: int, client_ms: float, server_ms: float,
              keygen_ms: float, *, rate: bool = True, window: bool = True) -> float:
    """Completion time of the cell's metric; rate/window off give the pure round-trip part."""
    big = 1 << 40
    cwnd = link.initcwnd if window else big
    c = _Sender(link.delay_c2s_ms, link.rate_c2s_mbit if rate else None, link.overhead_bytes, cwnd, link.mss)
    s = _Sender(link.delay_s2c_ms, link.rate_s2c_mbit if rate else None, link.overhead_bytes, cwnd, link.mss)
    t = s.packet(c.packet(0.0, SYN_BYTES), SYN_BYTES)  # SYN, SYN-ACK: tcp_connected
    t += keygen_ms
    t = c.flight(t, flights.client_hello, link.delay_s2c_ms)
    t += server_ms
    t = s.flight(t, flights.server_flight, link.delay_c2s_ms)
    t += client_ms  # handshake_done
    if mode in ("page", "requests"):
        for k in range(max(1, requests) if mode == "requests" else 1):
            out = flights.request + (flights.client_finished if k == 0 else 0)
            t = c.flight(t, out, link.delay_s2c_ms)
            t = s.flight(t, flights.response, link.delay_c2s_ms)
    return t


def quic_datagrams(payload: int, size: int) -> list[int]:
    """UDP payloads of the datagrams that carry payload bytes of TLS handshake data in packets of `size`."""
    room = size - QUIC_PACKET_OVERHEAD
    full, rest = divmod(payload, room)
    return [size] * full + ([rest + QUIC_PACKET_OVERHEAD] if rest else [])


def amplification_budget(client_hello: int, initial_size: int = QUIC_DATAGRAM) -> int:
    """The bytes (UDP payload) a QUIC server may send before the client's next datagram: 3 × the Initial
    datagrams that carried the ClientHello, each padded to initial_size."""
    return 3 * len(quic_datagrams(client_hello, initial_size)) * initial_size


def _quic_timeline(link: Link, flights: Flights, mode: str, requests: int, client_ms: float, server_ms: float,
                   keygen_ms: float, initial_size: int, *, rate: bool = True, window: bool = True) -> float:
    """As _timeline over QUIC: the client's Initial datagrams, then the server's flight up to the
    amplification budget, the rest one round trip later (window=False: no limit)."""
    bytes_per_ms = lambda r: r * 1000 / 8 if r and rate else math.inf  # noqa: E731
    c_rate, s_rate = bytes_per_ms(link.rate_c2s_mbit), bytes_per_ms(link.rate_s2c_mbit)

    def send(t: float, sizes: list[int], per_ms: float, delay: float) -> tuple[float, float]:
        """(first arrival, last arrival) of datagrams sent back to back from t."""
        first = None
        for size in sizes:
            t += (size + IP_UDP_HEADER + link.overhead_bytes) / per_ms
            first = first if first is not None else t + delay
        return (first if first is not None else t + delay), t + delay
    t = keygen_ms
    _, t = send(t, quic_datagrams(flights.client_hello, initial_size), c_rate, link.delay_c2s_ms)
    t += server_ms
    server = quic_datagrams(flights.server_flight, QUIC_DATAGRAM)
    budget = amplification_budget(flights.client_hello, initial_size) if window else math.inf
    now, sent = [], 0
    for size in server:
        if sent + size > budget:
            break
        now.append(size)
        sent += size
    first, t_end = send(t, now, s_rate, link.delay_s2c_ms)
    if len(now) < len(server):  # the rest leaves when the client's ACK (sent on the first arrival) comes back
        _, t_end = send(max(first + link.delay_c2s_ms, t_end - link.delay_s2c_ms), server[len(now):], s_rate,
                        link.delay_s2c_ms)
    t = t_end + client_ms  # handshake_done
    if mode in ("page", "requests"):
        for _ in range(max(1, requests) if mode == "requests" else 1):
            _, t = send(t, quic_datagrams(flights.request, QUIC_DATAGRAM), c_rate, link.delay_c2s_ms)
            _, t = send(t, quic_datagrams(flights.response, QUIC_DATAGRAM), s_rate, link.delay_s2c_ms)
    return t


def lower_bound(link: Link, flights: Flights, crypto: Crypto, mode: str = "handshake", requests: int = 1,
                verifies: int = 2, transport: str | None = None, initial_size: int | None = None) -> Bound:
    """The lower bound of the cell's metric (handshake_done, or last_byte of page/requests modes).

    verifies: signatures the client checks (leaf certificate + CertificateVerify = 2 for a
    root -> leaf chain; one more per intermediate). Resumption signs and verifies nothing.
    transport: its name in pqbench.transport.TRANSPORTS (None: the default, TCP); a datagram transport
    (QUIC) runs the datagram timeline.
    """
    if mode not in ("handshake", "resume", "page", "requests"):
        raise ValueError(f"mode {mode!r} is not handshake, resume, page or requests")
    signs = mode != "resume"
    client_ms = crypto.client_ms(verifies if signs else 0) - crypto.keygen
    server_ms = crypto.server_ms(signs)
    crypto_ms = crypto.keygen + client_ms + server_ms
    args = (link, flights, mode, requests, client_ms, server_ms, crypto.keygen)
    timeline = _timeline
    if transportmod.get(transport).datagram:
        args += (initial_size or QUIC_DATAGRAM,)
        timeline = _quic_timeline
    total = timeline(*args)
    no_window = timeline(*args, window=False)
    pure = timeline(*args, rate=False, window=False)
    rtt_part = pure - crypto_ms
    round_trips = round(rtt_part / link.rtt_ms) if link.rtt_ms > 0 else 2 + (
        (max(1, requests) if mode == "requests" else 1) if mode in ("page", "requests") else 0)
    # slow_start_ms: the window's cost (TCP's slow start; QUIC's amplification limit)
    parts = {"rtt_ms": rtt_part, "serialisation_ms": no_window - pure, "slow_start_ms": total - no_window,
             "crypto_ms": crypto_ms}
    return Bound(total, round_trips, parts, flights, crypto.source)


def measured_flights(client_hello: int, hs_received: int, server_hello: int, certificate: int | None,
                     certificate_verify: int | None, response_payload: int = 0) -> Flights:
    """Flights from the handshake message sizes pqtimer recorded (bytes of the messages).

    OpenSSL sends the ServerHello in a plaintext record, then CCS, then one encrypted record per
    message (EncryptedExtensions, Certificate, CertificateVerify, Finished).
    """
    encrypted = 2 + bool(certificate) + bool(certificate_verify)
    server = server_hello + TLS_RECORD + CCS + (hs_received - server_hello) + encrypted * TLS_AEAD_RECORD
    return Flights(client_hello=records(client_hello, TLS_RECORD), server_flight=server,
                   response=http_response(response_payload) if response_payload else 0)


def catalog_flights(kex, sig, pad: int = 0, response_payload: int = 0, resume: bool = False) -> Flights:
    """Flights estimated from catalog sizes (pk, ct, sig) when no sample carries message sizes."""
    ch = CLIENT_HELLO_BASE + kex.pk + pad
    sh = SERVER_HELLO_BASE + (kex.ct or 0)
    msgs = ENCRYPTED_EXTENSIONS + FINISHED
    encrypted = 2
    if not resume:
        msgs += CERT_BASE + sig.pk + (sig.sig or 0) + CERT_VERIFY_BASE + (sig.sig or 0)
        encrypted = 4
    server = sh + TLS_RECORD + CCS + msgs + encrypted * TLS_AEAD_RECORD
    return Flights(client_hello=records(ch, TLS_RECORD), server_flight=server,
                   response=http_response(response_payload) if response_payload else 0, source="catalog")


def http_response(body_bytes: int) -> int:
    """TCP payload of one HTTP response carrying body_bytes (header floor + TLS records)."""
    return records(HTTP_RESPONSE_HEADER + body_bytes, TLS_AEAD_RECORD)
