"""An IKEv2 handshake as the initiating charon's log tells it (filelog, time_format %s, time_precision us): each
datagram it sent and received with its time and size, the exchange each belongs to, retransmissions, and where
the IKE SA was established. One charon per sample (pqbench.endpoints.strongswan.ikeclient), so every line is about
that sample's one IKE SA.

The log's times are the machine's real-time clock in microseconds. Each datagram has two lines: at level 1 the
one with its size, written as charon queues it for its sender thread (sending) or as a worker thread takes it up
(received), and at level 2 (net = 2) the socket's own, written as the sender thread hands it to the kernel or the
receiver thread has read it. A datagram's time is its socket line's: the level-1 line of a received one came
0.3-0.4 ms after the datagram at 31.1 ms (a worker thread's wake-up), which the wire would have shown as the client's
lag. Both kinds come in order (one queue each way), so the n-th socket line is the n-th datagram's. Its
sizes are the IKE message's; where neither port is 500, a datagram carries 4 bytes more, the Non-ESP marker of
UDP encapsulation (RFC 3948; strongSwan's sender adds it then), and the wire's offsets count those.
"""

from __future__ import annotations

import dataclasses
import re

_LINE = re.compile(r"^(\d+)\.(\d{6}) \d+\[(\w+)\] (.*)$")
_GENERATING = re.compile(r"generating (\S+) request (\d+) \[ (.*) \]")
_PARSED = re.compile(r"parsed (\S+) response (\d+) \[ (.*) \]")
_PACKET = re.compile(r"(sending|received) packet: from \S+\[(\d+)\] to \S+\[(\d+)\] \((\d+) bytes\)")
_SOCKET = re.compile(r"(sending|received) packet: from \S+\[\d+\] to \S+\[\d+\]$")  # level 2: no size
_RETRANSMIT = re.compile(r"retransmit (\d+) of request with message ID (\d+)")
_PROPOSAL = re.compile(r"selected proposal: IKE:(\S+)")
_AUTH = re.compile(r"authentication of '[^']*' with (\S+) successful")
_ESTABLISHED = re.compile(r"IKE_SA \S+ established between")
IKE_PORT = 500
NON_ESP_MARKER = 4


@dataclasses.dataclass
class Exchange:
    """One request and its response, as the initiator saw them (times in ns of the real-time clock)."""
    name: str  # IKE_SA_INIT, IKE_INTERMEDIATE, IKE_AUTH
    message_id: int
    sent_ns: list = dataclasses.field(default_factory=list)  # each datagram sent, retransmissions included
    sent_bytes: list = dataclasses.field(default_factory=list)
    received_ns: list = dataclasses.field(default_factory=list)  # each datagram of the response(s) received
    received_bytes: list = dataclasses.field(default_factory=list)
    received_offsets: list = dataclasses.field(default_factory=list)  # UDP payload bytes received before each
    retransmits: int = 0
    tries: int = 1  # IKE_SA_INIT sent again after a COOKIE or INVALID_KE_PAYLOAD answer

    def to_json(self) -> dict:
        return {"exchange": self.name, "message_id": self.message_id, "datagrams_sent": len(self.sent_ns),
                "bytes_sent": sum(self.sent_bytes), "datagrams_received": len(self.received_ns),
                "bytes_received": sum(self.received_bytes), "retransmits": self.retransmits, "tries": self.tries}


