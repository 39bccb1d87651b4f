#!/usr/bin/env python3
"""Benchmarks of the pqlink emulator (root; prints figures; a benchmark, not a test).

1. floor: TCP-connect RTT through pqlink at 0 ms vs a direct veth pair, same run;
2. RTT error (p50 - floor - configured) at the published grid's 5.6, 31.1, 78.6, 195.7 ms, without
   and with the keep-awake spinners;
3. forwarding ceiling: TCP bulk goodput and packets/s at MTU 1500, unlimited rate (veth as reference);
   with and without the keep-awake spinners;
4. lateness p50/p99/max with and without SCHED_FIFO, spin and keep-awake while the other core is busy;
5. the wire recorder's cost, on (default --flows 65536) and off (--flows 0), alternating in rounds so
   drift hits both alike: the forwarding ceiling (bulk TCP at 0 ms), lateness p50/p99 under bulk TCP
   at 10 ms RTT (every packet through the recorder, deadlines to meet) and under back-to-back TCP
   connects at 10 ms RTT (a new record each);
6. the bottleneck's cost: the forwarding ceiling (bulk TCP at 0 ms) and pqlink's CPU time per packet
   with a delivery trace and with CoDel, against the fixed-rate drop-tail path, all in the same
   testbed, alternating in rounds; the rate (100 Gbit/s) and the trace (2001 opportunities a ms,
   24 Gbit/s) are far above the ceiling, so what differs is the bookkeeping per packet.

    python3 bench/bench_pqlink.py [--quick] [--json] [--section floor|rtt|ceiling|lateness|recorder|bottleneck ...]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pqbench.testbed import EmulatorOptions, LinkSpec, Testbed, probe  # noqa: E402
from pqbench.testbed.calibrate import percentiles  # noqa: E402

GRID_RTT_MS = (5.6, 31.1, 78.6, 195.7)
SECTIONS = ("floor", "rtt", "ceiling", "lateness", "recorder", "bottleneck")


def floor_vs_veth(samples: int) -> dict:
    with Testbed(backend="veth") as ref:
        veth = percentiles(probe.connect_rtts(ref, samples))
    with Testbed() as tb:
        emu = percentiles(probe.connect_rtts(tb, samples))
    return {"veth_p50_ms": veth["p50"], "pqlink_p50_ms": emu["p50"], "added_us": (emu["p50"] - veth["p50"]) * 1e3,
            "veth_p95_ms": veth["p95"], "pqlink_p95_ms": emu["p95"], "ratio": emu["p50"] / veth["p50"]}


def rtt_errors(quick: bool, keep_awake: int) -> list[dict]:
    out = []
    with Testbed(emulator=EmulatorOptions(keep_awake=keep_awake)) as tb:
        floor = percentiles(probe.connect_rtts(tb, 200))["p50"]
        for rtt in GRID_RTT_MS:
            n = int(min(100, max(15, (3000 if quick else 8000) / rtt)))
            tb.reconfigure(LinkSpec.symmetric(rtt))
            tb.reset_counters()
            p = percentiles(probe.connect_rtts(tb, n))
            late = tb.counters()
            out.append({"keep_awake": keep_awake, "rtt_ms": rtt, "n": n, "floor_ms": floor, "p50_ms": p["p50"],
                        "p95_ms": p["p95"],
                        "error_p50_us": (p["p50"] - floor - rtt) * 1e3,
                        "lateness_p99_us": max(late[d]["lateness_us"]["p99"]
                                               for d in ("client_to_server", "server_to_client"))})
    return out


def ceiling(seconds: float, keep_awake: int) -> dict:
    with Testbed(backend="veth") as ref:
        veth = probe.tcp_transfer(ref, seconds=seconds, check=False)
    with Testbed(emulator=EmulatorOptions(keep_awake=keep_awake)) as tb:
        tb.reset_counters()
        r = probe.tcp_transfer(tb, seconds=seconds, check=False)
        c = tb.counters()["client_to_server"]
    return {"keep_awake": keep_awake, "goodput_gbit": r["goodput_mbit"] / 1e3,
            "packets_per_s": c["packets"] / r["seconds"],
            "wire_gbit": c["bytes"] * 8 / r["seconds"] / 1e9, "device_drops": c["device_drops"],
            "veth_goodput_gbit": veth["goodput_mbit"] / 1e3, "ratio_to_veth": r["goodput_mbit"] / veth["goodput_mbit"]}


def _hog(cpu: int, stop) -> None:
    os.sched_setaffinity(0, {cpu})
    while not stop.is_set():
        pass


def _paced_udp(tb, seconds: float, pps: int) -> None:
    """Light traffic (sleep-paced, so the generator is not a second CPU hog)."""
    rx = tb.socket("server", socket.AF_INET, socket.SOCK_DGRAM)
    tx = tb.socket("client", socket.AF_INET, socket.SOCK_DGRAM)
    with rx, tx:
        rx.bind((tb.server_addr, 0))
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            tx.sendto(b"x" * 200, rx.getsockname())
            time.sleep(1 / pps)


def lateness_under_load(seconds: float) -> list[dict]:
    out = []
    ncpu = os.cpu_count() or 1
    for fifo, spin, keep in ((0, 0, 0), (50, 0, 0), (0, 50, 0), (50, 50, 0), (50, 0, ncpu), (50, 50, ncpu)):
        stop = multiprocessing.Event()
        hog = multiprocessing.Process(target=_hog, args=(ncpu - 1, stop), daemon=True)
        with Testbed(LinkSpec.symmetric(20), emulator=EmulatorOptions(fifo_priority=fifo, spin_us=spin,
                                                                                 keep_awake=keep)) as tb:
            hog.start()
            try:
                time.sleep(0.2)
                tb.reset_counters()
                _paced_udp(tb, seconds, 1000)
                time.sleep(0.05)
                late = tb.counters()["client_to_server"]["lateness_us"]
            finally:
                stop.set()
                hog.join()
        out.append({"sched_fifo": fifo, "spin_us": spin, "keep_awake": keep, **late})
    return out


LATENESS_RTT_MS = 10  # packets wait for a deadline, so the lateness shows whether the thread keeps up


def _recorder_once(flows: int, seconds: float, connects: int) -> dict:
    with Testbed(emulator=EmulatorOptions(flows=flows)) as tb:
        tb.reset_counters()
        ceil = probe.tcp_transfer(tb, seconds=seconds, check=False)
        packets = tb.counters()["client_to_server"]["packets"]
        tb.reconfigure(LinkSpec.symmetric(LATENESS_RTT_MS))
        tb.reset_counters()
        bulk = probe.tcp_transfer(tb, seconds=seconds, check=False)
        late = tb.counters()["client_to_server"]["lateness_us"]
        tb.reset_counters()
        rtt = percentiles(probe.connect_rtts(tb, connects))
        c = tb.counters()
    light = {q: max(c[d]["lateness_us"][q] for d in ("client_to_server", "server_to_client")) for q in ("p50", "p99")}
    return {"goodput_gbit": ceil["goodput_mbit"] / 1e3, "packets_per_s": packets / ceil["seconds"],
            "bulk_goodput_gbit": bulk["goodput_mbit"] / 1e3,
            "bulk_lateness_p50_us": late["p50"], "bulk_lateness_p99_us": late["p99"],
            "connect_p50_ms": rtt["p50"], "connect_lateness_p50_us": light["p50"],
            "connect_lateness_p99_us": light["p99"]}


def recorder_cost(rounds: int, seconds: float, connects: int) -> dict:
    """Median, min and max over rounds; within a round on and off run back to back, in alternating order."""
    runs: dict[int, list[dict]] = {65536: [], 0: []}
    for i in range(rounds):
        for flows in ((65536, 0) if i % 2 == 0 else (0, 65536)):
            runs[flows].append(_recorder_once(flows, seconds, connects))
    out = {}
    for flows, rows in runs.items():
        out["on" if flows else "off"] = {
            "flows": flows, "rounds": len(rows),
            **{k: {"median": statistics.median(r[k] for r in rows), "min": min(r[k] for r in rows),
                   "max": max(r[k] for r in rows)} for k in rows[0]}}
    return out


def _cpu_s(pid: int) -> float:
    """User + system CPU time of a process and all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bottleneck_cost(rounds: int, seconds: float, workdir: Path) -> dict:
    """Median, min and max over rounds of the ceiling and pqlink's CPU ns per forwarded packet for
    each bottleneck; in each round all run back to back, in a rotating order."""
    trace = workdir / "wide.trace"
    trace.write_text("0\n" * 2000 + "1\n")  # 2001 x 1500 B a ms: 24 Gbit/s
    specs = {"rate, drop-tail": LinkSpec.symmetric(0, rate_mbit=100_000),
             "rate, CoDel": LinkSpec.symmetric(0, rate_mbit=100_000, aqm="codel"),
             "trace, drop-tail": LinkSpec.symmetric(0, trace=str(trace)),
             "trace, CoDel": LinkSpec.symmetric(0, trace=str(trace), aqm="codel")}
    names = list(specs)
    runs: dict[str, list[dict]] = {n: [] for n in names}
    with Testbed(specs[names[0]], backend="pqlink") as tb:
        for i in range(rounds):
            for name in names[i % len(names):] + names[:i % len(names)]:
                tb.reconfigure(specs[name])
                tb.reset_counters()
                cpu0 = _cpu_s(tb.backend.pid)
                r = probe.tcp_transfer(tb, seconds=seconds, check=False)
                cpu = _cpu_s(tb.backend.pid) - cpu0
                c = tb.counters()
                packets = c["client_to_server"]["packets"] + c["server_to_client"]["packets"]
                runs[name].append({"goodput_gbit": r["goodput_mbit"] / 1e3,
                                   "packets_per_s": c["client_to_server"]["packets"] / r["seconds"],
                                   "cpu_ns_per_packet": cpu / packets * 1e9})
    out = {}
    base = runs[names[0]]
    for name, rows in runs.items():
        out[name] = {k: {"median": statistics.median(r[k] for r in rows), "min": min(r[k] for r in rows),
                         "max": max(r[k] for r in rows)} for k in rows[0]}
        out[name]["ratio_goodput"] = statistics.median(r["goodput_gbit"] for r in rows) / \
            statistics.median(r["goodput_gbit"] for r in base)
        out[name]["ratio_cpu_per_packet"] = statistics.median(r["cpu_ns_per_packet"] for r in rows) / \
            statistics.median(r["cpu_ns_per_packet"] for r in base)
    return out


