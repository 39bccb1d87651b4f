#!/usr/bin/env python3
"""Targets against the wire (root, after `make` and `make stacks`): a target is measured over a path
pqbench does not emulate, so the cross-checks a testbed cell gets for free are made here by putting the
"real" path inside a testbed. `pqbench serve` runs in the server namespace, the target's clients in the
client namespace, and the emulator keeps its record of every connection all the same. Per RTT:

- path: the targets' TCP-connect RTT (testbed.realpath.connect_rtt, to serve's port) against the testbed's
  own calibrated probe (testbed.probe.connect_rtts, to a listener of its own), p50 and their difference;
- TLS: `handshake --target` (pqtimer) against the wire record of the same connections;
- SSH: `ssh --target` (sshtimer --kex-only, to NEWKEYS) against the wire record.

    build/venv/bin/python bench/bench_targets.py [--rtt 5.6,31.1] [-n 200]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pqbench import endpoints, stats  # noqa: E402
from pqbench.measure import single, wire  # noqa: E402
from pqbench.remote.target import make  # noqa: E402
from pqbench.testbed import LinkSpec, Testbed, probe  # noqa: E402
from pqbench.testbed.realpath import RealPath, connect_rtt  # noqa: E402


def serve(tb, d: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "pqbench", "serve", "--address", tb.server_addr, "--netns",
                             tb.server_ns, "--dir", str(d), "--sig", "ecdsap256,mldsa44", "--workers", "4",
                             "--ssh-hostkey", "ssh-ed25519"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (d / "manifest.json").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"serve did not start: {proc.communicate()[1].decode()[-2000:]}")
        time.sleep(0.2)
    return proc


def against_wire(tb, cell_and_options: tuple, client: str) -> dict:
    """Measures the cell and joins its samples to the emulator's record: client minus wire, ms."""
    tb.reset_counters()
    offset = wire.clock_offset_ns()
    m = single.measure(*cell_and_options)
    flows = tb.backend.flows(m.run_dir / "flows.jsonl")
    joined = wire.join(m.samples, flows, offset, endpoints.get(client).client().milestones["handshake"])
    a = wire.agreement(m.samples, "handshake_done")
    p50 = stats.percentile(sorted(s["t_ns"]["handshake_done"] / 1e6 for s in m.samples if s.get("ok")), 50)
    return {"ok": sum(1 for s in m.samples if s.get("ok")), "n": len(m.samples), "joined": joined, "p50_ms": p50, **a}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rtt", default="5.6,31.1")
    ap.add_argument("-n", type=int, default=200)
    args = ap.parse_args()
    for rtt in (float(r) for r in args.rtt.split(",")):
        with Testbed(LinkSpec.symmetric(rtt)) as tb, tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            proc = serve(tb, d)
            try:
                m = json.loads((d / "manifest.json").read_text())
                with RealPath(netns={"client": tb.client_ns}) as path:
                    ours = connect_rtt(lambda: path.socket("client"), tb.server_addr, 4433, n=args.n, pause_s=0.01)
                theirs = stats.percentile(sorted(probe.connect_rtts(tb, args.n)), 50)
                print(f"RTT {rtt} ms  path: connect_rtt p50 {ours.p50_ms:.3f} ms (spread {ours.spread_ms:.3f}), "
                      f"testbed probe p50 {theirs:.3f} ms, difference {ours.p50_ms - theirs:+.3f} ms")
                tls = make("--target", f"{tb.server_addr}:4434", ca=d / m["tls"][1]["ca"],
                           server_name=m["tls"][1]["server_name"])
                r = against_wire(tb, single.one_cell("X25519MLKEM768", "", target=tls,
                                                            netns=tb.client_ns, n=args.n, rate=100), "openssl")
                print(f"RTT {rtt} ms  TLS X25519MLKEM768/mldsa44 target: {r}")
                ssh = make("--target", f"ssh://{tb.server_addr}:2222", protocol="ssh")
                r = against_wire(tb, single.one_cell("mlkem768x25519-sha256", "", protocol="ssh",
                                                            client="gossh", target=ssh,
                                                            netns=tb.client_ns, n=args.n, rate=100), "gossh")
                print(f"RTT {rtt} ms  SSH mlkem768x25519-sha256 target (--kex-only): {r}")
            finally:
                proc.terminate()
                proc.wait(timeout=60)


if __name__ == "__main__":
    main()
