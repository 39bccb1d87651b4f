"""Protocols and transports, defined once: what every layer reads to know how a cell's connection is made.

A cell runs an application protocol (TLS, SSH) over a transport (TCP, QUIC). The catalog and the spec
take their names from here; the sample's phases, the wire record's reading, the late-sample detector,
the concurrency controller, the lower-bound model, the analysis, the report and the runner ask the
cell's Transport instead of assuming TCP. A new transport is one entry here and one folder per stack
that speaks it.
"""

from __future__ import annotations

import dataclasses

from pqbench.errors import BadInput

PROTOCOLS = ("tls", "ssh")


@dataclasses.dataclass(frozen=True)
class Transport:
    name: str
    # How the emulator's record names its flows ("tcp" or "udp": pqlink sees IP, not QUIC).
    ip_proto: str
    # The client's socket is kernel TCP: TCP_INFO, the congestion control and initcwnd route options,
    # the SYN's connect time (the concurrency controller's CPU probe) exist only then.
    kernel_tcp: bool
    # Round trips before the TLS client's first flight may leave: TCP's SYN/SYN-ACK; QUIC carries the
    # ClientHello in its first datagram.
    setup_round_trips: int
    # The application protocols that run over it.
    protocols: tuple[str, ...]
    # What the report calls it.
    label: str
    # The phase that ends the transport's own setup, where it has one (None: the handshake is the setup).
    connected_phase: str | None = None


TRANSPORTS = {
    "tcp": Transport("tcp", ip_proto="tcp", kernel_tcp=True, setup_round_trips=1, protocols=PROTOCOLS,
                     label="TCP", connected_phase="tcp_connected"),
    # RFC 9000/9001: TLS 1.3 inside QUIC's Initial and Handshake packets; HTTP/3 (RFC 9114) for pages.
    "quic": Transport("quic", ip_proto="udp", kernel_tcp=False, setup_round_trips=0, protocols=("tls",),
                      label="QUIC"),
}
DEFAULT = "tcp"
# RFC 9000 §8.1: before the client's address is validated, a server sends at most this many times the bytes
# it has received; §14.1: a client's Initial datagrams carry at least MIN_INITIAL bytes of UDP payload.
AMPLIFICATION_FACTOR = 3
MIN_INITIAL = 1200
MAX_INITIAL = 1472  # 1500-byte MTU less IPv4 (20) and UDP (8) headers


def get(name: str | None, field: str = "transport") -> Transport:
    """The transport called name (None: the default); exit 2 naming the field and the choices."""
    if name is None:
        return TRANSPORTS[DEFAULT]
    if name not in TRANSPORTS:
        raise BadInput(field, f"{name!r} is not a transport; choose one of {', '.join(TRANSPORTS)}")
    return TRANSPORTS[name]


def check(protocol: str, name: str | None, field: str = "transport") -> Transport:
    """The transport, refusing one the protocol does not run over (SSH over QUIC: exit 2)."""
    t = get(name, field)
    if protocol not in t.protocols:
        raise BadInput(field, f"{protocol.upper()} does not run over {t.label} "
                              f"(over {t.label}: {', '.join(t.protocols)})")
    return t


def check_initial_size(value, field: str = "initial_size") -> int:
    """A QUIC client's Initial datagram size (UDP payload bytes): an integer in [MIN_INITIAL, MAX_INITIAL]."""
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_INITIAL <= value <= MAX_INITIAL:
        raise BadInput(field, f"{value!r} is not a QUIC Initial size: an integer from {MIN_INITIAL} "
                              f"(RFC 9000's minimum) to {MAX_INITIAL} (a 1500-byte MTU's UDP payload)")
    return value


def of_sample(s: dict) -> Transport:
    """The transport a sample (a client's JSON line) was measured over: TCP unless it says otherwise."""
    return TRANSPORTS.get(s.get("transport") or DEFAULT, TRANSPORTS[DEFAULT])


def touched(s: dict) -> bool:
    """A sample whose connection lost something the transport had to recover (the late-sample
    detector and the concurrency controller judge lateness only on the others).

    TCP: a retransmission either way (the client's TCP_INFO, and the wire's record of both senders).
    A drop alone is not one: a lost packet that held the sample up was sent again before the sample
    ended, and one never resent (a pure ACK, the client's Finished, a session ticket, the teardown) did
    not hold it up; counting those as touched hid CPU-late samples (at 10 % loss a third of the clean
    ones). QUIC: its retransmissions are encrypted, so the emulator cannot tell them; a datagram it
    dropped either way touches the sample."""
    w = s.get("wire") or {}
    if not of_sample(s).kernel_tcp:
        return bool(w.get("drops_c2s") or w.get("drops_s2c"))
    tcp = s.get("tcp_end") or s.get("tcp_handshake") or {}
    if (tcp.get("retransmits") or 0) > 0:
        return True
    return any(w.get(k) for k in ("retrans_c2s", "retrans_s2c"))
