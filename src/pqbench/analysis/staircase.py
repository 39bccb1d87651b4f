"""The byte staircase: how many round trips the server's first flight costs as it grows, and how many more bytes
fit before the next one (the headroom).

The steps come from the lower-bound model (pqbench.analysis.model), so they are the model's own:
  - TCP: the flight leaves in segments of one MSS; initcwnd segments go at once, and slow start doubles the
    window each round trip, so k extra round trips carry initcwnd × (2^(k+1) − 1) segments
    (tcp_thresholds says so in closed form; the model's timeline gives the same);
  - QUIC: before the client's address is validated the server sends at most 3 × the bytes it received (its
    Initial datagrams), so a flight beyond that budget waits one round trip (RFC 9000 §8.1); after it the model
    knows no further step.

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
    """QUIC's staircase in handshake bytes: the 3× budget (quic_budget_bytes), then no step the model knows
    (MAX_FLIGHT): once the client's answer has validated its address the rest of the flight goes at once, as
    the model's timeline has it. (A sweep to 50 kB with nginx's QUIC showed no further step at 31.1 ms; a stack
    whose congestion window binds would show one, and the report's measured steps would say so.)"""
    return [quic_budget_bytes(cond), MAX_FLIGHT]


def tcp_thresholds(initcwnd: int, mss: int, steps: int = 4) -> list[int]:
    """TCP's staircase in closed form: k extra round trips carry initcwnd × (2^(k+1) − 1) segments of mss."""
    return [initcwnd * (2 ** (k + 1) - 1) * mss for k in range(steps)]


def quic_budget_bytes(cond: Condition) -> int:
    """The handshake bytes a QUIC server's flight may carry before the client's next datagram: the 3× budget
    in full datagrams, less each datagram's packet overhead."""
    budget = model.amplification_budget(cond.client_hello, cond.initial_size or model.QUIC_DATAGRAM)
    per = model.QUIC_DATAGRAM - model.QUIC_PACKET_OVERHEAD
    return (budget // model.QUIC_DATAGRAM) * per


def headroom(cond: Condition, flight: int) -> int | None:
    """Bytes that still fit in the flight before it costs its next round trip (None: the model knows no next
    step, as over QUIC past the budget)."""
    k = extra_round_trips(cond, flight)
    steps = thresholds(cond, up_to=flight)
    while len(steps) <= k and steps[-1] < MAX_FLIGHT:
        steps = thresholds(cond, up_to=steps[-1] * 2 + 1)
    return None if len(steps) <= k or steps[k] >= MAX_FLIGHT else steps[k] - flight


def predicted_ms(cond: Condition, flight: int, base_ms: float) -> float:
    """The staircase in time: base_ms (the handshake at the smallest flight) plus a round trip per step."""
    return base_ms + extra_round_trips(cond, flight) * cond.rtt_ms


def floor(times: list[float]) -> list[float]:
    """Each point's floor: the least time at its size or any larger one (sizes ascending). A staircase never
    comes down, so an isolated slow median (a late sample among few) does not make a step."""
    out, low = [], math.inf
    for t in reversed(times):
        low = min(low, t) if not math.isnan(t) else low
        out.append(low)
    return out[::-1]


STEP_SHARE = 0.25  # a rise of the floor by more than this share of a round trip between neighbours is a step


def step_at(sizes: list[int], times: list[float], rtt_ms: float) -> list[tuple[int, int]]:
    """Where a measured sweep steps up: (the last size below, the first size at) each rise of its floor by more
    than a quarter of a round trip between neighbours (sizes ascending). Not half: within a step the time grows
    with the flight (ACK-clocked segments), so a later step adds less than a whole round trip to it (at 31.1 ms
    and initcwnd 10 the step at 43 kB added 12 ms to a flight already 20 ms slower than the one at 14 kB)."""
    low = floor(times)
    return [(sizes[k - 1], sizes[k]) for k in range(1, len(sizes)) if low[k] - low[k - 1] > STEP_SHARE * rtt_ms]


def off_by(bracket: tuple[int, int], threshold: int) -> int:
    """Bytes between a predicted threshold (the largest flight without the step) and a measured step that lies
    between bracket's sizes: 0 when the threshold lies within it."""
    below, at = bracket
    if below <= threshold < at:
        return 0
    return below - threshold if threshold < below else threshold - at + 1
