#!/usr/bin/env python3
"""Server capacity per TLS server stack and algorithm (root, after `make` and `make stacks`), against
`openssl s_time -new` on the same server in the same rig: handshakes/s at saturation from pqload's
open-loop ramp (or the lower bound where the generator saturated first), both sides' CPU per handshake,
and s_time's closed-loop connections/s (one connection at a time, so its rate is 1 / the handshake's
latency, not the server's capacity: the ratio says how much an open-loop generator finds beyond it).

    build/venv/bin/python bench/bench_load.py [--stacks openssl,s2n,rustls,gotls] [--step 2s]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pqbench import endpoints, paths, units  # noqa: E402
from pqbench.algorithms import openssl_build  # noqa: E402
from pqbench.endpoints.base import DEFAULT_PAGES, Serving, Site  # noqa: E402
from pqbench.experiment.loadplan import LoadPlan  # noqa: E402
from pqbench.measure import cpu  # noqa: E402
from pqbench.measure.capacity import measure_cell  # noqa: E402
from pqbench.measure.rig import Rig, credentials  # noqa: E402
from pqbench.testbed import LinkSpec, TcpKnobs  # noqa: E402

CELLS = (("X25519", "ecdsap256"), ("X25519MLKEM768", "mldsa44"), ("p256_frodo640aes", "ecdsap256"))
S_TIME_S = 3


def s_time(rig, job, cpus, tmp: Path) -> float | None:
    """`openssl s_time -new` connections per second from the client side, pinned like the generator. It
    has no option for the group, so the group comes from a configuration of its own (system_default)."""
    conf = tmp / "s_time.cnf"
    base = paths.OPENSSL_CONF.read_text().replace("[openssl_init]\n", "[openssl_init]\nssl_conf = ssl_sect\n")
    conf.write_text(base + f"\n[ssl_sect]\nsystem_default = sysdef\n\n[sysdef]\nGroups = {job.groups[0]}\n")
    argv = [str(paths.OPENSSL_BIN), "s_time", "-connect", f"{job.host}:{job.port}", "-new", "-time", str(S_TIME_S),
            "-CAfile", job.cafile, "-tls1_3"]
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    proc = rig.place("client").popen(argv, env={**openssl_build.openssl_env(), "OPENSSL_CONF": str(conf)},
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=pin)
    out = proc.communicate(timeout=S_TIME_S + 30)[0].decode(errors="replace")
    m = re.search(r"([\d.]+) connections/user sec", out)
    n = re.search(r"(\d+) connections in (\d+) real seconds", out)
    return int(n.group(1)) / int(n.group(2)) if n else (float(m.group(1)) if m else None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stacks", default="openssl,s2n,rustls,gotls")
    ap.add_argument("--step", default="2s")
    args = ap.parse_args()
    plan = LoadPlan(start_rate=100, max_rate=12800, step_ms=int(units.duration_ms("--step", args.step)),
                    time_bound_s=120)
    halves = cpu.split()
    print(f"{'server':<8} {'algorithm':<28} {'capacity/s':>14} {'by':>7} {'srv ms/hs':>10} {'cli ms/hs':>10} "
          f"{'s_time/s':>9} {'ratio':>6}")
    for stack in args.stacks.split(","):
        for kex, sig in CELLS:
            why = endpoints.unsupported(stack, "openssl", kex, sig, "handshake")
            if why:
                print(f"{stack:<8} {kex + ' + ' + sig:<28} skipped: {why}")
                continue
            with tempfile.TemporaryDirectory() as tmp:
                chain = credentials("tls", sig, Path(tmp) / "certs")
                serving = Serving(Path(tmp) / "server", [Site(4433, chain)], [kex], dict(DEFAULT_PAGES), 32)
                with Rig.pairs({stack: serving}, ["openssl"], LinkSpec(), TcpKnobs()) as rig:
                    job = rig.job(4433, kex, chain, timeout_ms=10_000)
                    record, _ = measure_cell(rig, plan, LinkSpec(), TcpKnobs(), job, stack, "openssl")
                    closed = s_time(rig, job, halves[1] if halves else None, Path(tmp))
            v = record["load"]
            cap = v["capacity_hs"] or v["at_least_hs"]
            print(f"{stack:<8} {kex + ' + ' + sig:<28} {('' if v['capacity_hs'] else '>= ') + f'{cap:.0f}':>14} "
                  f"{v['saturated_by'] or '-':>7} {v['server_cpu_ms_per_hs'] or 0:>10.3f} "
                  f"{v['client_cpu_ms_per_hs'] or 0:>10.3f} {closed or 0:>9.0f} {cap / closed if closed else 0:>6.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
