"""The byte staircase: how many round trips the server's first flight costs as it grows, and how many more bytes
fit before the next one (the headroom).

The steps come from the lower-bound model (pqbench.analysis.model), so they are the model's own:
  - TCP: the flight leaves in segments of one MSS; initcwnd segments go at once, and slow start doubles the
    window each round trip, so k extra round trips carry initcwnd × (2^(k+1) − 1) segments
    (tcp_thresholds says so in closed form; the model's timeline gives the same);
  - QUIC: before the client's address is validated the server sends at most 3 × the bytes it received (its
    Initial datagrams), so a flight beyond that budget waits one round trip (RFC 9000 §8.1); after it, the
    congestion window (RFC 9002's initial window, grown by what the client acknowledged) sets the next steps
    (quic_thresholds; the model's timeline stops at the budget).

The flight is measured as the model counts it: TCP payload of ServerHello … Finished with the TLS records'
overhead (model.Flights.server_flight), over QUIC the handshake bytes in CRYPTO frames.
"""

from __future__ import annotations

import dataclasses
import math

from pqbench.analysis import model

MAX_FLIGHT = 1 << 20  # a megabyte of first flight: past any chain this tool makes


@dataclasses.dataclass(frozen=True)
class Condition:
    """What the staircase depends on: the path's RTT, MTU and TCP's initial window, the transport, and the
    ClientHello (over QUIC its size sets the budget)."""
    rtt_ms: float
    initcwnd: int = model.DEFAULT_INITCWND
    mtu: int = 1500
    transport: str | None = None  # pqbench.transport names; None: TCP
    client_hello: int = 1400  # bytes of the ClientHello record(s) (X25519MLKEM768: about 1.4 kB)
    initial_size: int | None = None  # QUIC: the client's Initial datagrams' UDP payload

    def link(self) -> model.Link:
        return model.Link.symmetric(self.rtt_ms, None, self.mtu, self.initcwnd)


def extra_round_trips(cond: Condition, flight: int) -> int:
    """Round trips a server flight of `flight` bytes costs beyond one: over TCP as the model's timeline times
    the window; over QUIC the steps of quic_thresholds."""
    from pqbench import transport as transportmod
    if transportmod.get(cond.transport).datagram:
        return sum(1 for t in quic_thresholds(cond, flight) if flight > t)
    flights = model.Flights(client_hello=cond.client_hello, server_flight=flight)
    bound = model.lower_bound(cond.link(), flights, model.Crypto(), transport=cond.transport,
                              initial_size=cond.initial_size)
    return round(bound.parts["slow_start_ms"] / cond.rtt_ms) if cond.rtt_ms > 0 else 0


def thresholds(cond: Condition, up_to: int = 60_000) -> list[int]:
    """The largest flight (bytes) that still costs k extra round trips, for k = 0, 1, … up to the first at or
    beyond up_to (each step of the staircase begins one byte later)."""
    from pqbench import transport as transportmod
    if transportmod.get(cond.transport).datagram:
        return quic_thresholds(cond, up_to)
    out, low = [], 1
    while True:
        k = extra_round_trips(cond, low)
        hi, step = low, 1024
        while hi + step <= MAX_FLIGHT and extra_round_trips(cond, hi + step) == k:  # gallop, then halve
            hi += step
            step *= 2
        while step >= 1:
            if hi + step <= MAX_FLIGHT and extra_round_trips(cond, hi + step) == k:
                hi += step
            step //= 2
        out.append(hi)
        if hi >= min(up_to, MAX_FLIGHT):
            return out
        low = hi + 1


def quic_thresholds(cond: Condition, up_to: int = 60_000) -> list[int]:
    """QUIC's staircase in handshake bytes: the 3× budget (quic_budget_bytes); then, the address validated by
    the client's answer, a congestion window of RFC 9002's initial window grown by the bytes that answer
    acknowledged (slow start), doubling each round trip after. Datagrams of 1200 bytes, each carrying 1200 less
    the packet overhead of handshake bytes."""
    per = model.QUIC_DATAGRAM - model.QUIC_PACKET_OVERHEAD
    budget = model.amplification_budget(cond.client_hello, cond.initial_size or model.QUIC_DATAGRAM)
    out = [quic_budget_bytes(cond)]
    window = model.QUIC_INITIAL_WINDOW + budget
    while out[-1] < up_to:
        out.append(out[-1] + (window // model.QUIC_DATAGRAM) * per)
        window *= 2
    return out


def tcp_thresholds(initcwnd: int, mss: int, steps: int = 4) -> list[int]:
    """TCP's staircase in closed form: k extra round trips carry initcwnd × (2^(k+1) − 1) segments of mss."""
    return [initcwnd * (2 ** (k + 1) - 1) * mss for k in range(steps)]


def quic_budget_bytes(cond: Condition) -> int:
    """The handshake bytes a QUIC server's flight may carry before the client's next datagram: the 3× budget
    in full datagrams, less each datagram's packet overhead."""
    budget = model.amplification_budget(cond.client_hello, cond.initial_size or model.QUIC_DATAGRAM)
    per = model.QUIC_DATAGRAM - model.QUIC_PACKET_OVERHEAD
    return (budget // model.QUIC_DATAGRAM) * per


def headroom(cond: Condition, flight: int) -> int:
    """Bytes that still fit in the flight before it costs its next round trip."""
    k = extra_round_trips(cond, flight)
    steps = thresholds(cond, up_to=flight)
    while len(steps) <= k:
        steps = thresholds(cond, up_to=steps[-1] * 2 + 1)
    return steps[k] - flight


def predicted_ms(cond: Condition, flight: int, base_ms: float) -> float:
    """The staircase in time: base_ms (the handshake at the smallest flight) plus a round trip per step."""
    return base_ms + extra_round_trips(cond, flight) * cond.rtt_ms


def step_at(sizes: list[int], times: list[float], rtt_ms: float) -> list[int]:
    """Where a measured sweep steps up: the first size of each jump of more than half a round trip between
    neighbours (sizes ascending)."""
    out = []
    for k in range(1, len(sizes)):
        if times[k] - times[k - 1] > rtt_ms / 2 and not math.isnan(times[k]):
            out.append(sizes[k])
    return out
