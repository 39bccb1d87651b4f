#!/usr/bin/env python3
"""Benchmarks of the measuring instrument (run as root after `make`):

1. pqtimer vs `openssl s_time -new` on loopback against the same s_server, same run: handshakes/s
   (goal: ratio ≥ 1.0 — pqtimer is no slower a client).
2. The clock's resolution and read cost, and the cost of the message callback (pqtimer --clock-info).
3. `--parallel 1` vs `--parallel 8` median handshake time at RTT 31.1 ms over the emulated link
   (goal: under 2 % apart — parallelism must not bias results).

    build/venv/bin/python bench/bench_pqtimer.py [--seconds 5] [-n 400]
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from pqbench import paths  # noqa: E402
from pqbench.algorithms import certs, openssl_build
from pqbench.analysis import single
from pqbench.testbed import LinkSpec  # noqa: E402
from tlsloop import s_server  # noqa: E402


def loopback_rates(seconds: float, group: str) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        chain = certs.make_chain("ecdsap256", Path(d))
        with s_server(chain, [group]) as port:
            out = openssl_build.run_openssl(["s_time", "-connect", f"127.0.0.1:{port}", "-new", "-time", str(int(seconds)),
                                     "-CAfile", str(chain.root_cert)], timeout=seconds * 3 + 30).stdout.decode()
            m = re.search(r"(\d+) connections in ([\d.]+) real seconds", out)
            s_time_rate = int(m.group(1)) / float(m.group(2))
            count = max(50, int(s_time_rate * seconds))
            t0 = time.monotonic()
            proc = subprocess.run([str(paths.native_binary("pqtimer")), "--host", "127.0.0.1", "--port", str(port),
                                   "--groups", group, "--cafile", str(chain.root_cert), "--count", str(count)],
                                  capture_output=True, env=openssl_build.openssl_env(), timeout=seconds * 10 + 60)
            elapsed = time.monotonic() - t0
            ok = sum(json.loads(line)["ok"] for line in proc.stdout.decode().splitlines())
    return s_time_rate, ok / elapsed


def parallel_bias(n: int) -> dict:
    out = {}
    for p in (1, 8):
        cell, options = single.one_cell("X25519MLKEM768", "ecdsap256", link=LinkSpec.symmetric(rtt_ms=31.1), n=n,
                                        parallel=p, warmup=1)
        out[p] = single.run(cell, options)["summary"]["p50_ms"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("-n", type=int, default=400)
    args = ap.parse_args()
    # s_time offers OpenSSL's default key shares (X25519MLKEM768 first); pqtimer offers the same group.
    s_time_rate, pqtimer_rate = loopback_rates(args.seconds, "X25519MLKEM768")
    print(f"loopback handshakes/s: s_time -new {s_time_rate:.0f}, pqtimer {pqtimer_rate:.0f}, "
          f"ratio {pqtimer_rate / s_time_rate:.2f}")
    info = json.loads(subprocess.run([str(paths.native_binary("pqtimer")), "--clock-info"],
                                     capture_output=True, check=True).stdout)
    print(f"clock {info['clock']}: resolution {info['resolution_ns']} ns, read {info['read_median_ns']} ns "
          f"(p99 {info['read_p99_ns']} ns); message callback {info['msg_callback_ns']} ns")
    medians = parallel_bias(args.n)
    diff = (medians[8] - medians[1]) / medians[1] * 100
    print(f"RTT 31.1 ms, n={args.n}: p50 parallel 1 = {medians[1]:.3f} ms, parallel 8 = {medians[8]:.3f} ms "
          f"({diff:+.2f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
