"""The report's section on what deployed clients and servers do (cells with an offer, a server preference,
certificate compression or 0-RTT): each compared with its baseline at the same condition and link seed.

  offers       each offer's handshake time, HelloRetryRequest share and ClientHello size against the one-share
               baseline of the group the server chose (two shares' cost; a wrong prediction's extra round trip)
  compression  the Certificate message without and with compression per chain, and the time it saves
  0-RTT        time to the first response byte: full handshake, resumed, and resumed with early data
Differences are of medians with percentile-bootstrap CIs (pqbench.stats.bootstrap_diff)."""

from __future__ import annotations

from pqbench import stats, store
from pqbench.report.tables import Table, ms, with_ci
from pqbench.report.sections import Section, register

# What every comparison holds equal besides the field it varies.
SAME = ("sig", "scenario", "rtt_ms", "loss", "rate_mbit", "mtu", "initcwnd", "congctl", "page", "server", "client",
        "trace", "queue", "cross", "pad")


RESUMED = ("resume", "resume_page", "early")


def _key(c, *fields) -> tuple:
    return tuple(c.row.get(f) for f in SAME + fields)


def _diff(base, other) -> str:
    return with_ci(stats.bootstrap_diff(base.durations, other.durations, 50))


def _bytes(v) -> str:
    return "–" if v is None else f"{v:.0f}"


def _named(a, c) -> str:
    """The cell's algorithm, with its offer where it has one (several offers share a key exchange)."""
    return a.label(c) + (f" (offer {c.row['offer']})" if c.row.get("offer") else "")


def _mode(c) -> str:
    return {"page": "full", "resume_page": "resumed", "early": "0-RTT"}.get(c.row.get("mode"), c.row.get("mode") or "")


def offers(a) -> Table | None:
    cells = [c for c in a.cells if c.row.get("offer") and c.ok]
    if not cells:
        return None
    single = {_key(c, "server_groups", "compress", "mode") + (c.row["offer"],): c for c in cells if "+" not in c.row["offer"]
              and " / " not in c.row["offer"]}
    rows = []
    for c in sorted(cells, key=lambda c: (c.row.get("sig"), c.row.get("rtt_ms") or 0, c.row.get("loss") or 0,
                                          _mode(c), c.row["offer"])):
        chosen = c.groups[0] if len(c.groups) == 1 else None
        base = single.get(_key(c, "server_groups", "compress", "mode") + (_catalog(chosen, c.row["offer"]),))
        w = c.tls
        rows.append([c.row["offer"], str(c.row.get("server_groups") or "–"), str(c.row.get("sig")), _cond(c), ", ".join(c.groups) or "–", ms(c.p50),
                     f"{w['hrr_share']:.0%}" if w.get("hrr_share") is not None else "–", _bytes(w.get("client_hello_bytes")),
                     "baseline" if base is c else (_diff(base, c) if base else "–"),
                     _bytes(w["client_hello_bytes"] - base.tls["client_hello_bytes"])
                     if base and base is not c and base.tls.get("client_hello_bytes") and w.get("client_hello_bytes") else "–"])
    return Table("offers", "Client offers: key shares, HelloRetryRequests and the ClientHello's size",
                 ["offer", "server prefers", "chain", "condition", "negotiated", "p50 ms", "HRR", "ClientHello bytes",
                  "vs one share of the negotiated group (ms)", "ClientHello bytes added"], rows,
                 "An offer lists groups with key shares (A+B: both carry a share; A / B: a share for A, B listed only). "
                 "A wrong prediction costs a HelloRetryRequest: one more round trip. The baseline is the one-share "
                 "offer of the group the server chose, at the same condition and link seed.")


def _catalog(group: str | None, offer: str) -> str | None:
    """The offer notation of a one-share offer of the negotiated group (OpenSSL spells X25519 lowercase)."""
    if group is None:
        return None
    for name in offer.replace("/", "+").replace(":", "+").split("+"):
        if name.strip().lower() == group.lower():
            return name.strip()
    return group


