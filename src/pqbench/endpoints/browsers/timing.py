"""A browser's page load as a pqbench sample: the document's connection gives the sample's phases (as
pqtimer's: ns since the connect started), every connection of the load is kept in `browser`, and each
is compared with the emulator's record of its flow (browser − wire per milestone)."""

from __future__ import annotations

from pqbench import stats

# The phases a browser reports of a connection, in order (ns since its connect started; Chromium has no TCP
# connect of its own); the steps inside the handshake (ServerHello received …) happen inside its TLS library.
PHASES = ("tcp_connected", "client_hello_sent", "handshake_done", "request_sent", "first_byte", "last_byte")
UNSEEN = ("server_hello_received", "handshake_packet_received", "server_finished_received")


def sample_of(requests: list[dict], load_event_ns: int | None, offset_ns: int) -> dict:
    """The sample of one load (ok unless the caller says otherwise). offset_ns: CLOCK_MONOTONIC minus
    CLOCK_MONOTONIC_RAW, since a sample's start_mono_ns is on the RAW clock (pqbench.measure.wire)."""
    opened = [r for r in requests if r.get("connection")]
    doc = next((r for r in opened if r["document"]), opened[0] if opened else None)
    s = {"ok": doc is not None, "error_class": None if doc else "no_connection",
         "error": None if doc else "the load opened no connection the browser reported", "t_ns": {}, "group": None,
         "sigalg": None}
    first_start = min((r["connection"]["start_mono_ns"] for r in opened), default=None)
    s["browser"] = {"requests": len(requests), "connections": len(opened),
                    "handshakes": sum(1 for r in opened if r["connection"]["t_ns"].get("handshake_done") is not None),
                    "critical_handshakes": critical_handshakes(requests),
                    "load_event_ms": (load_event_ns - first_start) / 1e6 if load_event_ns and first_start else None,
                    "last_byte_ms": max(((r["connection"]["start_mono_ns"] + r["connection"]["t_ns"]["last_byte"]
                                          - first_start) / 1e6 for r in opened if r["connection"]["t_ns"].get("last_byte")),
                                        default=None),
                    "requests_detail": requests}
    if doc:
        c = doc["connection"]
        s["t_ns"] = {"start": 0, **{p: None for p in UNSEEN},
                     **{p: c["t_ns"].get(p) for p in PHASES if p != "request_sent"}}  # request_sent: its own field
        s.update(start_mono_ns=c["start_mono_ns"] - offset_ns, local_port=c["local_port"], group=c["group"],
                 sigalg=c["sigalg"], request_sent_ns=c["t_ns"].get("request_sent"),
                 **{k: c[k] for k in ("group_as_sent", "sigalg_as_sent") if k in c})
    return s


def critical_handshakes(requests: list[dict]) -> int:
    """The TLS handshakes the load waited for one after another: the longest chain of connections, each opened for a
    resource that a response over the previous one named (the request's initiator, where the browser tells it), ending
    at the connection whose last byte came last. Where the initiator is not known, a connection follows those whose
    handshake ended before it started (a page's subresource connections start once the document, which came over a
    handshake of its own, names them; those opened together count once). The initiator is what counts where it is
    known: a browser slow to start one of two connections opened for the same document (a busy machine) must not
    make the second look as if it waited for the first."""
    opened = sorted((r for r in requests if r.get("connection") and r["connection"]["t_ns"].get("handshake_done")
                     is not None), key=lambda r: r["connection"]["start_mono_ns"])
    if not opened:
        return 0
    by_id = {r["connection_id"]: r for r in opened if r.get("connection_id")}
    carrier = {}  # a URL -> the opened request whose connection carried its response
    for r in requests:
        via = r if r.get("connection") else by_id.get(r.get("connection_id"))
        if via is not None:
            carrier.setdefault(r["url"], via)
    depth: dict[int, int] = {}
    for r in opened:
        c = r["connection"]
        parent = carrier.get(r.get("initiator"))
        if parent is not None and id(parent) in depth:
            before = [depth[id(parent)]]
        else:
            before = [depth[id(o)] for o in opened if id(o) in depth and o["connection"]["start_mono_ns"]
                      + o["connection"]["t_ns"]["handshake_done"] <= c["start_mono_ns"]]
        depth[id(r)] = 1 + max(before, default=0)
    last = max(opened, key=lambda r: r["connection"]["start_mono_ns"] + (r["connection"]["t_ns"].get("last_byte") or 0))
    return depth[id(last)]


