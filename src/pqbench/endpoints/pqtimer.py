"""The client: pqtimer processes in the client namespace, their JSON-lines samples collected.

Samples a worker promised but never printed (it crashed or was killed) are added as failures with
error class "client_lost": every requested sample is accounted for.
"""

import collections
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

from pqbench import concurrency, paths, stack
from pqbench.errors import MissingCapability

MODES = ("handshake", "page", "requests", "resume")


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


def run(job: TimerJob, n: int, parallel, popen, out_dir) -> list[dict]:
    """Runs workers in the client namespace (popen runs argv there) until n samples exist.

    The workers claim sample indices from one shared counter, so they all finish within a
    handshake of each other. `parallel` is a worker count or a controller from
    pqbench.concurrency (it may add workers while the cell runs). Each worker writes its own file
    in out_dir, so none ever blocks on a full pipe while a sample is being timed. Indices claimed by
    a worker that died are returned as "client_lost" failures: every requested sample is accounted for.
    """
    control = concurrency.Fixed(parallel) if isinstance(parallel, int) else parallel
    out_dir = Path(out_dir)
    claims = out_dir / "pqtimer-claims"
    claims.write_bytes(bytes(8))
    procs: list[tuple[subprocess.Popen, Path]] = []

    def spawn(k: int) -> None:
        for _ in range(k):
            path = out_dir / f"pqtimer-{len(procs)}.jsonl"
            argv = job.argv(n, len(procs)) + ["--claim", str(claims)]
            with open(path, "wb") as out, open(path.with_suffix(".err"), "wb") as err:
                procs.append((popen(argv, env=stack.openssl_env(), stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err), path))

    spawn(max(1, min(control.start, n)))
    deadline = time.monotonic() + (n + job.warmup + 1) * (job.timeout_ms / 1000) * max(1, job.requests) + 30
    while any(p.poll() is None for p, _ in procs):
        if time.monotonic() > deadline:
            for p, _ in procs:
                if p.poll() is None:
                    p.kill()
            break
        time.sleep(concurrency.LOOK_S)
        started = _claimed(claims)
        if started < n:
            spawn(min(control.more(len(procs), started), n - started))
    samples, seen, died = [], set(), []
    for w, (proc, path) in enumerate(procs):
        proc.wait()
        for line in path.read_text(errors="replace").splitlines():
            try:
                s = json.loads(line)
            except ValueError:
                continue
            samples.append(s)
            seen.add(s.get("i"))
        if proc.returncode not in (0, 1):
            err = path.with_suffix(".err").read_text(errors="replace").strip()[-300:]
            died.append(f"pqtimer worker {w} exited with {proc.returncode}: {err}")
    missing = [i for i in range(n) if i not in seen]
    if missing:
        why = "; ".join(died) or "no worker took these samples"
        samples += [lost_sample(job, -1, i, why) for i in missing]
    samples.sort(key=lambda s: s.get("i", 0))
    return samples


def _claimed(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[:8], sys.byteorder)
