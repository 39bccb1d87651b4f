"""The `chromium` stack's client: worker processes (pqbench.endpoints.chromium.worker), each driving one
headless Chromium over the DevTools protocol, one page load per sample in a new browser context."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

from pqbench.endpoints.base import ClientJob
from pqbench.errors import MissingCapability
from pqbench.sample import TLS_MILESTONES

SRC = str(Path(__file__).resolve().parents[3])  # where pqbench is imported from (a checkout or the venv)


class Chromium:
    name = "chromium"
    WORKER = "pqbench.endpoints.chromium.worker"
    milestones = TLS_MILESTONES

    def argv(self, job: ClientJob, count: int, worker: int, claims: Path | None) -> list[str]:
        """claims None: the worker takes indices 0..count-1 itself (a probe)."""
        job.plain_offer(self.name)  # its ClientHello is the browser's own
        if job.mode not in ("handshake", "page"):
            raise MissingCapability(f"mode {job.mode}: the {self.name} client loads pages cold (handshake, page)",
                                    "measure resumption with the openssl client (pqtimer)")
        argv = [sys.executable, "-m", self.WORKER, "--job", json.dumps(dataclasses.asdict(job)),
                "--count", str(count), "--worker", str(worker)]
        # the profile beside the sampler's files, so a crashed run's profile goes with its run folder
        return argv + (["--claim", str(claims), "--home", str(Path(claims).parent)] if claims else [])

    def env(self) -> dict:
        return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p)}