def _spread(v: dict, scale: float = 1.0, fmt: str = ".2f") -> str:
    return f"{v['median'] * scale:{fmt}} [{v['min'] * scale:{fmt}}-{v['max'] * scale:{fmt}}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer samples, shorter transfers")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--section", action="append", choices=SECTIONS, help="run only these (repeatable; default all)")
    args = ap.parse_args()
    sections = set(args.section or SECTIONS)
    if os.geteuid() != 0:
        print("bench_pqlink needs root (network namespaces)", file=sys.stderr)
        return 3
    res = {"host": {"cpus": os.cpu_count(), "kernel": os.uname().release, "loadavg_1m": os.getloadavg()[0]}}
    if not args.json:
        print(f"host: {res['host']['cpus']} CPUs, kernel {res['host']['kernel']}, "
              f"load average {res['host']['loadavg_1m']:.2f} at start (figures need a quiet machine)", flush=True)
    if "floor" in sections:
        res["floor"] = f = floor_vs_veth(200 if args.quick else 500)
        if not args.json:
            print(f"floor: TCP connect p50 veth {f['veth_p50_ms'] * 1e3:.0f} us, pqlink {f['pqlink_p50_ms'] * 1e3:.0f} us "
                  f"-> emulator adds {f['added_us']:.0f} us ({f['ratio']:.2f}x)", flush=True)
    if "rtt" in sections:
        res["rtt"] = [r for keep in (0, os.cpu_count() or 1) for r in rtt_errors(args.quick, keep)]
        if not args.json:
            for r in res["rtt"]:
                print(f"RTT {r['rtt_ms']:6.1f} ms, keep-awake {r['keep_awake']}: p50 {r['p50_ms']:.3f} ms, error after floor {r['error_p50_us']:+.0f} us "
                      f"(n={r['n']}, lateness p99 {r['lateness_p99_us']:.0f} us)", flush=True)
    if "ceiling" in sections:
        res["ceiling"] = [ceiling(3 if args.quick else 6, keep) for keep in (0, os.cpu_count() or 1)]
        if not args.json:
            for c in res["ceiling"]:
                print(f"ceiling MTU 1500, keep-awake {c['keep_awake']}: {c['goodput_gbit']:.2f} Gbit/s TCP goodput, "
                      f"{c['wire_gbit']:.2f} Gbit/s on the wire, {c['packets_per_s'] / 1e3:.0f} kpackets/s; veth "
                      f"{c['veth_goodput_gbit']:.2f} Gbit/s (ratio {c['ratio_to_veth']:.2f}); kernel drops before pqlink "
                      f"{c['device_drops']}", flush=True)
    if "lateness" in sections:
        res["lateness_busy_core"] = rows = lateness_under_load(3 if args.quick else 8)
        if not args.json:
            for r in rows:
                print(f"lateness, other core busy, SCHED_FIFO {'on ' if r['sched_fifo'] else 'off'} spin {r['spin_us']:>2} us "
                      f"keep-awake {r['keep_awake']}: "
                      f"p50 {r['p50']:.1f} us, p99 {r['p99']:.1f} us, max {r['max']:.1f} us (n={r['n']})", flush=True)
    if "recorder" in sections:
        res["recorder"] = rec = recorder_cost(2 if args.quick else 4, 2 if args.quick else 4,
                                              100 if args.quick else 300)
        if not args.json:
            for name in ("on", "off"):
                r = rec[name]
                print(f"wire recorder {name:>3} (--flows {r['flows']}; median [min-max] of {r['rounds']} rounds): "
                      f"ceiling {_spread(r['goodput_gbit'])} Gbit/s, "
                      f"{_spread(r['packets_per_s'], 1e-3, '.0f')} kpackets/s; "
                      f"bulk at RTT {LATENESS_RTT_MS} ms {_spread(r['bulk_goodput_gbit'])} Gbit/s, lateness "
                      f"p50 {_spread(r['bulk_lateness_p50_us'], fmt='.1f')} us, "
                      f"p99 {_spread(r['bulk_lateness_p99_us'], fmt='.1f')} us; "
                      f"connects at RTT {LATENESS_RTT_MS} ms: p50 {_spread(r['connect_p50_ms'], fmt='.3f')} ms, "
                      f"lateness p50 {_spread(r['connect_lateness_p50_us'], fmt='.1f')} us, "
                      f"p99 {_spread(r['connect_lateness_p99_us'], fmt='.1f')} us", flush=True)
    if "bottleneck" in sections:
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            res["bottleneck"] = bn = bottleneck_cost(3 if args.quick else 6, 2 if args.quick else 4, Path(d))
        if not args.json:
            for name, r in bn.items():
                print(f"bottleneck {name:<16} (median [min-max] of rounds): ceiling {_spread(r['goodput_gbit'])} Gbit/s "
                      f"({r['ratio_goodput']:.2f}x), {_spread(r['packets_per_s'], 1e-3, '.0f')} kpackets/s, pqlink CPU "
                      f"{_spread(r['cpu_ns_per_packet'], fmt='.0f')} ns/packet ({r['ratio_cpu_per_packet']:.2f}x of "
                      f"rate, drop-tail)", flush=True)
    if args.json:
        json.dump(res, sys.stdout, indent=2)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