FLOW_WINDOW_NS = 1_000_000_000  # a flow that opened further than this from a connection's start is not its own


def clock_shift_ns(sample: dict) -> int:
    """What to add to a load's connection starts to put them on the emulator's clock (CLOCK_MONOTONIC): Firefox's
    worker gives them on CLOCK_MONOTONIC_RAW; pqtimer and Chromium's DevTools on CLOCK_MONOTONIC already."""
    return (sample.get("mono_minus_raw_ns") or 0) if sample.get("stack") == "firefox" else 0


def flow_of(conn: dict, remote: str | None, flows: list[dict], shift_ns: int, ip_proto: str | None = None) -> dict | None:
    """The emulator's flow (flows.jsonl) of one connection of a load: to its server's address (remote, "addr:port")
    and from its local port, where either is known, that opened nearest the connection's start, within a second
    (each origin of a page has its own address, so address and time find it when the port is unknown; a channel that
    did not report its remote address joins by its local port alone). ip_proto: only flows over it."""
    addr, port, start = (remote or "").rsplit(":", 1)[0], conn.get("local_port"), conn["start_mono_ns"] + shift_ns
    if not addr and port is None:
        return None
    opened = lambda f: f.get("syn_ns") or f.get("open_ns")  # noqa: E731
    mine = [f for f in flows if opened(f) is not None and (ip_proto is None or f.get("proto", ip_proto) == ip_proto)
            and (not addr or f["server"].rsplit(":", 1)[0] == addr)
            and (port is None or int(f["client"].rsplit(":", 1)[1]) == port)
            and abs(opened(f) - start) < FLOW_WINDOW_NS]
    return min(mine, key=lambda f: abs(opened(f) - start), default=None)


def joined_connections(sample: dict, flows: list[dict], ip_proto: str | None = None):
    """(request, the connection it opened, that connection's flow or None) for each connection of a load."""
    shift = clock_shift_ns(sample)
    for r in (sample.get("browser") or {}).get("requests_detail") or []:
        if c := r.get("connection"):
            yield r, c, flow_of(c, r.get("remote"), flows, shift, ip_proto)


def connection_wire(sample: dict, flows: list[dict]) -> list[dict]:
    """Each connection the load opened joined to the emulator's record of its flow (flows.jsonl): the flow to its
    server's address (and from its local port, where the browser or the socket table named one) that opened
    nearest its start, within a second; where it went, and the bytes and packets each way (None without a flow).
    Each origin of a page has its own address, so the address and the time find a flow when the port is unknown
    (a socket the table did not show, a channel that no longer had its port)."""
    out = []
    for r, c, f in joined_connections(sample, flows):
        port = c.get("local_port")
        out.append({"url": r["url"], "remote": r.get("remote"), "local_port": port,
                    "protocol": r.get("protocol"), "flow": f["client"] + " > " + f["server"] if f else None,
                    **{f"{k}_{d}": (f[d].get(k) if f else None) for k in ("packets", "bytes") for d in ("c2s", "s2c")}})
    return out


def wire_milestones(wire: dict) -> dict:
    """What the emulator's record of a TLS-over-TCP flow (pqbench.measure.wire.summary) says of the milestones a
    browser reports, ms since the SYN, at the client's side of the link: the SYN-ACK (TCP connected), the
    client's first flight (its ClientHello), the first packet of its second (its Finished: handshake done) and that flight's last (the
    request written right after it), the server's first flight after it (the response's first byte; nginx's
    session tickets lead it) and the end of the last flight of the response (the last byte)."""
    flights = wire.get("flights_ms") or []
    c2s = [f for f in flights if f[0] == "c2s"]
    out = {"tcp_connected": wire.get("synack_ms"), "client_hello_sent": c2s[0][1] if c2s else None}
    if len(c2s) >= 2:
        finished = c2s[1][1]
        out["handshake_done"] = finished
        out["request_sent"] = c2s[1][2]
        # the response: the server's flights after the request, up to the client's next request (a browser asks
        # for /favicon.ico on the same connection after the load)
        upto = c2s[2][1] if len(c2s) > 2 else float("inf")
        response = [f for f in flights if f[0] == "s2c" and f[1] is not None and finished < f[1] < upto]
        out["first_byte"] = response[0][1] if response else None
        out["last_byte"] = response[-1][2] if response else None
    return out


