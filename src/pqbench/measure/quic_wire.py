"""QUIC on the wire: pure functions over one UDP connection's record from pqlink's wire recorder.

pqlink lists a UDP connection's first 256 datagrams as `[dir, t_ns, udp_payload_bytes, fate]`, in
time order, each stamped where a capture at the client side of the link would stamp it: a client
datagram (c2s) when it entered the link, with what the link did with it (`delivered`, `lost`,
`queue_drop`, or `in_flight` when the record was written); a server datagram (s2c) when it was
delivered to the client (server datagrams the link dropped never reach the client: they count only
in `s2c.lost` / `s2c.queue_drops`). `datagrams_overflow` counts those not listed (see
native/pqlink/README.md, "Wire recorder").

The anti-amplification stall (RFC 9000 §8.1): until the server has validated the client's address,
it may send at most `factor` (3) times the bytes it has received. A post-quantum certificate chain
does not fit in 3 × one Initial datagram, so the server stops at the limit and resumes when the
client's next datagram arrives. At the client side, with a round trip of R between the two ends of
the link, that shows as:

- the server's datagrams stop after it has sent within one datagram of `factor × received`, where
  received = the UDP payload bytes of the client's delivered datagrams the server had when it sent
  its last one (the client datagrams that entered the link at least R before that datagram reached
  the client: one delay out, one back);
- the client sends a further datagram (an ACK of what it got) that the server had not received then
  (it entered the link less than R before that last server datagram reached the client), and the
  server's next datagram reaches the client at least R after it entered the link: the server waited
  for it. So the gap seen at the client is about one R (less the time the client took to answer).

The rule, for each pair of consecutive server datagrams (j, j + 1) at the client, in order:

1. received_j = bytes of the delivered client datagrams with t + R <= t_j; limit_j = factor ×
   received_j; sent_j = the server's bytes up to and including j (those the client saw). A limit of 0
   (R longer than the record shows the server took to answer) is never a stall.
2. If sent_j > limit_j + one datagram, the server is beyond any limit: its address was validated
   (a client Handshake packet, a Retry token): no later gap is a stall. Stop.
3. A stall at j when: limit_j − sent_j < one datagram (the server could not send another full one;
   "one datagram" = the largest server datagram of the connection); the server went quiet,
   t_(j+1) − t_j >= R / 2; and a further delivered client datagram unblocked it: one with
   t_j − R < t <= t_(j+1) − R (the first such is the unblocking datagram); and, when the time of the
   client's Finished is known (`finished_ns`), the server's next datagram reached the client before
   the Finished left: a stalled server holds back the flight the client needs to finish, while a
   server that had sent all of it speaks next to answer the Finished. Then scanning goes on: the
   limit grows with what the server receives, and a client that only acknowledges Initial packets can
   meet it again (`count`).

Why these are robust:

- Loss of a server datagram: the client never sees it, so the bytes it saw fall a datagram short of
  the limit; a server that only waits for loss recovery (its flight already sent, below the limit)
  does not meet rule 3's first condition. A stall whose pre-stall server datagrams were partly lost
  is therefore missed rather than invented; `uncertain` says when no stall was found but the server
  lost datagrams on the link.
- Loss of a client datagram: only delivered client datagrams count as received or as unblocking;
  the server then waits for the client's next one (the stall is longer, `unblocked_by_ms` names the
  one that arrived).
- The handshake simply ending: no further server datagram, no stall. A server whose whole flight
  happened to end within one datagram of the limit (also after a Retry, whose token validated the
  address, when the flight ends near 3× the client's two Initials) and that speaks again only after the client's Finished, is told apart only by the Finished's time: give
  `finished_ns` (when the client's Finished datagram entered the link:
  `milestone_ns(flow, "c2s", sample["wire_milestone"]["offset"])` in handshake modes, or the sample's
  `handshake_done` in pqlink's clock). Without it such a connection counts as stalled.
- R: pass the link's round trip (`rtt_ns`, its two one-way delays). Without it, R is estimated from
  the record as the smaller of the first server datagram's time since the last client datagram before
  it and, with `finished_ns`, the first server datagram's time after the Finished; both include the
  server's own time to answer (its first flight waits for its key exchange and signature), so an
  estimate can miss stalls behind a slow signature (SLH-DSA).
"""

from __future__ import annotations

DIRS = ("c2s", "s2c")
FATES = ("delivered", "lost", "queue_drop", "in_flight")


def _datagrams(flow: dict) -> list[tuple[str, int, int, str]]:
    rows = flow.get("datagrams")
    if rows is None:
        raise ValueError("flow: no 'datagrams' list (not a UDP record from a pqlink that lists datagrams)")
    out = []
    for i, row in enumerate(rows):
        if not (isinstance(row, (list, tuple)) and len(row) == 4):
            raise ValueError(f"flow.datagrams[{i}]: want [dir, t_ns, bytes, fate], got {row!r}")
        d, t, n, fate = row
        if d not in DIRS or fate not in FATES or not isinstance(t, int) or not isinstance(n, int) or n < 0:
            raise ValueError(f"flow.datagrams[{i}]: bad datagram {row!r}")
        out.append((d, t, n, fate))
    return out


