#!/usr/bin/env python3
"""Where the test suite's time goes: reads the JSON lines a suite run wrote with PQBENCH_TEST_COSTS=FILE
(tests/conftest.py) and prints the CPU the tests cost in all against the wall time they took, each worker's
busy span (a worker that ends long after the others is the pass's tail), the tests costing the most CPU and the
longest ones. Busy worker time far above the CPU the tests cost means they mostly wait (round trips, timeouts,
servers starting), and more workers shorten the pass; near it, only cheaper tests do.

    PQBENCH_TEST_COSTS=/tmp/costs.jsonl make test
    build/venv/bin/python bench/suite_costs.py /tmp/costs.jsonl [--top 25]
"""

import argparse
import json
from collections import defaultdict


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("costs")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    rows = [json.loads(line) for line in open(args.costs) if line.strip()]
    for r in rows:
        r["cpu_s"] = r["own_cpu_s"] + r["children_cpu_s"]
        r["end"] = r["start"] + r["wall_s"]
    passes = defaultdict(list)  # the xdist pass has workers, the solo pass none
    for r in rows:
        passes["first (workers)" if r["worker"] else "solo / one process"].append(r)
    for name, rs in passes.items():
        began, ended = min(r["start"] for r in rs), max(r["end"] for r in rs)
        cpu = sum(r["cpu_s"] for r in rs)
        print(f"{name}: {len(rs)} tests, {ended - began:.0f} s from first start to last end, "
              f"{cpu:.0f} CPU s ({cpu / max(1, ended - began):.2f} CPUs on average)")
        workers = defaultdict(list)
        for r in rs:
            workers[r["worker"] or "-"].append(r)
        for w, ws in sorted(workers.items()):
            print(f"  {w}: {len(ws)} tests, busy {sum(r['wall_s'] for r in ws):.0f} s, "
                  f"ends {max(r['end'] for r in ws) - began:.0f} s in, {sum(r['cpu_s'] for r in ws):.0f} CPU s")
    print(f"\nthe {args.top} tests costing the most CPU (s: own + children, wall)")
    for r in sorted(rows, key=lambda r: -r["cpu_s"])[:args.top]:
        print(f"  {r['cpu_s']:7.1f} = {r['own_cpu_s']:.1f} + {r['children_cpu_s']:.1f}  {r['wall_s']:6.1f}  "
              f"{r['worker'] or '-'}  {r['test']}")
    by_file = defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        f = by_file[r["test"].split("::")[0]]
        f[0] += r["cpu_s"]
        f[1] += r["wall_s"]
        f[2] += 1
    print(f"\nthe {args.top} test files costing the most CPU (s, wall s, tests)")
    for name, (cpu, wall, n) in sorted(by_file.items(), key=lambda kv: -kv[1][0])[:args.top]:
        print(f"  {cpu:7.1f} {wall:7.1f} {n:5d}  {name}")


if __name__ == "__main__":
    main()
