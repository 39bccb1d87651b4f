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
    priority = "normal"  # a browser must not run real-time (launch.py): its clock is judged by that floor
    # The modes per transport (the stack's capabilities read them): cold loads (handshake, page) and warm ones
    # (pqbench.endpoints.browsers.warm): resumed, and 0-RTT where the browser sends early data and the server
    # takes it
    MODES = {"tcp": ("handshake", "page", "resume_page", "early"), "quic": ("handshake", "page")}

    def argv(self, job: ClientJob, count: int, worker: int, claims: Path | None) -> list[str]:
        """claims None: the worker takes indices 0..count-1 itself (a probe)."""
        job.plain_offer(self.name)  # its ClientHello is the browser's own
        modes = self.MODES.get(job.transport, ())
        if job.mode not in modes:
            raise MissingCapability(f"mode {job.mode}: the {self.name} client over {job.transport} loads pages "
                                    f"only as {', '.join(modes)}", "measure it with the openssl client (pqtimer)")
        argv = [sys.executable, "-m", self.WORKER, "--job", json.dumps(dataclasses.asdict(job)),
                "--count", str(count), "--worker", str(worker)]
        # the profile beside the sampler's files, so a crashed run's profile goes with its run folder
        return argv + (["--claim", str(claims), "--home", str(Path(claims).parent)] if claims else [])

    def env(self) -> dict:
        return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p)}
