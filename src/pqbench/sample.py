"""The sample: what every client reports per connection, defined once.

Common fields (ok, error class, phase times, bytes and packets per direction, negotiated
algorithms, stack, protocol, the local port that joins the wire record) are the same for every
protocol; what only one protocol has (TLS handshake message sizes, records, HTTP) stays in its own
part. Clients emit JSON lines; `Sample.from_json` types them.
"""

from __future__ import annotations

import dataclasses
import enum


class Phase(str, enum.Enum):
    """Milestones of a TLS connection in the order they happen, named as clients print them (every timing
    client's t_ns is tested against TIMELINES below: tests/test_phase_names.py). Times are ns since START.
    Over QUIC there is no TCP connect, the ClientHello leaves in the first Initial datagram, and the
    server's Handshake packets (EncryptedExtensions … Finished) follow its Initial (ServerHello)."""
    START = "start"  # before the TCP connect, or the first datagram
    TCP_CONNECTED = "tcp_connected"
    CLIENT_HELLO_SENT = "client_hello_sent"
    SERVER_HELLO_RECEIVED = "server_hello_received"
    HANDSHAKE_PACKET_RECEIVED = "handshake_packet_received"  # QUIC: the server's first Handshake packet
    SERVER_FINISHED_RECEIVED = "server_finished_received"
    HANDSHAKE_DONE = "handshake_done"
    FIRST_BYTE = "first_byte"
    LAST_BYTE = "last_byte"


class SshPhase(str, enum.Enum):
    """The milestones of an SSH connection, as sshtimer (native/sshgo) prints them; handshake_done is
    the client's NEWKEYS (newkeys_sent), where TLS's handshake_done is its Finished. The server's NEWKEYS
    (newkeys_received) may come before or after the client's."""
    START = "start"
    TCP_CONNECTED = "tcp_connected"
    SERVER_IDENT_RECEIVED = "server_ident_received"
    KEXINIT_EXCHANGED = "kexinit_exchanged"
    KEX_REPLY_RECEIVED = "kex_reply_received"
    NEWKEYS_SENT = "newkeys_sent"
    NEWKEYS_RECEIVED = "newkeys_received"
    HANDSHAKE_DONE = "handshake_done"
    USERAUTH_DONE = "userauth_done"
    COMMAND_DONE = "command_done"


class IkePhase(str, enum.Enum):
    """The milestones of an IKEv2 handshake (RFC 7296), as pqbench's strongSwan client reads them from its charon's
    log: each exchange's request leaving and its response arriving. With additional key exchanges (RFC 9370) an
    IKE_INTERMEDIATE exchange (RFC 9242) per ML-KEM comes between IKE_SA_INIT and IKE_AUTH; handshake_done is the
    IKE_SA established (the IKE_AUTH response in and the server's AUTH payload verified)."""
    START = "start"  # the initiation asked of the client's charon
    IKE_SA_INIT_SENT = "ike_sa_init_sent"  # its first IKE_SA_INIT request left (the key share made)
    IKE_SA_INIT_RECEIVED = "ike_sa_init_received"  # the IKE_SA_INIT response that was answered arrived
    INTERMEDIATE_RECEIVED = "intermediate_received"  # the last IKE_INTERMEDIATE response arrived (none: no extra KE)
    IKE_AUTH_SENT = "ike_auth_sent"  # the IKE_AUTH request left (its first fragment)
    IKE_AUTH_RECEIVED = "ike_auth_received"  # the IKE_AUTH response arrived (its last fragment): the wire's end
    HANDSHAKE_DONE = "handshake_done"  # the SA established: the server's certificates and AUTH verified


# The phases a sample reports a time for (START is their zero); the store has a column for each (SSH's own
# came with migration 5, QUIC's with 13).
PHASES = tuple(p.value for p in Phase if p is not Phase.START)
# The TLS phases the store's first schema had columns for.
PHASES_V1 = tuple(p for p in PHASES if p != Phase.HANDSHAKE_PACKET_RECEIVED.value)
SSH_PHASES = tuple(p.value for p in SshPhase if p is not SshPhase.START)
# SSH's phases that TLS has no column for (the store adds theirs in migration 5).
SSH_ONLY_PHASES = tuple(p for p in SSH_PHASES if p not in PHASES)
IKE_PHASES = tuple(p.value for p in IkePhase if p is not IkePhase.START)
# IKEv2's phases that neither TLS nor SSH has a column for (the store adds theirs in migration 14).
IKE_ONLY_PHASES = tuple(p for p in IKE_PHASES if p not in PHASES + SSH_PHASES)
# Every phase the store has a column for, TLS's first.
STORED_PHASES = PHASES + SSH_ONLY_PHASES + IKE_ONLY_PHASES
# What a sample's headline duration measures, per mode.
# resume_page: a resumed handshake, then GET the page; early: a resumed handshake whose GET goes as 0-RTT
# early data (both to the page's last byte, as page mode: full / resumed / 0-RTT compare directly).
END_PHASE = {"handshake": Phase.HANDSHAKE_DONE.value, "resume": Phase.HANDSHAKE_DONE.value,
             "page": Phase.LAST_BYTE.value, "requests": Phase.LAST_BYTE.value,
             "resume_page": Phase.LAST_BYTE.value, "early": Phase.LAST_BYTE.value}
