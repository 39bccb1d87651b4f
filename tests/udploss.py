"""Shared by the datagram stacks' loss tests (test_dtls, test_dtls_boring): a lossy cell's samples split into the
median of those the link took nothing from and those that came late, each late one checked to have lost a datagram
and waited at least `timer_ms` (less a margin) beyond that median: a timer, not a round trip."""

RTT = 31.1


def late_by_a_timer(samples: list[dict], timer_ms: float, margin_ms: float) -> tuple[float, list[dict]]:
    """(the clean median on the wire, the late samples), asserting what each late one says."""
    ok = [s for s in samples if s["ok"]]
    clean = sorted(s["wire"]["ms"] for s in ok if not (s["wire"]["drops_c2s"] or s["wire"]["drops_s2c"]))
    base = clean[len(clean) // 2]
    late = [s for s in ok if s["wire"]["ms"] > base + RTT / 2]
    assert late, "the seeded loss delayed no handshake"
    for s in late:
        assert s["wire"]["drops_c2s"] or s["wire"]["drops_s2c"], s["wire"]  # only a loss delays a handshake
        assert s["wire"]["ms"] >= base + timer_ms - margin_ms, (base, s["wire"]["ms"])
    return base, late