def _cond(c) -> str:
    loss = 100 * (c.row.get("loss") or 0)
    return f"{c.row.get('rtt_ms') or 0:g} ms, {loss:g} %, {_mode(c)}" + (f", certs {c.row['compress']}"
                                                                      if c.row.get("compress") else "")


def compression(a) -> Table | None:
    cells = [c for c in a.cells if c.ok and c.row.get("mode") not in RESUMED]  # a resumption sends no chain
    if not any(c.row.get("compress") for c in cells):
        return None
    plain = {_key(c, "offer", "server_groups", "mode", "kex"): c for c in cells if not c.row.get("compress")}
    rows = []
    for c in sorted((c for c in cells if c.row.get("compress")), key=lambda c: (c.row.get("sig"), _cond(c), a.label(c))):
        base = plain.get(_key(c, "offer", "server_groups", "mode", "kex"))
        sent = c.tls.get("certificate_compressed_bytes")
        rows.append([str(c.row.get("sig")), _named(a, c), _cond(c), c.row["compress"],
                     _bytes(c.tls.get("certificate_bytes")), _bytes(sent) if sent else "not compressed",
                     f"{1 - sent / c.tls['certificate_bytes']:.0%}" if sent and c.tls.get("certificate_bytes") else "0 %",
                     ms(base.p50) if base else "–", ms(c.p50), _diff(base, c) if base else "–"])
    return Table("compression", "Certificate compression (RFC 8879): the chain on the wire and the time it saves",
                 ["chain", "algorithm", "condition", "compression", "Certificate bytes", "sent", "saved", "p50 without",
                  "p50 with", "difference (ms)"], rows,
                 "OpenSSL sends a compressed chain only when it is smaller: post-quantum keys and signatures do not "
                 "compress, so their chains go uncompressed. The server compresses each chain once, when it loads it.")


def zero_rtt(a, shares: dict) -> Table | None:
    cells = [c for c in a.cells if c.ok and c.row.get("mode") in ("page", "resume_page", "early")]
    if not any(c.row.get("mode") == "early" for c in cells):
        return None
    by = {_key(c, "offer", "server_groups", "compress", "kex") + (c.row.get("mode"),): c for c in cells}
    rows = []
    for c in sorted((c for c in cells if c.row.get("mode") == "early"), key=lambda c: (c.row.get("sig"), _cond(c), a.label(c))):
        k = _key(c, "offer", "server_groups", "compress", "kex")
        full, resumed = by.get(k + ("page",)), by.get(k + ("resume_page",))
        fate = shares.get(c.row["cell_id"], {})
        rows.append([_named(a, c), str(c.row.get("sig")),
                     _cond(c).replace(", 0-RTT", ""), ms(full.p50) if full else "–", ms(resumed.p50) if resumed else "–",
                     ms(c.p50), _diff(full, c) if full else "–", _diff(resumed, c) if resumed else "–",
                     f"{fate.get('accepted', 0)}/{sum(fate.values())}" if fate else "–"])
    return Table("zero-rtt", "0-RTT: time to the first response byte (p50 ms), full, resumed and with early data",
                 ["algorithm", "chain", "condition", "full", "resumed", "0-RTT", "0-RTT vs full", "0-RTT vs resumed",
                  "early data accepted"], rows,
                 "Each connection asks the page. Resumed: a TLS 1.3 resumption (psk_dhe_ke, the key exchange still "
                 "runs); 0-RTT: the same with the request sent as early data, which the server accepts (its "
                 "anti-replay is off so that one ticket serves every sample). After a HelloRetryRequest early data "
                 "is rejected and the request waits for the handshake.")


register(Section("deployment", 14, lambda con, run_id, a: [offers(a), compression(a),
                                                             zero_rtt(a, store.early_data(con, run_id))]))