def start_shift_ms(sample: dict, flows: list[dict]) -> float | None:
    """When the browser says its connection started minus when its SYN left (ms, both on CLOCK_MONOTONIC), from
    the emulator's records (flows.jsonl) of the sample's local port; None without one. A browser may start a
    socket's connect before the request that then takes it (Chromium clamps that socket's connect start to the
    request's start), so its own connect start can lie after the SYN; its later milestones are still exact."""
    port, start = sample.get("local_port"), sample.get("start_mono_ns")
    if port is None or start is None:
        return None
    start += sample.get("mono_minus_raw_ns") or 0
    opened = [f.get("syn_ns") or f.get("open_ns") for f in flows
              if f.get("open_ns") is not None and int(f["client"].rsplit(":", 1)[1]) == port]
    if not opened:
        return None
    syn = min(opened, key=lambda t: abs(t - start))
    return (start - syn) / 1e6 if abs(start - syn) < 2e9 else None


def browser_minus_wire(sample: dict, flows: list[dict] | None = None) -> dict:
    """Per milestone, the browser's time minus the wire's for one joined sample, ms (None where one lacks it).
    Without flows both are timed from their own start (the browser's connect start, the SYN); with the
    emulator's flows both are absolute times, and connect_start is the browser's start minus the SYN."""
    w = sample.get("wire")
    if not sample.get("ok") or not w:
        return {}
    shift = start_shift_ms(sample, flows) if flows is not None else 0.0
    if shift is None:
        return {}
    t = dict(sample.get("t_ns") or {}, request_sent=sample.get("request_sent_ns"))
    wm = wire_milestones(w)
    out = {"connect_start": round(shift, 4)} if flows is not None else {}
    return {**out, **{p: round(t[p] / 1e6 + shift - wm[p], 4) if t.get(p) is not None and wm.get(p) is not None
                      else None for p in PHASES}}


def agreement(samples: list[dict], flows: list[dict] | None = None) -> dict:
    """browser − wire per milestone over the joined samples: n, median, p5, p95 (ms); with the emulator's flows,
    on absolute times (see browser_minus_wire)."""
    diffs: dict[str, list] = {p: [] for p in (("connect_start",) if flows is not None else ()) + PHASES}
    for s in samples:
        for p, d in browser_minus_wire(s, flows).items():
            if d is not None:
                diffs[p].append(d)
    return {p: {"n": len(v), "median_ms": round(stats.percentile(sorted(v), 50), 4),
                "p5_ms": round(stats.percentile(sorted(v), 5), 4), "p95_ms": round(stats.percentile(sorted(v), 95), 4)}
            if v else {"n": 0} for p, v in diffs.items()}


if __name__ == "__main__":  # python -m pqbench.endpoints.browsers.timing RUN_DIR: browser − wire per milestone,
    # and every connection of every load joined to its flow (bytes and packets each way)
    import json
    import sys
    from pathlib import Path
    run = Path(sys.argv[1])
    # a handshake command's samples, or a run's lanes' last cells (each client's own output)
    files = [run / "samples.jsonl"] if (run / "samples.jsonl").exists() else sorted(run.glob("lane-*/*-[0-9]*.jsonl"))
    rows = [json.loads(line) for f in files for line in open(f) if line.strip().startswith("{")]
    flows = [json.loads(line) for f in sorted(run.glob("lane-*/flows.jsonl")) for line in open(f) if line.strip()]
    per_connection = [c for s in rows if s.get("ok") for c in connection_wire(s, flows)]
    print(json.dumps({"since_own_start": agreement(rows), "absolute": agreement(rows, flows),
                      "connections": per_connection}, indent=1))
