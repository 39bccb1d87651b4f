"""A page load's every connection against the emulator's record of its flow, milestone by milestone: the client's
time (pqtimer's page mode, or a browser's) minus the wire's, where the wire's are what a capture at the client's
side of the link shows (pqbench.endpoints.browsers.timing.wire_milestones: the SYN-ACK, the ClientHello's flight,
the Finished and the request after it, the response's first and last packet).

Each connection of a load (sample["browser"]["requests_detail"]) names its start on CLOCK_MONOTONIC, its local
port and its server's address; the flow from that port to that address that opened nearest the start is its own
(pqbench.endpoints.browsers.timing.flow_of). connect_start is the client's start
minus the SYN; every later milestone is compared on absolute times.

    python -m pqbench.measure.page_wire DB RUN_ID   per client, per milestone over every page connection of the
                                                    run (as the rig stored them): n, median, p5, p95 (ms)
"""

from __future__ import annotations

from pqbench import stats, transport
from pqbench.endpoints.browsers.timing import clock_shift_ns, joined_connections, wire_milestones
from pqbench.measure import wire
from pqbench.sample import Milestone

MILESTONES = ("tcp_connected", "client_hello_sent", "handshake_done", "request_sent", "first_byte", "last_byte")
RESPONSE_END = Milestone("s2c", -1, "last")


def connections(sample: dict, flows: list[dict]) -> list[dict]:
    """Per connection of a successful load: its url (the request that opened it), flow, client − wire per
    milestone (ms; None where either lacks it), and cpu_wait_ms: how long the client's thread of that connection
    waited for a CPU over its life (pqtimer's, from the kernel's schedstat; None where the client does not say), an
    upper bound on how much later than the wire a busy machine made the client see a milestone."""
    over = transport.of_sample(sample)
    if not sample.get("ok") or not over.kernel_tcp:  # the milestones are TCP's (SYN-ACK, flights of TLS records)
        return []
    shift = clock_shift_ns(sample)
    out = []
    for r, c, f in joined_connections(sample, flows, over.ip_proto):
        wait = c.get("cpu_wait_ns")
        row = {"url": r["url"], "flow": f"{f['client']} > {f['server']}" if f else None,
               "cpu_wait_ms": round(wait / 1e6, 4) if wait is not None else None}
        if f is None:
            out.append(row)
            continue
        syn = f.get("syn_ns") or f["open_ns"]
        start_ms = (c["start_mono_ns"] + shift - syn) / 1e6
        wm = wire_milestones(wire.summary(f, RESPONSE_END))
        t = c.get("t_ns") or {}
        row["connect_start"] = round(start_ms, 4)
        row.update({m: round(t[m] / 1e6 + start_ms - wm[m], 4) if t.get(m) is not None and wm.get(m) is not None
                    else None for m in MILESTONES})
        out.append(row)
    return out


def agreement(samples: list[dict], flows: list[dict]) -> dict:
    """Client − wire per milestone over every connection of every successful load: n, median, p5, p95 (ms)."""
    return of_rows([row for s in samples for row in connections(s, flows)])


def of_rows(rows: list[dict]) -> dict:
    """Client − wire per milestone (n, median, p5, p95, ms) over connection records as the rig stores them
    (browser.connections_minus_wire of each sample)."""
    diffs: dict[str, list[float]] = {m: [] for m in ("connect_start", *MILESTONES)}
    for row in rows:
        for m, v in diffs.items():
            if row.get(m) is not None:
                v.append(row[m])
    return {m: {"n": len(v), **{f"{k}_ms": round(stats.percentile(sorted(v), q), 4)
                                for k, q in (("median", 50), ("p5", 5), ("p95", 95))}} if v else {"n": 0}
            for m, v in diffs.items()}


if __name__ == "__main__":  # python -m pqbench.measure.page_wire DB RUN_ID: per client, over every page connection
    import json
    import sys
    from pqbench import store
    con = store.connect(sys.argv[1], read_only=True)
    got = con.execute("SELECT c.client, CAST(json_extract(s.raw, '$.browser.connections_minus_wire') AS VARCHAR) "
                      "FROM samples s JOIN cells c USING (run_id, cell_id) WHERE s.run_id = ? AND s.ok",
                      [sys.argv[2]]).fetchall()
    by_client: dict[str, list] = {}
    for client, rows in got:
        by_client.setdefault(client, []).extend(json.loads(rows) if rows else [])
    print(json.dumps({k: of_rows(v) for k, v in sorted(by_client.items())}, indent=1))
