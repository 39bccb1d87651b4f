"""One step of open-loop load: a stack's load generator offers a rate for a while, from the client
side, pinned to the client's CPUs; its JSON result comes back as a dict (the generators' shared
contract: offered_rate, scheduled, started, completed, failures, skipped, latency_ms, service_ms,
start_lag_ms, achieved_rate, wall_s, client_cpu_s, group)."""

from __future__ import annotations

import json
import os
import signal
import subprocess

from pqbench.endpoints.base import ClientJob, LoadGenerator, Place
from pqbench.errors import MeasurementFailed
from pqbench.testbed import registry

GRACE_S = 30  # beyond the step and one handshake timeout: a generator that has not printed by then is stuck


def run(gen: LoadGenerator, place: Place, job: ClientJob, rate: float, duration_ms: int, *, max_inflight: int,
        seed: int, cpus: set[int] | None) -> dict:
    argv = gen.argv(job, rate, duration_ms, max_inflight=max_inflight, seed=seed)
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    proc = place.popen(argv, env={**os.environ, **gen.env()}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, preexec_fn=pin)
    try:
        out, err = proc.communicate(timeout=duration_ms / 1000 + job.timeout_ms / 1000 + GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise MeasurementFailed(f"{gen.name} did not finish a {duration_ms} ms step at {rate:g}/s") from None
    except BaseException:  # Ctrl-C: the generator ends here, not against the servers as they stop
        registry.kill_child(proc)
        raise
    if proc.returncode == -signal.SIGINT:  # a terminal's Ctrl-C reached the generator first: the step is cut short
        raise KeyboardInterrupt
    try:
        return json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise MeasurementFailed(f"{gen.name} printed no result (exit {proc.returncode}): "
                                f"{err.decode(errors='replace').strip()[-400:]}") from None
