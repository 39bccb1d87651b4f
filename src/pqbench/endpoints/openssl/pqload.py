"""The `openssl` stack's load generator: pqload (native/pqload), open-loop TLS handshakes on our OpenSSL."""

from __future__ import annotations

from pqbench import paths
from pqbench.algorithms import openssl_build
from pqbench.endpoints.base import ClientJob
from pqbench.errors import MissingCapability


class Pqload:
    name = "pqload"

    def argv(self, job: ClientJob, rate: float, duration_ms: int, *, max_inflight: int, seed: int) -> list[str]:
        b = paths.native_binary("pqload")
        if not b.exists():
            raise MissingCapability(f"{b} is missing", "run `make` in the project root")
        return [str(b), "--host", job.host, "--port", str(job.port), "--groups", ":".join(job.groups),
                *(["--cafile", job.cafile] if job.cafile else []), "--servername", job.servername,
                "--rate", f"{rate:g}", "--duration-ms", str(duration_ms), "--timeout-ms", str(job.timeout_ms),
                "--max-inflight", str(max_inflight), "--seed", str(seed)]

    def env(self) -> dict:
        return openssl_build.openssl_env()
