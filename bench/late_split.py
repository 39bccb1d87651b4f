#!/usr/bin/env python3
"""Where did a cell's late handshakes wait? Splits each retransmission-free sample of a stored run into
the parts the wire record separates (pqbench.measure.wire keeps `synack_ms` and `flights_ms` per sample) and
prints, per cell, the medians and the late samples' excess over them:

  conn_wake       client's TCP connect minus the SYN-ACK's arrival (the client waking; + its start→SYN)
  synack_to_ch    SYN-ACK to the ClientHello on the wire (the client writing its first flight)
  server          the server's answer (late.server_answer_ms: the client's first flight's last segment to
                  the server's first) minus the RTT (the server's wait + work)
  client_fin      the server flight's last packet to the client's Finished (the client's wait + work)
  synack_late     SYN-ACK minus the RTT (the link and the server's kernel: should be ~0)
  cpu_wait        the client's own run-queue wait during the handshake (cpu_wait_ns, the kernel's
                  schedstat; every client reports it)
  link_late       the most the emulator released one of the connection's packets after its deadline

    build/venv/bin/python bench/late_split.py DB [RUN] [--show 15]
"""

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pqbench import stats, store  # noqa: E402
from pqbench.measure import late

PARTS = ("total", "conn_wake", "synack_to_ch", "server", "client_fin", "synack_late", "cpu_wait", "link_late")


def split(s: dict, rtt_ms: float) -> tuple | None:
    w = s.get("wire") or {}
    flights = w.get("flights_ms") or []
    c2s, s2c = [f for f in flights if f[0] == "c2s"], [f for f in flights if f[0] == "s2c"]
    if w.get("synack_ms") is None or len(c2s) < 2 or not s2c or late.touched(s):
        return None
    t = s["t_ns"]
    answer = late.server_answer_ms(s)  # the detector's own measure of the server's side
    return (t["handshake_done"] / 1e6, t["tcp_connected"] / 1e6 - w["synack_ms"], c2s[0][1] - w["synack_ms"],
            answer - rtt_ms if answer is not None else float("nan"), c2s[1][1] - s2c[0][2], w["synack_ms"] - rtt_ms,
            s["cpu_wait_ns"] / 1e6 if s.get("cpu_wait_ns") is not None else float("nan"),
            w["link_late_ms"] if w.get("link_late_ms") is not None else float("nan"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db", type=Path)
    ap.add_argument("run", nargs="?", default="latest")
    ap.add_argument("--show", type=int, default=15, help="late samples to print per cell")
    args = ap.parse_args()
    con = store.connect(args.db, read_only=True)
    run = store.resolve_run(con, args.run)
    for row in store.cell_rows(con, run):
        if row["status"] != "done" or row["mode"] != "handshake":
            continue
        samples = [json.loads(r) for r in store.sample_raw(con, run, row["cell_id"])]
        parts = sorted(p for s in samples if s.get("ok") and (p := split(s, row["rtt_ms"])))
        if len(parts) < late.MIN_UNTOUCHED:
            continue
        det = json.loads(row["detector"]) if row.get("detector") else {}
        threshold = det.get("threshold_ms") or parts[len(parts) // 20][0] * 1.02 + late.MARGIN_MS
        median = [stats.percentile(sorted(p[i] for p in parts), 50) for i in range(len(PARTS))]
        slow = [p for p in parts if p[0] > threshold]
        sides = ", ".join(f"{k} {v}" for k, v in (det.get("by_side") or {}).items() if v) or "not split (older store)"
        print(f"{row['kex']} + {row['sig']}, {row['rtt_ms']:g} ms, {100 * row['loss']:g} %: {len(slow)} of "
              f"{len(parts)} without retransmission beyond {threshold:.2f} ms; the detector's sides: {sides}")
        print("  median       " + "  ".join(f"{n} {m:7.3f}" for n, m in zip(PARTS, median)))
        for p in slow[:args.show]:
            print("  late excess  " + "  ".join(f"{n} {v - m:+7.3f}" for n, v, m in zip(PARTS, p, median)))
    con.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
