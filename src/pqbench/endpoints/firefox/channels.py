"""Firefox's connections of one page load, from its parent process's own records of each HTTP channel
(load.js): the timed channel's times (PRTime: µs on the wall clock, converted from its monotonic clock),
the local port, the TLS group and signature scheme."""

from __future__ import annotations

from pqbench.endpoints.browsers import names

# timed-channel fields -> the sample's phases
PHASES = {"tcp_connected": "tcp_connect_end", "client_hello_sent": "secure_start", "handshake_done": "connect_end",
          "request_sent": "request_start", "first_byte": "response_start", "last_byte": "response_end"}


def requests_of(records: list[dict], wall_minus_mono_ns: int) -> list[dict]:
    """The load's requests in the shape browsers.timing reads, each with the connection it opened, if any.
    wall_minus_mono_ns: CLOCK_REALTIME minus CLOCK_MONOTONIC, now (PRTime to the emulator's clock)."""
    out, seen = [], set()
    for r in records:
        t = r.get("t") or {}
        req = {"url": r["url"], "type": "Document" if r.get("document") else None, "status": r.get("http_status"),
               "protocol": r.get("protocol"), "remote": r.get("remote"), "bytes": r.get("transfer"),
               "connection_id": r.get("local_port"), "document": bool(r.get("document")), "initiator": r.get("initiator"),
               "failed": r.get("error") or None}
        port = r.get("local_port")
        req["reused"] = port in seen or not t.get("connect_start")
        if port:
            seen.add(port)
        if not req["reused"]:
            start = t["connect_start"]
            req["connection"] = {
                "start_mono_ns": start * 1000 - wall_minus_mono_ns, "local_port": port, "candidate_ports": [port],
                "t_ns": {p: (t[f] - start) * 1000 if t.get(f) else None for p, f in PHASES.items()},
                **names.negotiated(r.get("group"), r.get("sigalg")),
                "tls": r.get("tls"), "cipher": None}
        out.append(req)
    return out