@dataclasses.dataclass
class Handshake:
    exchanges: list
    local_port: int | None
    proposal: str | None  # as charon names it: AES_GCM_16_256/PRF_HMAC_SHA2_384/CURVE_25519/KE1_ML_KEM_768
    auth: str | None  # how the server's AUTH was verified: ECDSA_WITH_SHA256_DER …
    established_ns: int | None
    unassigned_received: int  # datagrams received after the last response parsed (a server's retransmission)

    def exchange(self, name: str) -> list:
        return [e for e in self.exchanges if e.name == name]

    def phases_ns(self, start_ns: int) -> dict:
        """pqbench.sample.IkePhase's times since start_ns (real-time ns), None where it did not happen."""
        since = lambda t: t - start_ns if t is not None else None  # noqa: E731
        init, mid, auth = self.exchange("IKE_SA_INIT"), self.exchange("IKE_INTERMEDIATE"), self.exchange("IKE_AUTH")
        last = lambda ex: ex[-1].received_ns[-1] if ex and ex[-1].received_ns else None  # noqa: E731
        return {"ike_sa_init_sent": since(init[0].sent_ns[0] if init and init[0].sent_ns else None),
                "ike_sa_init_received": since(last(init)),
                "intermediate_received": since(last(mid)),
                "ike_auth_sent": since(auth[0].sent_ns[0] if auth and auth[0].sent_ns else None),
                "ike_auth_received": since(last(auth)),
                "handshake_done": since(self.established_ns)}

    def wire_milestone(self) -> dict | None:
        """The datagram that completed the IKE_AUTH response, by the server's UDP payload bytes before it (what
        pqbench.measure.quic_wire.milestone_ns finds in the emulator's record)."""
        auth = self.exchange("IKE_AUTH")
        if not auth or not auth[-1].received_offsets or self.established_ns is None:
            return None
        return {"dir": "s2c", "offset": auth[-1].received_offsets[-1]}


def _ns(sec: str, usec: str) -> int:
    return int(sec) * 1_000_000_000 + int(usec) * 1000


def parse(lines) -> Handshake:
    exchanges: dict[int, Exchange] = {}
    sending: Exchange | None = None  # the request whose datagrams the next "sending packet" lines are
    pending: list[tuple[int, int, int]] = []  # received datagrams not yet parsed as a response: (ns, bytes, offset)
    received_total = 0
    local_port = proposal = auth = established = None
    unsent: list[tuple[list, int]] = []  # sent datagrams whose socket line is to come: (their exchange's times, index)
    arrived: list[int] = []  # socket lines of received datagrams whose sized line is to come
    for line in lines:
        m = _LINE.match(line.rstrip("\n"))
        if not m:
            continue
        if established is not None:
            break  # what follows (the SA's deletion) is not the handshake's
        t, msg = _ns(m.group(1), m.group(2)), m.group(4)
        if g := _GENERATING.search(msg):
            mid = int(g.group(2))
            ex = exchanges.get(mid)
            if ex is None:
                ex = exchanges[mid] = Exchange(g.group(1), mid)
            elif ex.sent_ns and not g.group(3).startswith("EF("):  # a fragment's line is its message's, not a try
                ex.tries += 1
            sending = ex
        elif r := _RETRANSMIT.search(msg):
            sending = exchanges.get(int(r.group(2)))
            if sending is not None:
                sending.retransmits += 1
        elif k := _SOCKET.search(msg):
            if k.group(1) == "received":
                arrived.append(t)
            elif unsent:
                times, index = unsent.pop(0)
                times[index] = t
        elif p := _PACKET.search(msg):
            size, ports = int(p.group(4)), (int(p.group(2)), int(p.group(3)))
            on_wire = size + (NON_ESP_MARKER if IKE_PORT not in ports else 0)
            if p.group(1) == "sending":
                local_port = local_port or int(p.group(2))
                if sending is not None:
                    sending.sent_ns.append(t)  # until its socket line says when it left
                    sending.sent_bytes.append(size)
                    unsent.append((sending.sent_ns, len(sending.sent_ns) - 1))
            else:
                pending.append((arrived.pop(0) if arrived else t, size, received_total))
                received_total += on_wire
        elif q := _PARSED.search(msg):
            ex = exchanges.get(int(q.group(2)))
            if ex is not None:
                for ns, size, offset in pending:
                    ex.received_ns.append(ns)
                    ex.received_bytes.append(size)
                    ex.received_offsets.append(offset)
            pending = []
        elif s := _PROPOSAL.search(msg):
            proposal = s.group(1)
        elif a := _AUTH.search(msg):
            auth = a.group(1)
        elif _ESTABLISHED.search(msg) and established is None:
            established = t
    return Handshake(sorted(exchanges.values(), key=lambda e: e.message_id), local_port, proposal, auth,
                     established, len(pending))