def _check_dir(dir: str) -> None:
    if dir not in DIRS:
        raise ValueError(f"dir: must be 'c2s' or 's2c', got {dir!r}")


def datagram_counts(flow: dict) -> dict:
    """Datagrams and UDP payload bytes per direction as the client side saw them (c2s: all the client
    sent; s2c: those delivered to it), with what the link dropped each way. From the record's counters,
    so complete even when the list was cut at its bound."""
    out = {}
    for d in DIRS:
        side = flow.get(d)
        if not isinstance(side, dict):
            raise ValueError(f"flow.{d}: missing")
        out[d] = {"datagrams": side.get("packets", 0), "bytes": side.get("payload_bytes", 0),
                  "lost": side.get("lost", 0), "queue_drops": side.get("queue_drops", 0)}
    return out


def milestone_ns(flow: dict, dir: str, offset: int) -> int | None:
    """When the datagram of `dir` that begins after exactly `offset` UDP payload bytes of that
    direction passed the client side (a QUIC sample's `wire_milestone`); c2s counts every datagram the
    client sent, s2c those delivered to it. None when no datagram begins there, or the list ended
    before it."""
    _check_dir(dir)
    if not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset: must be a whole number of bytes >= 0, got {offset!r}")
    sent = 0
    for d, t, n, _fate in _datagrams(flow):
        if d != dir:
            continue
        if sent == offset:
            return t
        if sent > offset:
            return None
        sent += n
    return None


def _estimate_rtt(dgrams, finished_ns: int | None) -> int | None:
    estimates = []
    last_c2s = None
    for d, t, _n, _fate in dgrams:
        if d == "c2s":
            last_c2s = t
        elif last_c2s is not None:
            estimates.append(t - last_c2s)
            break
    if finished_ns is not None:
        after = next((t for d, t, _n, _f in dgrams if d == "s2c" and t > finished_ns), None)
        if after is not None:
            estimates.append(after - finished_ns)
    return min(estimates) if estimates else None


NO_STALL = {"stalled": False, "limit_bytes": None, "sent_before_stall": None, "stall_ms": None,
            "unblocked_by_ms": None, "count": 0}


def amplification(flow: dict, factor: int = 3, *, rtt_ns: int | None = None,
                  finished_ns: int | None = None) -> dict:
    """Whether the server stalled at the anti-amplification limit, by the rule in the module's
    docstring. The first stall's figures: `limit_bytes` (factor × received), `sent_before_stall` (the
    server's bytes the client saw before it), `stall_ms` (from the last server datagram before it to
    the first after it, at the client), `unblocked_by_ms` (when the client datagram that unblocked it
    entered the link, since the connection opened); `count` stalls in all, `stalls` each one's
    figures, `rtt_ms` the round trip used, `uncertain` when none was found but server datagrams were
    lost on the link, `complete` when the record listed every datagram."""
    if not isinstance(factor, int) or factor < 1:
        raise ValueError(f"factor: must be a whole number >= 1, got {factor!r}")
    if rtt_ns is not None and (not isinstance(rtt_ns, int) or rtt_ns <= 0):
        raise ValueError(f"rtt_ns: must be a whole number of ns > 0, got {rtt_ns!r}")
    dgrams = _datagrams(flow)
    s2c_side = flow.get("s2c") or {}
    extra = {"uncertain": False, "complete": not flow.get("datagrams_overflow"), "stalls": [], "rtt_ms": None}
    rtt = rtt_ns if rtt_ns is not None else _estimate_rtt(dgrams, finished_ns)
    server = [(t, n) for d, t, n, _f in dgrams if d == "s2c"]
    client = [(t, n) for d, t, n, fate in dgrams if d == "c2s" and fate == "delivered"]
    if rtt is None or not server:
        return {**NO_STALL, **extra}
    extra["rtt_ms"] = rtt / 1e6
    opened = flow.get("open_ns")
    if opened is None:
        opened = dgrams[0][1]
    one = max(n for _t, n in server)
    stalls = []
    sent = 0
    for j in range(len(server) - 1):
        t_j, n_j = server[j]
        t_next = server[j + 1][0]
        sent += n_j
        limit = factor * sum(n for t, n in client if t + rtt <= t_j)
        if sent > limit + one:
            break  # validated: the server is past any limit
        if not limit or limit - sent >= one or t_next - t_j < rtt / 2:
            continue  # nothing it answered yet (R too long), room for another datagram, or it did not go quiet
        if finished_ns is not None and t_next >= finished_ns:
            break  # the client had the whole flight: what follows answers its Finished
        unblock = next((t for t, _n in client if t_j - rtt < t <= t_next - rtt), None)
        if unblock is None:
            continue  # it resumed by itself (a timer): no client datagram it waited for
        stalls.append({"limit_bytes": limit, "sent_before_stall": sent, "stall_ms": (t_next - t_j) / 1e6,
                       "unblocked_by_ms": (unblock - opened) / 1e6})
    extra["stalls"] = stalls
    if not stalls:
        extra["uncertain"] = bool(s2c_side.get("lost") or s2c_side.get("queue_drops"))
        return {**NO_STALL, **extra}
    return {"stalled": True, **stalls[0], "count": len(stalls), **extra}
