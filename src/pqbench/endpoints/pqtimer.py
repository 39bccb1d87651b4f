"""The client: pqtimer processes in the client namespace, their JSON-lines samples collected.

Samples a worker promised but never printed (it crashed or was killed) are added as failures with
error class "client_lost": every requested sample is accounted for.
"""

import collections
import dataclasses
import json
import subprocess

from pqbench import paths, stack
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


def split_counts(n: int, parallel: int) -> list[int]:
    """n samples over `parallel` workers as evenly as possible (no worker gets zero)."""
    parallel = max(1, min(parallel, n))
    return [n // parallel + (1 if i < n % parallel else 0) for i in range(parallel)]


def lost_sample(job: TimerJob, worker: int, i: int, why: str) -> dict:
    return {"worker": worker, "i": i, "mode": job.mode, "ok": False, "error_class": "client_lost",
            "error": why, "t_ns": {}, "group": None, "sigalg": None}


def run(job: TimerJob, n: int, parallel: int, popen, out_dir) -> list[dict]:
    """Runs the workers at once (popen runs argv in the client namespace) and returns all samples.

    Each worker writes into its own file in out_dir, so no worker ever blocks on a full pipe
    while its samples are being timed.
    """
    counts = split_counts(n, parallel)
    files = [out_dir / f"pqtimer-{w}.jsonl" for w in range(len(counts))]
    procs = []
    for w, (count, path) in enumerate(zip(counts, files)):
        with open(path, "wb") as out, open(path.with_suffix(".err"), "wb") as err:
            procs.append(popen(job.argv(count, w), env=stack.openssl_env(), stdin=subprocess.DEVNULL,
                               stdout=out, stderr=err))
    budget = (max(counts) + job.warmup + 1) * (job.timeout_ms / 1000) * max(1, job.requests) + 30
    samples = []
    for w, (proc, count, path) in enumerate(zip(procs, counts, files)):
        try:
            proc.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        got = []
        for line in path.read_text(errors="replace").splitlines():
            try:
                got.append(json.loads(line))
            except ValueError:
                continue
        if proc.returncode not in (0, 1) or len(got) < count:
            err = path.with_suffix(".err").read_text(errors="replace").strip()[-300:]
            why = f"pqtimer worker {w} exited with {proc.returncode}: {err}"
            seen = {s.get("i") for s in got}
            got += [lost_sample(job, w, i, why) for i in range(count) if i not in seen]
        samples += got
    return samples
