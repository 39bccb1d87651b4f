"""The `openssl` stack's client: pqtimer (native/pqtimer), a C program on our OpenSSL that prints one
JSON sample per connection (phase times, handshake message sizes, TCP_INFO, its local port)."""

from __future__ import annotations

from pathlib import Path

from pqbench import paths
from pqbench.algorithms import openssl_build
from pqbench.sample import TLS_MILESTONES
from pqbench.endpoints.base import ClientJob
from pqbench.endpoints.offer import parse_offer
from pqbench.errors import MissingCapability


def binary() -> Path:
    return paths.native_binary("pqtimer")


class Pqtimer:
    name = "pqtimer"
    milestones = TLS_MILESTONES

    def argv(self, job: ClientJob, count: int, worker: int, claims: Path | None) -> list[str]:
        """claims None: the worker takes indices 0..count-1 itself (a single probe)."""
        b = binary()
        if not b.exists():
            raise MissingCapability(f"{b} is missing", "run `make` in the project root")
        # An offer is OpenSSL's groups list with its key shares marked (pqbench.endpoints.offer)
        groups = [parse_offer(job.offer).openssl()] if job.offer else job.groups
        return [str(b), *job.tls_client_options(groups, count, worker, claims)]

    def env(self) -> dict:
        return openssl_build.openssl_env()
