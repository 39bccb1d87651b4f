"""What a busy machine takes from a normal-priority client (a browser) while it runs: pqbench.testbed.probe's
cpu_stalls, the wall time beyond each 1 ms of a busy thread's own CPU time, as a run's calibration measures it for
the floor of normal-priority clients. Prints its p50, p95 and p99.

    build/venv/bin/python bench/bench_cpu_stalls.py              # this machine as it is
    scripts/slower-machine.sh build/venv/bin/python bench/bench_cpu_stalls.py   # as a slower, busier one
"""

from __future__ import annotations

import sys

from pqbench.testbed import probe
from pqbench.testbed.calibrate import percentiles


def main(n: int = 200) -> None:
    s = percentiles(probe.cpu_stalls(n))
    print(f"cpu stalls per 1 ms of CPU (n={s['n']}): p50 {s['p50']:.3f} ms, p95 {s['p95']:.3f} ms, "
          f"p99 {s['p99']:.3f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
