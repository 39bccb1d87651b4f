#!/usr/bin/env python3
"""How often the server's answer stalls (root, after `make`): the share of handshakes whose server
answer at the wire (the client's first flight to the server's, pqbench.measure.late.server_answer_ms)
exceeds the cell's median answer by more than 1 ms, one client worker, per server setting, the
settings interleaved round by round (A B C A B C ...) so drift and other load hit each alike.

Settings: nginx worker processes (32, the default; 2, one per CPU here; 1), and, with --fifo0, the
measured processes (server and client) without real-time priority (PQBENCH_MEASURED_FIFO=0, nice and
slice instead), which needs a fresh process per run.

    build/venv/bin/python bench/bench_server_stalls.py [--kex p256_frodo640aes] [-n 300] [--rounds 3]
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pqbench import stats  # noqa: E402

ONE = """
import json, sys
from pqbench.measure import late, single
from pqbench.testbed import LinkSpec
m = single.measure(*single.one_cell(sys.argv[1], "ecdsap256", link=LinkSpec.symmetric(5.6), n=int(sys.argv[2]),
                                   workers=int(sys.argv[3])))
answers = [late.server_answer_ms(s) for s in m.samples if s.get("ok") and not late.touched(s)]
print(json.dumps([a for a in answers if a is not None]))
import shutil; shutil.rmtree(m.run_dir, ignore_errors=True)
"""


def run(kex: str, n: int, workers: int, fifo: bool) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **({} if fifo else {"PQBENCH_MEASURED_FIFO": "0"})}
    out = subprocess.run([sys.executable, "-c", ONE, kex, str(n), str(workers)], capture_output=True, text=True,
                         env=env, check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kex", default="p256_frodo640aes")
    ap.add_argument("-n", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fifo0", action="store_true", help="also the measured processes without real-time priority")
    args = ap.parse_args()
    settings = [("workers 32", 32, True), ("workers 2", 2, True), ("workers 1", 1, True)]
    if args.fifo0:
        settings.append(("workers 32, no real-time priority", 32, False))
    shares: dict[str, list] = {name: [] for name, _, _ in settings}
    medians: dict[str, list] = {name: [] for name, _, _ in settings}
    for r in range(args.rounds):
        for name, workers, fifo in settings:
            answers = sorted(run(args.kex, args.n, workers, fifo))
            typical = stats.percentile(answers, 50)
            stalled = sum(1 for a in answers if a > typical + 1.0)
            shares[name].append(stalled / len(answers))
            medians[name].append(typical)
            print(f"round {r + 1} {name}: {stalled} of {len(answers)} answers over the median "
                  f"{typical:.2f} ms + 1 ms ({100 * stalled / len(answers):.1f} %)", flush=True)
    print(f"\n{args.kex}, RTT 5.6 ms, one client worker, {args.n} handshakes per run:")
    for name in shares:
        print(f"  {name:<36} stalled {', '.join(f'{100 * s:.1f} %' for s in shares[name])}; "
              f"median answer {', '.join(f'{m:.2f}' for m in medians[name])} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
