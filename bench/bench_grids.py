#!/usr/bin/env python3
"""Trustworthy grids: does CPU queueing move the clean mode of a lossy sweep? (root, after `make`,
idle machine; about 15-25 minutes.)

The spec of issue "trustworthy grids" (secp256r1, p256_mlkem512, p256_frodo640aes × ecdsap256 ×
30.916 ms × 10 and 15 % loss, 1000 Mbit/s, seed 11) is run in one go as:
  ref      parallel = 1, lanes = 1: no concurrency at all, the reference
  lanes1   parallel = "auto", lanes = 1
  lanes4   parallel = "auto", lanes = 4 (the default)
  noprio4  parallel = "auto", lanes = 4, without the CPU priority of measured processes
           (PQBENCH_PRIORITY=0: the kernel's default slice and nice, pqbench's session not raised)
  spin0    parallel = "auto", lanes = 4, pqlink's forwarding threads not spinning before deadlines
           (PQBENCH_PQLINK_SPIN_US=0: the CPU they hold at real-time priority, against its timing gain)
  awake0   parallel = "auto", lanes = 4, without pqlink's keep-awake spinners (PQBENCH_PQLINK_KEEP_AWAKE=0)
  base4    (with --baseline COMMIT) that commit's code, lanes = 4, same build
Printed per cell and run: the share of successful samples between the clean mode and the first
RTO (above the reference cell's clean time + BAND_MS and below 250 ms), the late-sample detector's
count, the shift of p25 and p50 against the reference with 95 % bootstrap CIs, and each run's wall
time with its ratio to lanes4.

    build/venv/bin/python bench/bench_grids.py [-n 1000] [--ref-n 400] [--baseline 2b3eaa1] [--kex secp256r1]
        [--skip ref lanes1 lanes4 noprio4 spin0] [--keep DIR] [--ref-db DIR/ref.duckdb]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pqbench import stats, store  # noqa: E402

BAND_MS = 1.5  # above the reference's clean time by this much, a sample has left the clean mode
RTO_MS = 250.0
SPEC = """
name = "bench-grids-{tag}"
seed = 11
parallel = {parallel}
timeout = "60s"
samples = {n}
lanes = {lanes}
[axes]
kex = {kex}
sig = ["ecdsap256"]
rtt = ["30.916ms"]
loss = ["10%", "15%"]
rate = ["1000mbit"]
"""


def run(tag: str, d: Path, src: Path, *, parallel: str, n: int, lanes: int, kex: list,
        env: dict | None = None) -> tuple[float, Path]:
    spec = d / f"{tag}.toml"
    spec.write_text(SPEC.format(tag=tag, parallel=parallel, n=n, lanes=lanes, kex=json.dumps(kex)))
    db = d / f"{tag}.duckdb"
    env = {**os.environ, "PYTHONPATH": str(src), "PQBENCH_BUILD": str(ROOT / "build"), **(env or {})}
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "pqbench", "run", str(spec), "--db", str(db), "--quiet"], env=env,
                   check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t0, db


def cells(db: Path) -> dict:
    """(kex, loss) -> (durations of successful samples, detector or None)."""
    con = store.connect(db, read_only=True)
    run_id = store.resolve_run(con, "latest")
    out = {}
    for row in store.cell_rows(con, run_id):
        out[(row["kex"], row["loss"])] = {"detector": json.loads(row["detector"]) if row.get("detector") else None,
                                          "cell_id": row["cell_id"]}
    cols = store.sample_columns(con, run_id, ("duration_ms",))
    con.close()
    by_id = {v["cell_id"]: k for k, v in out.items()}
    for cid, ok, ms in zip(cols["cell_id"], cols["ok"], cols["duration_ms"]):
        if ok:
            out[by_id[cid]].setdefault("ms", []).append(float(ms))
    return out


def clean_time(ms: list[float]) -> float:
    return stats.percentile(sorted(ms), 5)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=1000, help="samples per cell of the auto runs")
    ap.add_argument("--ref-n", type=int, default=400, help="samples per cell of the parallel = 1 reference")
    ap.add_argument("--baseline", metavar="COMMIT", help="also run this commit's code with 4 lanes")
    ap.add_argument("--kex", nargs="+", default=["secp256r1", "p256_mlkem512", "p256_frodo640aes"])
    ap.add_argument("--skip", nargs="*", default=[], choices=["ref", "lanes1", "lanes4", "noprio4", "spin0", "awake0", "fifo4"],
                    help="runs to leave out")
    ap.add_argument("--ref-db", type=Path, help="the reference from an earlier --keep run (with --skip ref)")
    ap.add_argument("--keep", type=Path, help="keep the runs' stores in this directory")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = args.keep or Path(tmp)
        d.mkdir(parents=True, exist_ok=True)
        plan = [("ref", ROOT / "src", "1", args.ref_n, 1, {}), ("lanes1", ROOT / "src", '"auto"', args.n, 1, {}),
                ("lanes4", ROOT / "src", '"auto"', args.n, 4, {}),
                ("noprio4", ROOT / "src", '"auto"', args.n, 4, {"PQBENCH_PRIORITY": "0"}),
                ("spin0", ROOT / "src", '"auto"', args.n, 4, {"PQBENCH_PQLINK_SPIN_US": "0"}),
                ("awake0", ROOT / "src", '"auto"', args.n, 4, {"PQBENCH_PQLINK_KEEP_AWAKE": "0"}),
                ("fifo4", ROOT / "src", '"auto"', args.n, 4, {"PQBENCH_MEASURED_FIFO": "10"})]
        plan = [p for p in plan if p[0] not in args.skip]
        if "ref" in args.skip and not args.ref_db:
            ap.error("--skip ref needs --ref-db (the shifts are against a reference)")
        if args.baseline:
            tree = d / "baseline"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), args.baseline],
                           check=True)
            plan.append(("base4", tree / "src", '"auto"', args.n, 4, {}))
        results = {}
        if args.ref_db:
            results["ref"] = (float("nan"), cells(args.ref_db))
        try:
            for tag, src, parallel, n, lanes, env in plan:
                wall, db = run(tag, d, src, parallel=parallel, n=n, lanes=lanes, kex=args.kex, env=env)
                results[tag] = (wall, cells(db))
                print(f"[bench] {tag}: {wall:.0f} s", file=sys.stderr, flush=True)
        finally:
            if args.baseline:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(d / "baseline")])
    ref = results["ref"][1]
    print("wall time: " + ", ".join(f"{tag} {w:.0f} s" for tag, (w, _) in results.items())
          + (f"; lanes4/lanes1 {results['lanes4'][0] / results['lanes1'][0]:.2f}" if {"lanes1", "lanes4"} <= set(results) else "")
          + (f"; lanes4/base4 {results['lanes4'][0] / results['base4'][0]:.2f}" if {"base4", "lanes4"} <= set(results) else ""))
    print(f"between the clean mode (reference p5 + {BAND_MS} ms) and {RTO_MS:g} ms; shifts against the "
          "parallel = 1 reference [95 % CI]")
    for key in sorted(ref):
        clean = clean_time(ref[key]["ms"])
        print(f"{key[0]} at {key[1] * 100:g} % loss (reference clean {clean:.2f} ms):")
        for tag, (_, got) in results.items():
            ms = got[key]["ms"]
            band = sum(1 for v in ms if clean + BAND_MS < v < RTO_MS) / len(ms)
            det = got[key]["detector"] or {}
            late = f"{det['late']}/{det['untouched']}" if det.get("late") is not None else "–"
            line = f"  {tag:>6}: n {len(ms):5d}, between {100 * band:4.1f} %, late {late:>8}"
            if tag != "ref":
                for q in (25, 50):
                    diff, lo, hi = stats.bootstrap_diff(ref[key]["ms"], ms, q)
                    line += f", p{q} {diff:+6.2f} [{lo:+.2f}, {hi:+.2f}]"
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
