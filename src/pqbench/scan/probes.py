"""The scan's probes of what breaks in the field, each a line with a verdict:

- split ClientHello and oversized ClientHello (pqbench.scan.ossify): accepted, alert, reset, closed, silent;
- the server's first flight against TCP's initial window and QUIC's amplification budget: fits, or
  costs a round trip;
- a client that predicts X25519 (a key share for it, the server's other groups listed): HelloRetryRequest
  needed or not;
- QUIC tried on the target's port over UDP (HTTP/3, pqtimer's QUIC client: OpenSSL 3.5's): answered or not,
  the groups accepted over TCP that it accepts over QUIC too, and its first flight against the 3x budget
  from the bytes it sent (not from datagram timing).
"""

from __future__ import annotations

import math

from pqbench.scan import ossify

# Linux's initial window: 10 segments (RFC 6928) of 1,448 bytes (MTU 1500, IPv4, TCP timestamps)
TCP_IW_SEGMENTS = 10
TCP_MSS = 1448
TCP_IW_BYTES = TCP_IW_SEGMENTS * TCP_MSS
# QUIC (RFC 9000 §8.1): before the client's address is validated a server sends at most 3x what it received;
# a client's first Initial datagram is at least 1,200 bytes
QUIC_INITIAL = 1200
QUIC_BUDGET = 3 * QUIC_INITIAL
QUIC_PACKET_OVERHEAD = 50  # a long header, a packet number, the AEAD tag and the frame headers, per datagram
HANDSHAKE_MESSAGES = ("server_hello", "encrypted_extensions", "certificate", "compressed_certificate",
                      "certificate_request", "certificate_verify", "finished")


def first_flight(sample: dict) -> dict:
    """The server's first flight as the client received it: TCP payload bytes until the handshake
    completed (TLS records included), and its handshake messages' bytes alone (QUIC's CRYPTO frames)."""
    tcp = (sample.get("tcp_handshake") or {}).get("bytes_received")
    msgs = sample.get("msg_bytes_received") or {}
    return {"tcp_bytes": tcp, "handshake_message_bytes": sum(msgs.get(m, 0) for m in HANDSHAKE_MESSAGES)}


def budget_lines(sample: dict, chain_bytes: int) -> list[dict]:
    flight = first_flight(sample)
    out = []
    tcp = flight["tcp_bytes"]
    if tcp:
        rounds = max(0, math.ceil(tcp / TCP_IW_BYTES) - 1)
        out.append({"probe": "first flight vs TCP initial window",
                    "verdict": "fits" if rounds == 0 else "costs a round trip" if rounds == 1 else f"costs {rounds} round trips",
                    "bytes": tcp, "chain_bytes": chain_bytes, "limit_bytes": TCP_IW_BYTES,
                    "detail": f"{tcp} B (chain {chain_bytes} B) against {TCP_IW_SEGMENTS} x {TCP_MSS} B = {TCP_IW_BYTES} B"})
    crypto = flight["handshake_message_bytes"]
    if crypto:
        on_wire = crypto + math.ceil(crypto / (QUIC_INITIAL - QUIC_PACKET_OVERHEAD)) * QUIC_PACKET_OVERHEAD
        # beyond the budget the server waits for the client's next datagram, which validates its address
        out.append({"probe": "first flight vs QUIC 3x amplification budget",
                    "verdict": "fits" if on_wire <= QUIC_BUDGET else "costs a round trip",
                    "bytes": on_wire, "chain_bytes": chain_bytes, "limit_bytes": QUIC_BUDGET,
                    "detail": f"about {on_wire} B ({crypto} B of handshake messages, {QUIC_PACKET_OVERHEAD} B per datagram "
                              f"estimated) against 3 x {QUIC_INITIAL} B = {QUIC_BUDGET} B; from the TCP handshake, "
                              "not measured over QUIC"})
    return out


