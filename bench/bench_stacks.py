#!/usr/bin/env python3
"""Benchmark: handshakes/s of each server stack at 0 ms RTT with pqtimer as the client, and the ratio to
nginx (the `openssl` stack) in the same run (run as root after `make`).

Every server stack that is registered and built serves the same chain on its own port in one testbed
(Rig.pairs); pqtimer with --parallel workers runs -n full handshakes against each in turn, for --rounds
interleaved rounds (the machine's drift hits every stack alike); a stack's figure is its median over
the rounds. Client, emulator and servers share this machine's cores, so handshakes/s compares stacks
with each other on one machine, not absolute server capacity; the server's own CPU time per handshake
(on-CPU time of every thread of every process of that server, from /proc/PID/task/TID/schedstat,
found by its run directory on the command line, and their children) is printed beside it, which the
client's share does not dilute.

    build/venv/bin/python bench/bench_stacks.py [--kex X25519MLKEM768] [--sig ecdsap256] [-n 1000]
                                                [--parallel 4] [--rounds 3] [--stack S ...]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pqbench import endpoints  # noqa: E402
from pqbench.algorithms import certs
from pqbench.endpoints.base import STUDY_PAGES, DEFAULT_WORKERS, Serving, Site  # noqa: E402
from pqbench.measure.rig import Rig  # noqa: E402
from pqbench.testbed import LinkSpec  # noqa: E402

BASE_PORT = 4500
REFERENCE = "openssl"


def _stat(pid: str) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # fields from 3 (state) on


def server_cpu_s(run_dir: Path) -> float:
    """On-CPU seconds so far of every thread of the processes whose command line names run_dir (or a
    file in it) and of their descendants (schedstat: ns, not the 10 ms ticks of /proc/PID/stat)."""
    marker = str(run_dir)
    roots, parent = set(), {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        st = _stat(pid)
        if st is None:
            continue
        parent[pid] = st[1]
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.decode(errors="replace") == marker or marker + "/" in a.decode(errors="replace") for a in args):
            roots.add(pid)
    tree = set(roots)
    grew = True
    while grew:
        new = {p for p, pp in parent.items() if pp in tree and p not in tree}
        tree |= new
        grew = bool(new)
    total = 0.0
    for pid in tree:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        live = 0
        for tid in tasks:
            try:
                live += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        # Threads that already exited (the Rust servers run a thread per connection) are gone from
        # task/, but their time stays in the process's utime + stime (clock ticks): take the larger.
        st = _stat(pid)
        ticks = (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK") if st else 0.0
        total += max(live / 1e9, ticks)
    return total


def available(names: list[str], kex: str, sig: str) -> list[str]:
    out = []
    for name in names:
        try:
            why = endpoints.get(name).capabilities().unsupported(kex, sig, "server")
        except Exception as e:  # a stack that is not built says so here
            why = str(e)
        if why:
            print(f"skipped {name}: {why}")
        else:
            out.append(name)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kex", default="X25519MLKEM768")
    ap.add_argument("--sig", default="ecdsap256")
    ap.add_argument("-n", type=int, default=1000, help="handshakes per stack per round")
    ap.add_argument("--parallel", type=int, default=4, help="pqtimer workers")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stack", action="append", help="server stacks (default: every registered one)")
    args = ap.parse_args()
    names = available(args.stack or endpoints.names(), args.kex, args.sig)
    if REFERENCE not in names:
        print(f"the reference stack {REFERENCE} is not available")
        return 3
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        chain = certs.make_chain(args.sig, d / "certs")
        servings = {name: Serving(d / name, [Site(BASE_PORT + i, chain)], [args.kex], STUDY_PAGES, DEFAULT_WORKERS)
                    for i, name in enumerate(names)}
        rates: dict[str, list[float]] = {n: [] for n in names}
        failures: dict[str, int] = {n: 0 for n in names}
        cpu_ms: dict[str, list[float]] = {n: [] for n in names}
        with Rig.pairs(servings, [REFERENCE], LinkSpec.symmetric(rtt_ms=0)) as rig:
            rig.begin_cell(LinkSpec.symmetric(rtt_ms=0))
            for r in range(args.rounds):
                order = names if r % 2 == 0 else list(reversed(names))
                for name in order:
                    job = rig.job(servings[name].sites[0].port, args.kex, chain, warmup=5)
                    scratch = d / f"{name}-{r}"
                    scratch.mkdir()
                    c0, t0 = server_cpu_s(servings[name].run_dir), time.monotonic()
                    samples = rig.sample(job, args.n, args.parallel, scratch, client=REFERENCE)
                    elapsed, c1 = time.monotonic() - t0, server_cpu_s(servings[name].run_dir)
                    ok = sum(1 for s in samples if s.get("ok"))
                    failures[name] += len(samples) - ok
                    rates[name].append(ok / elapsed)
                    cpu_ms[name].append((c1 - c0) * 1000 / max(ok, 1))
                    print(f"round {r}: {name:>8} {ok / elapsed:8.0f} handshakes/s ({ok}/{len(samples)} ok), "
                          f"server CPU {cpu_ms[name][-1]:.3f} ms/handshake", flush=True)
    ref = statistics.median(rates[REFERENCE])
    print(f"\n{args.kex} + {args.sig}, 0 ms RTT, pqtimer × {args.parallel}, "
          f"{args.n} handshakes × {args.rounds} rounds")
    ref_cpu = statistics.median(cpu_ms[REFERENCE])
    print(f"{'server':>8} {'median/s':>9} {'min':>7} {'max':>7} {'ratio':>6} {'CPU ms/hs':>9} {'ratio':>6} failures")
    for name in names:
        m, c = statistics.median(rates[name]), statistics.median(cpu_ms[name])
        print(f"{name:>8} {m:9.0f} {min(rates[name]):7.0f} {max(rates[name]):7.0f} {m / ref:6.2f} {c:9.3f} "
              f"{c / ref_cpu if ref_cpu else float('nan'):6.2f} {failures[name]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