MODES = tuple(END_PHASE)
# Fields of a client's JSON line that are common to every protocol; the rest is protocol-specific.
COMMON_FIELDS = ("worker", "i", "mode", "ok", "error_class", "error", "t_ns", "start_mono_ns", "group", "sigalg",
                 "local_port", "tcp_handshake", "tcp_end", "wire", "stack", "protocol")


@dataclasses.dataclass
class Sample:
    ok: bool
    mode: str
    t_ns: dict  # phase name -> ns since START (None where the phase did not happen or cannot be seen)
    error_class: str | None = None
    error: str | None = None
    worker: int | None = None
    i: int | None = None
    start_mono_ns: int | None = None
    group: str | None = None
    sigalg: str | None = None
    local_port: int | None = None
    tcp_handshake: dict | None = None  # the client socket's TCP_INFO at handshake completion
    tcp_end: dict | None = None  # … at the end of the sample
    wire: dict | None = None  # the emulator's record of the connection (pqbench.measure.wire.summary)
    stack: str = "openssl"
    protocol: str = "tls"
    specific: dict = dataclasses.field(default_factory=dict)  # protocol-specific fields

    @classmethod
    def from_json(cls, d: dict, *, stack: str = "openssl", protocol: str = "tls") -> "Sample":
        common = {k: d.get(k) for k in COMMON_FIELDS if k in d}
        common.setdefault("stack", stack)
        common.setdefault("protocol", protocol)
        common["ok"] = bool(common.get("ok"))
        common["t_ns"] = dict(common.get("t_ns") or {})
        common.setdefault("mode", "handshake")
        return cls(**common, specific={k: v for k, v in d.items() if k not in COMMON_FIELDS})

    def duration_ms(self, metric: str | None = None) -> float | None:
        """The headline duration (the mode's end phase) of a successful sample, ms."""
        t = self.t_ns.get(metric or END_PHASE[self.mode])
        return t / 1e6 if self.ok and t is not None else None

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "specific"}
        return {**{k: v for k, v in d.items() if v is not None}, **self.specific}


@dataclasses.dataclass(frozen=True)
class Milestone:
    """Where a sample's metric ends on the wire (each client names one per mode; measure.wire finds it
    in the emulator's record): the `edge` ("first" or "last") packet of the `index`-th flight (0-based; -1 = the last) that
    went in direction `dir` ("c2s" or "s2c")."""
    dir: str
    index: int
    edge: str


# TLS over TCP: the client's Finished leads its second flight; a response ends the server's last.
TLS_MILESTONES = {"handshake": Milestone("c2s", 1, "first"), "resume": Milestone("c2s", 1, "first"),
                  "page": Milestone("s2c", -1, "last"), "requests": Milestone("s2c", -1, "last"),
                  "resume_page": Milestone("s2c", -1, "last"), "early": Milestone("s2c", -1, "last")}
# TLS over QUIC, where no client resumes yet. Each QUIC sample names its own milestone (the datagram carrying
# the client's Finished, or the one that completed the response, by the UDP payload bytes before it); these
# are the defaults for one that does not.
QUIC_MILESTONES = {mode: TLS_MILESTONES[mode] for mode in ("handshake", "page", "requests")}
# SSH: the client's NEWKEYS in the common case (identification, KEXINIT, key exchange init, NEWKEYS). Which
# client flight carries it depends on whether the server's identification and KEXINIT reached the client in
# one flight or two (a race of microseconds), so sshtimer names the flight it saw per sample too.
SSH_MILESTONES = {"handshake": Milestone("c2s", 3, "first")}


@dataclasses.dataclass(frozen=True)
class Timeline:
    """What a timing client reports for one protocol over one transport: the phases it times (its t_ns keys
    besides START, their zero, in order) and where each mode's metric ends on the wire. A client may print
    the protocol's other phases as null (pqtimer prints every Phase over TCP and QUIC alike)."""
    phases: tuple[str, ...]
    milestones: dict  # mode -> Milestone
    # Over datagrams: the phase at which the client's first datagram left (the wire time's zero; over TCP the SYN)
    first_sent: str = Phase.CLIENT_HELLO_SENT.value
    # The phase the wire's milestone marks where it is not the metric's (IKEv2: the IKE_AUTH response's arrival;
    # the metric, the SA established, follows once the client has verified it, with nothing sent after)
    wire_end: str | None = None


# The one table of phase and milestone names: every timing client (pqtimer, tlsgo, quicgo, pqrustls, pqs2n,
# sshtimer) is tested against it. TCP has a connect and no Handshake packets; QUIC the other way round.
TIMELINES = {
    ("tls", "tcp"): Timeline(tuple(p for p in PHASES if p != Phase.HANDSHAKE_PACKET_RECEIVED.value), TLS_MILESTONES),
    ("tls", "quic"): Timeline(tuple(p for p in PHASES if p != Phase.TCP_CONNECTED.value), QUIC_MILESTONES),
    ("ssh", "tcp"): Timeline(SSH_PHASES, SSH_MILESTONES),
}


def timeline(protocol: str = "tls", transport: str = "tcp") -> Timeline:
    return TIMELINES[protocol, transport]
