"""Transports, defined once: what every layer reads to know how a cell's connection is made.

A cell runs an application protocol (TLS, SSH: pqbench.protocol, whose records name the transports each runs
over) over a transport (TCP, QUIC). The spec takes their names from here; the sample's phases, the wire record's reading, the late-sample detector,
the concurrency controller, the lower-bound model, the analysis, the report and the runner ask the
cell's Transport instead of assuming TCP. A new transport is one entry here and one folder per stack
that speaks it.
"""

from __future__ import annotations

import dataclasses

from pqbench import axis
from pqbench import protocol as proto
from pqbench.errors import BadInput


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
    # What the report calls it.
    label: str
    # The phase that ends the transport's own setup, where it has one (None: the handshake is the setup).
    connected_phase: str | None = None
    # Its packets are datagrams the client pads and the server fills (RFC 9000 §14), not a byte stream cut
    # into segments under a congestion window: the emulator's record of a connection lists its datagrams
    # one by one and is read as such (pqbench.measure.quic_wire, not wire.summary's flights), the lower-bound
    # model counts padded datagrams (analysis.model), and `handshake --json` has a section on them ("quic").
    datagram: bool = False
    # Before the client's address is validated, the server sends at most this many times the bytes it has
    # received (RFC 9000 §8.1), so a large chain waits a round trip; None: no such limit (TCP's initcwnd is
    # the window instead). The report's transports section sets these cells beside the default transport's.
    amplification_factor: int | None = None

    @property
    def is_default(self) -> bool:
        """The transport a cell without the axis runs over (its row and id hold None)."""
        return self.name == DEFAULT

    @property
    def protocols(self) -> tuple[str, ...]:
        """The application protocols that run over it (each Protocol names its transports)."""
        return proto.over(self.name)

    def refuses(self, name: str) -> str | None:
        """Why a protocol does not run over it (SSH over QUIC), or None."""
        if self.name in proto.get(name).transports:
            return None
        return f"{proto.get(name).label} does not run over {self.label} (over {self.label}: {', '.join(self.protocols)})"


# RFC 9000 §8.1: before the client's address is validated, a server sends at most this many times the bytes
# it has received.
AMPLIFICATION_FACTOR = 3
TRANSPORTS = {
    "tcp": Transport("tcp", ip_proto="tcp", kernel_tcp=True, setup_round_trips=1, label="TCP", connected_phase="tcp_connected"),
    # RFC 9000/9001: TLS 1.3 inside QUIC's Initial and Handshake packets; HTTP/3 (RFC 9114) for pages.
    "quic": Transport("quic", ip_proto="udp", kernel_tcp=False, setup_round_trips=0, label="QUIC", datagram=True, amplification_factor=AMPLIFICATION_FACTOR),
    # Plain datagrams, the protocol its own reliability (DTLS's timers and acknowledgements, RFC 9147 §5.8).
    "udp": Transport("udp", ip_proto="udp", kernel_tcp=False, setup_round_trips=0, label="UDP", datagram=True),
}
DEFAULT = "tcp"
# RFC 9000 §14.1: a client's Initial datagrams carry at least MIN_INITIAL bytes of UDP payload.
MIN_INITIAL = 1200
MAX_INITIAL = 1472  # 1500-byte MTU less IPv4 (20) and UDP (8) headers


def get(name: str | None, field: str = "transport") -> Transport:
    """The transport called name (None: the default); exit 2 naming the field and the choices."""
    if name is None:
        return TRANSPORTS[DEFAULT]
    if not isinstance(name, str) or name not in TRANSPORTS:
        raise BadInput(field, f"{name!r} is not a transport; choose one of {', '.join(TRANSPORTS)}")
    return TRANSPORTS[name]


def check(protocol: str, name: str | None, field: str = "transport") -> Transport:
    """The transport, refusing one the protocol does not run over (SSH over QUIC: exit 2)."""
    t = get(name, field)
    why = t.refuses(protocol)
    if why:
        raise BadInput(field, why)
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


# --- the transport's axes (pqbench.axis) --------------------------------------------------------------
# A cell over TCP holds None, as every cell did before the axis: its id and its store row stay as they were.

def _transport_value(field: str, value) -> str | None:
    name = get(value, field).name
    return None if name == DEFAULT else name


def _own(p) -> str | None:
    """A cell's transport where none is named: its protocol's own (its cells and ids hold None for TCP)."""
    return None if p.transports[0] == DEFAULT else p.transports[0]


def _over_quic(values) -> bool:
    return values.get("transport") == "quic"


def _refused(value, name: str) -> str | None:
    """Why no cell of protocol name runs over the transport (SSH over QUIC, DTLS over TCP), or None. A cell of a
    protocol whose own transport is another than TCP holds its name (_own)."""
    return TRANSPORTS[value or DEFAULT].refuses(name)


def _initial_size_range(value: int, caps, role: str, values) -> str | None:
    if role == "client" and caps.initial_sizes:
        lo, hi = caps.initial_sizes
        if not lo <= value <= hi:
            return f"sends Initial datagrams of {lo}..{hi} bytes, not {value}"
    return None


_QUIC_ONLY = 'applies to QUIC cells: add "quic" to axes.transport'
axis.register(
    axis.Axis("transport", _transport_value, "tcp, quic or udp", admits=_refused, default_for=_own,
              help="tcp (default) or quic: TLS 1.3 over QUIC, HTTP/3 for pages (stacks openssl and quicgo, built on "
                   "first use); a protocol of its own transport runs over it (DTLS: udp)", to_job=lambda v: {"transport": v or DEFAULT}, site=True, to_site=lambda v: {"transport": v or DEFAULT},
              order=30, label=lambda v, row, short: TRANSPORTS[v].label if v != DEFAULT else None),
    # RFC 9000 §8.1: the server validates the client's address with a Retry packet before the handshake
    axis.Axis("quic_retry", lambda field, v: _flag(field, v), "true or false", default=False, sql="BOOLEAN",
              protocols=lambda p: "quic" in p.transports,
              applies=_over_quic, needs_text=_QUIC_ONLY, server_feature="retry", site=True,
              help="with --transport quic: the server validates the client's address with a Retry first",
              to_site=lambda v: {"retry": bool(v)}, order=31, label=lambda v, row, short: "Retry" if v else None),
    # the UDP payload of the client's Initial datagrams (None: the client's default)
    axis.Axis("initial_size", lambda field, v: check_initial_size(v, field), "datagram sizes", sql="INTEGER",
              protocols=lambda p: "quic" in p.transports,
              applies=_over_quic, needs_text=_QUIC_ONLY, client_feature="initial_size", check=_initial_size_range,
              help=f"with --transport quic: the UDP payload of the client's Initial datagrams ({MIN_INITIAL}..{MAX_INITIAL})",
              to_job=lambda v: {"initial_size": v}, order=32,
              label=lambda v, row, short: f"Initial {v}"),
)


def _flag(field: str, value) -> bool:
    if not isinstance(value, bool):
        raise BadInput(field, f"{value!r} is not true or false")
    return value