def hrr_for_x25519(prober, accepted: list[str]) -> dict:
    """A client that predicts X25519: its key share, the server's other accepted groups listed after it."""
    offer = ":".join(["*X25519", *(g for g in accepted if g.lower() != "x25519")])
    s = prober.decided(offer)
    line = {"probe": "HelloRetryRequest for a client predicting X25519", "offered": offer,
            **({"earlier_failures": s["earlier_failures"]} if s.get("earlier_failures") else {})}
    if not s.get("ok"):
        return line | {"verdict": "failed", "detail": s.get("error") or s.get("error_class") or "no handshake"}
    chose = next((g for g in accepted if g.lower() == str(s.get("group")).lower()), s.get("group"))
    return line | {"verdict": "needed" if s.get("hrr") else "not needed", "group": chose,
                   "detail": f"the server {'asked for a key share for' if s.get('hrr') else 'answered with'} {chose}"}


def ossification_lines(prober, address, accepted: list[str], favourite: str | None) -> list[dict]:
    out = []
    for name, offer, split in (("split ClientHello", ossify.split_offer(accepted, favourite), True),
                               ("oversized ClientHello", ossify.oversized_offer(accepted, favourite), False)):
        r = ossify.probe(prober, address, offer, split=split)
        how = (f"{r['client_hello_bytes']} B in two segments {SPLIT_WORDS} {ossify.SPLIT_PAUSE_S * 1000:g} ms apart"
               if split else f"{r['client_hello_bytes']} B with key shares {', '.join(r['key_shares'])}")
        out.append({"probe": name, **r, "detail": how + (f"; {r['error']}" if r.get("error") and r["verdict"] != "accepted" else "")})
    return out


SPLIT_WORDS = "(its record cut in half)"


def quic_lines(prober, accepted: list[str], favourite: str | None) -> list[dict]:
    """QUIC on the same port number over UDP: the favourite first; when that fails, no other is tried."""
    first = favourite or accepted[0]
    s = prober.one(first, transport="quic")
    if not s.get("ok"):
        return [{"probe": "QUIC on the UDP port", "verdict": "no answer",
                 "detail": f"{first}: {s.get('error_class')}: {s.get('error') or ''}".strip()}]
    over_quic = {first: s}
    for g in accepted:
        if g != first:
            t = prober.one(g, transport="quic")
            if t.get("ok"):
                over_quic[g] = t
    groups = [g for g in accepted if g in over_quic]
    q = s.get("quic") or {}
    out = [{"probe": "QUIC on the UDP port", "verdict": "answered", "groups": groups,
            "detail": f"groups accepted over QUIC: {', '.join(groups)}"
                      + (f"; not over QUIC: {', '.join(g for g in accepted if g not in over_quic)}"
                         if len(groups) < len(accepted) else "")}]
    got, initial = q.get("bytes_received"), q.get("initial_size")
    # the client's first flight: its Initial datagrams before anything else (a large ClientHello takes two)
    kinds = q.get("sent_kinds") or []
    firsts = next((k for k, kind in enumerate(kinds) if kind != "I"), len(kinds)) or 1
    if got and initial:
        budget = 3 * initial * firsts
        out.append({"probe": "QUIC first flight vs 3x amplification budget (measured)",
                    "verdict": "fits" if got <= budget else "costs a round trip", "bytes": got, "limit_bytes": budget,
                    "detail": f"{got} B received in {q.get('datagrams_received')} datagrams for the handshake against "
                              f"3 x {firsts} x {initial} B = {budget} B (the client's first Initial datagrams; from byte counts, "
                              "not datagram timing)"})
    return out


def run(prober, address, accepted: list[str], favourite: str | None, sample: dict, chain_bytes: int,
        quic: bool = True) -> list[dict]:
    """Every probe's line, in the order the report shows them."""
    return [*ossification_lines(prober, address, accepted, favourite), hrr_for_x25519(prober, accepted),
            *budget_lines(sample, chain_bytes), *(quic_lines(prober, accepted, favourite) if quic else [])]
