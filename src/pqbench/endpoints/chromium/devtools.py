"""Chromium's connections of one page load, from its DevTools events: each request's resource timing
(connect start/end, TLS start/end, request sent, headers received; ms after its requestTime, a monotonic
time in seconds) and security details, its loading-finished time, and the page's load event."""

from __future__ import annotations

from pqbench.endpoints.browsers import names


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def _initiator(sent: dict | None) -> str | None:
    """The URL whose response named a request: the parser's document or stylesheet, else the script on top of the
    stack that asked for it (none for the page's own document)."""
    i = (sent or {}).get("initiator") or {}
    frames = (i.get("stack") or {}).get("callFrames") or []
    return i.get("url") or next((f["url"] for f in frames if f.get("url")), None)


def connections_of(events: list[dict], new_sockets: set) -> tuple[list[dict], int | None]:
    """(the load's requests, each with the connection it opened if it opened one; the load event's time,
    monotonic ns). new_sockets: (local port, remote host, remote port) the load opened, which name a
    connection's local port where one socket alone goes to its server."""
    sent, finished, failed, load_event = {}, {}, {}, None
    responses = []
    for e in events:
        m, p = e["method"], e.get("params", {})
        if m == "Network.requestWillBeSent":
            sent.setdefault(p["requestId"], p)
        elif m == "Network.responseReceived":
            responses.append(p)
        elif m == "Network.loadingFinished":
            finished[p["requestId"]] = p
        elif m == "Network.loadingFailed":
            failed[p["requestId"]] = p
        elif m == "Page.loadEventFired":
            load_event = _ns(p["timestamp"])
    out = []
    for p in responses:
        r, rid = p["response"], p["requestId"]
        t = r.get("timing") or {}
        base = _ns(t["requestTime"]) if t else None
        at = lambda k: round(t[k] * 1e6) if t.get(k, -1) >= 0 else None  # noqa: E731 (ns after base; -1: did not happen)
        sec = r.get("securityDetails") or {}
        done = finished.get(rid)
        req = {"url": r["url"], "type": p.get("type"), "status": r.get("status"), "protocol": r.get("protocol"),
               "remote": f"{r.get('remoteIPAddress')}:{r.get('remotePort')}", "bytes": (done or {}).get("encodedDataLength"),
               "connection_id": r.get("connectionId"), "reused": bool(r.get("connectionReused")),
               "document": p.get("type") == "Document", "initiator": _initiator(sent.get(rid)),
               "failed": (failed.get(rid) or {}).get("errorText")}
        if base is not None and not req["reused"] and at("connectStart") is not None:
            start = base + at("connectStart")
            since = lambda k: None if at(k) is None else base + at(k) - start  # noqa: E731
            first = at("receiveHeadersStart") if (t.get("receiveHeadersStart") or 0) > 0 else at("receiveHeadersEnd")
            ports = [lp for lp, host, rp in new_sockets if host == r.get("remoteIPAddress") and rp == r.get("remotePort")]
            req["connection"] = {
                "start_mono_ns": start, "local_port": ports[0] if len(ports) == 1 else None,
                "candidate_ports": sorted(ports),
                # sslStart: the TLS handshake begins (its ClientHello left within 0.2 ms on the wire); the browser
                # reports no end of TCP's connect of its own (its connectEnd is the handshake's end)
                "t_ns": {"client_hello_sent": since("sslStart"), "handshake_done": since("sslEnd"),
                         "request_sent": since("sendStart"),
                         "first_byte": None if first is None else base + first - start,
                         "last_byte": _ns(done["timestamp"]) - start if done else None},
                **names.negotiated(sec.get("keyExchangeGroup"), sec.get("serverSignatureAlgorithm")),
                "tls": sec.get("protocol"), "cipher": sec.get("cipher"),
                # the request's own start (its requestTime) and where its connect started, ms after it: 0 when the
                # request took a socket another job had started connecting (Chromium then clamps that socket's
                # connect and TLS start to the request's start, hiding when its SYN left)
                "connect_start_after_request_ms": t.get("connectStart"),
                "request_will_be_sent_mono_ns": _ns(sent[rid]["timestamp"]) if rid in sent else None,
                "request_time_mono_ns": base}
        out.append(req)
    return out, load_event
