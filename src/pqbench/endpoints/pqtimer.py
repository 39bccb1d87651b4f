"""The client: pqtimer processes in the client namespace, their JSON-lines samples collected.

Samples a worker promised but never printed (it crashed or was killed) are added as failures with
error class "client_lost": every requested sample is accounted for.
"""

import collections
import dataclasses
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from pqbench import concurrency, paths, stack, stats
from pqbench.errors import MissingCapability

MODES = ("handshake", "page", "requests", "resume")
# A run is in its tail once every sample is claimed and at most TAIL_WORKERS workers are still on
# their last sample (retransmission backoff, mostly), or TAIL_AFTER × the median (at least
# TAIL_MIN_S) has passed since: the samples still running are then the slow ones.
TAIL_WORKERS = 4
TAIL_AFTER = 3
TAIL_MIN_S = 1.0
# The duration a sample's headline figure measures, per mode (phase names of pqtimer).
END_PHASE = {"handshake": "handshake_done", "resume": "handshake_done", "page": "last_byte",
             "requests": "last_byte"}


class Cancelled(Exception):
    """run() was asked to stop: its workers were killed and its samples dropped."""


@dataclasses.dataclass
class TimerJob:
    host: str
    port: int
    groups: list[str]
    cafile: str
    servername: str
    mode: str = "handshake"
    path: str = "/"
    requests: int = 1
    sigalgs: list[str] | None = None
    warmup: int = 0
    timeout_ms: int = 10_000
    pad: int = 0

    def argv(self, count: int, worker: int) -> list[str]:
        binary = paths.native_binary("pqtimer")
        if not binary.exists():
            raise MissingCapability(f"{binary} is missing", "run `make` in the project root")
        argv = [str(binary), "--host", self.host, "--port", str(self.port), "--mode", self.mode,
                "--groups", ":".join(self.groups), "--cafile", self.cafile, "--servername", self.servername,
                "--count", str(count), "--warmup", str(self.warmup), "--timeout-ms", str(self.timeout_ms),
                "--worker", str(worker)]
        if self.mode in ("page", "requests"):
            argv += ["--path", self.path]
        if self.mode == "requests":
            argv += ["--requests", str(self.requests)]
        if self.sigalgs:
            argv += ["--sigalgs", ":".join(self.sigalgs)]
        if self.pad:
            argv += ["--pad", str(self.pad)]
        return argv


def failure_classes(samples: list[dict]) -> dict[str, int]:
    """How many samples failed with each error class."""
    return dict(collections.Counter(s.get("error_class") or "unknown" for s in samples if not s.get("ok")))


def lost_sample(job: TimerJob, worker: int, i: int, why: str) -> dict:
    return {"worker": worker, "i": i, "mode": job.mode, "ok": False, "error_class": "client_lost",
            "error": why, "t_ns": {}, "group": None, "sigalg": None}


class _Worker:
    """One pqtimer process and the samples read so far from its output file."""

    def __init__(self, proc: subprocess.Popen, path: Path):
        self.proc, self.path, self.partial = proc, path, b""
        self.output = open(path, "rb")  # read as it grows: the controller looks at the samples so far

    def read_new(self) -> list[dict]:
        *lines, self.partial = (self.partial + self.output.read()).split(b"\n")  # the last piece may be unfinished
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out


def run(job: TimerJob, n: int, parallel, popen, out_dir, *, tail: threading.Event | None = None,
        stop: threading.Event | None = None) -> list[dict]:
    """Runs workers in the client namespace (popen runs argv there) until n samples exist.

    The workers claim sample indices from one shared counter, so they all finish within a
    handshake of each other. `parallel` is a worker count or a controller from
    pqbench.concurrency (it may add workers while the cell runs, looking at the samples so far).
    Each worker writes its own file in out_dir, so none ever blocks on a full pipe while a sample
    is being timed. Indices claimed by a worker that died are returned as "client_lost" failures:
    every requested sample is accounted for.
    tail: set once only stragglers remain (see TAIL_WORKERS), so a caller can start other work
    that cannot bias them much: they spend their time waiting for retransmission timers.
    stop: when set, the workers are killed and Cancelled raised.
    """
    control = concurrency.Fixed(parallel) if isinstance(parallel, int) else parallel
    out_dir = Path(out_dir)
    claims = out_dir / "pqtimer-claims"
    claims.write_bytes(bytes(8))
    workers: list[_Worker] = []
    samples: list[dict] = []
    durations: list[float] = []  # the metric of the successful samples so far, ms

    def spawn(k: int) -> None:
        for _ in range(k):
            path = out_dir / f"pqtimer-{len(workers)}.jsonl"
            argv = job.argv(n, len(workers)) + ["--claim", str(claims)]
            with open(path, "wb") as out, open(path.with_suffix(".err"), "wb") as err:
                workers.append(_Worker(popen(argv, env=stack.openssl_env(), stdin=subprocess.DEVNULL,
                                             stdout=out, stderr=err), path))

    def collect() -> None:
        for w in workers:
            for s in w.read_new():
                samples.append(s)
                t = (s.get("t_ns") or {}).get(END_PHASE[job.mode])
                if s.get("ok") and t is not None:
                    durations.append(t / 1e6)

    def kill() -> None:
        for w in workers:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()

    spawn(max(1, min(control.start, n)))
    deadline = time.monotonic() + (n + job.warmup + 1) * (job.timeout_ms / 1000) * max(1, job.requests) + 30
    all_claimed_at = None
    while any(w.proc.poll() is None for w in workers):
        if stop is not None and stop.is_set():
            kill()
            for w in workers:
                w.output.close()
            raise Cancelled("stopped")
        if time.monotonic() > deadline:
            kill()
            break
        time.sleep(concurrency.LOOK_S)
        collect()
        started = _claimed(claims)
        if started < n:
            spawn(min(control.more(len(workers), started, durations), n - started))
        elif tail is not None and not tail.is_set():
            all_claimed_at = all_claimed_at or time.monotonic()
            alive = sum(1 for w in workers if w.proc.poll() is None)
            waited = time.monotonic() - all_claimed_at
            if alive <= TAIL_WORKERS or waited >= max(TAIL_MIN_S, TAIL_AFTER * _median(durations) / 1000):
                tail.set()
    died = []
    for k, w in enumerate(workers):
        w.proc.wait()
        if w.proc.returncode not in (0, 1):
            err = w.path.with_suffix(".err").read_text(errors="replace").strip()[-300:]
            died.append(f"pqtimer worker {k} exited with {w.proc.returncode}: {err}")
    collect()
    for w in workers:
        w.output.close()
    seen = {s.get("i") for s in samples}
    missing = [i for i in range(n) if i not in seen]
    if missing:
        why = "; ".join(died) or "no worker took these samples"
        samples += [lost_sample(job, -1, i, why) for i in missing]
    samples.sort(key=lambda s: s.get("i", 0))
    return samples


def _median(values: list[float]) -> float:
    return stats.median(values) if values else 0.0


def _claimed(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[:8], sys.byteorder)
