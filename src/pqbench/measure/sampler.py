"""The sampler: a cell's samples shared among a client's worker processes, whatever the client.

Workers claim sample indices from one shared counter, so they all finish within a sample of each
other. Each worker writes its own file, so none ever blocks on a full pipe while a sample is being
timed; the files are read as they grow, so a concurrency controller can look at the samples so far
and add workers. Indices claimed by a worker that died are returned as "client_lost" failures:
every requested sample is accounted for.
"""

from __future__ import annotations

import collections
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from pqbench import stats
from pqbench.measure import concurrency
from pqbench.endpoints.base import Client, ClientJob, Place
from pqbench.sample import END_PHASE
from pqbench.testbed import registry

# A run is in its tail once every sample is claimed and at most TAIL_WORKERS workers are still on
# their last sample (retransmission backoff, mostly), or TAIL_AFTER × the median (at least
# TAIL_MIN_S) has passed since: the samples still running are then the slow ones.
TAIL_WORKERS = 4
TAIL_AFTER = 3
TAIL_MIN_S = 1.0
# How long a cell whose clients died of SIGINT or SIGTERM waits for the run to say it was interrupted (it looks
# every concurrency.LOOK_S); a client killed so by someone else stays a recorded failure.
INTERRUPTED_WAIT_S = 2.0


class Cancelled(Exception):
    """run() was asked to stop: its workers were killed and its samples dropped."""


def failure_classes(samples: list[dict]) -> dict[str, int]:
    """How many samples failed with each error class."""
    return dict(collections.Counter(s.get("error_class") or "unknown" for s in samples if not s.get("ok")))


def lost_sample(job: ClientJob, i: int, why: str) -> dict:
    return {"worker": -1, "i": i, "mode": job.mode, "ok": False, "error_class": "client_lost",
            "error": why, "t_ns": {}, "group": None, "sigalg": None}


class _Worker:
    """One client process and the samples read so far from its output file."""

    def __init__(self, proc: subprocess.Popen, path: Path):
        self.proc, self.path, self.partial = proc, path, b""
        self.output = open(path, "rb")

    def read_new(self) -> list[dict]:
        *lines, self.partial = (self.partial + self.output.read()).split(b"\n")  # the last piece may be unfinished
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out


class _Run:
    def __init__(self, client: Client, job: ClientJob, n: int, control, place: Place, out_dir: Path):
        self.client, self.job, self.n, self.control, self.place = client, job, n, control, place
        self.out_dir = Path(out_dir)
        self.claims = self.out_dir / f"{client.name}-claims"
        self.claims.write_bytes(bytes(8))
        self.workers: list[_Worker] = []
        self.samples: list[dict] = []
        self.durations: list[float] = []  # the metric of the successful samples so far, ms

    def spawn(self, k: int) -> None:
        for _ in range(k):
            path = self.out_dir / f"{self.client.name}-{len(self.workers)}.jsonl"
            argv = self.client.argv(self.job, self.n, len(self.workers), self.claims)
            with open(path, "wb") as out, open(path.with_suffix(".err"), "wb") as err:
                proc = self.place.popen(argv, env=self.client.env(), stdin=subprocess.DEVNULL, stdout=out, stderr=err)
            self.workers.append(_Worker(proc, path))

    def collect(self) -> None:
        for w in self.workers:
            for s in w.read_new():
                self.samples.append(s)
                t = (s.get("t_ns") or {}).get(END_PHASE[self.job.mode])
                if s.get("ok") and t is not None:
                    self.durations.append(t / 1e6)

    def kill(self) -> None:
        for w in self.workers:
            registry.kill_child(w.proc)

    def signalled(self) -> bool:
        """Whether a worker died of Ctrl-C or SIGTERM (which pqbench never sends them: kill() sends SIGKILL)."""
        return any(w.proc.poll() in (-signal.SIGINT, -signal.SIGTERM) for w in self.workers)

    def claimed(self) -> int:
        return int.from_bytes(self.claims.read_bytes()[:8], sys.byteorder)

    def alive(self) -> int:
        return sum(1 for w in self.workers if w.proc.poll() is None)

    def finish(self) -> list[dict]:
        died = []
        for k, w in enumerate(self.workers):
            w.proc.wait()
            if w.proc.returncode not in (0, 1):
                err = w.path.with_suffix(".err").read_text(errors="replace").strip()[-300:]
                died.append(f"{self.client.name} worker {k} exited with {w.proc.returncode}: {err}")
        self.collect()
        self.close()
        seen = {s.get("i") for s in self.samples}
        missing = [i for i in range(self.n) if i not in seen]
        if missing:
            why = "; ".join(died) or "no worker took these samples"
            self.samples += [lost_sample(self.job, i, why) for i in missing]
        self.samples.sort(key=lambda s: s.get("i", 0))
        return self.samples

    def close(self) -> None:
        for w in self.workers:
            w.output.close()


def run(client: Client, job: ClientJob, n: int, parallel, place: Place, out_dir, *,
        tail: threading.Event | None = None, stop: threading.Event | None = None) -> list[dict]:
    """Runs client workers at `place` until n samples exist and returns them, ordered by index.

    `parallel` is a worker count or a controller from pqbench.measure.concurrency (it may add workers while
    the cell runs, looking at the samples so far).
    tail: set once only stragglers remain (see TAIL_WORKERS), so a caller can start other work
    that cannot bias them much: they spend their time waiting for retransmission timers.
    stop: when set, the workers are killed and Cancelled raised."""
    control = concurrency.Fixed(parallel) if isinstance(parallel, int) else parallel
    r = _Run(client, job, n, control, place, out_dir)
    try:
        r.spawn(max(1, min(control.start, n)))
        deadline = time.monotonic() + (n + job.warmup + 1) * (job.timeout_ms / 1000) * max(1, job.requests) + 30
        all_claimed_at = None
        while r.alive():
            if stop is not None and stop.is_set():
                r.kill()
                r.close()
                raise Cancelled("stopped")
            if time.monotonic() > deadline:
                r.kill()
                break
            time.sleep(concurrency.LOOK_S)
            r.collect()
            started = r.claimed()
            if started < n:
                r.spawn(min(control.more(len(r.workers), started, r.samples), n - started))
            elif tail is not None and not tail.is_set():
                all_claimed_at = all_claimed_at or time.monotonic()
                waited = time.monotonic() - all_claimed_at
                median = stats.median(r.durations) if r.durations else 0.0
                if r.alive() <= TAIL_WORKERS or waited >= max(TAIL_MIN_S, TAIL_AFTER * median / 1000):
                    tail.set()
        # A Ctrl-C reaches the whole process group: the clients die of it at once, while the run, which takes the
        # signal at a point of its choosing (interrupts.deferred), sets `stop` up to a look later. Their samples
        # are the interrupt's doing, not the link's: the cell is cancelled, not stored as failed.
        if stop is not None and r.signalled() and stop.wait(INTERRUPTED_WAIT_S):
            r.close()
            raise Cancelled("stopped")
        return r.finish()
    except BaseException:
        # Ctrl-C (or any error) ends the workers here, before the caller stops the servers: left running,
        # they met a stopped server and wrote failures (refused, closed) that the interrupt made, not the link
        r.kill()
        r.close()
        raise
    finally:
        control.finish()
