"""The `gotls` stack's client: `tlsgo client`, Go's crypto/tls with pqtimer's command line and sample
format (phases crypto/tls cannot show are null; see native/tlsgo/cmd/tlsgo/client.go)."""

from __future__ import annotations

from pathlib import Path

from pqbench import wire
from pqbench.endpoints.base import ClientJob
from pqbench.endpoints.gotls import build
from pqbench.errors import MissingCapability


class GoClient:
    name = "tlsgo"
    milestones = wire.TLS_MILESTONES

    def argv(self, job: ClientJob, count: int, worker: int, claims: Path | None) -> list[str]:
        """claims None: the worker takes indices 0..count-1 itself (a single probe)."""
        b = build.require()
        if job.mode not in ("handshake", "page", "requests", "resume"):
            raise MissingCapability(f"the Go client has no {job.mode} mode", "use handshake, page, requests or resume")
        if job.pad:
            raise MissingCapability("the Go client cannot pad its ClientHello (crypto/tls has no custom extensions)",
                                    "measure padding with the openssl client")
        groups = ":".join(build.group_name(g) or g for g in job.groups)  # unknown ones: tlsgo exits 2 naming them
        argv = [str(b), "client", "--host", job.host, "--port", str(job.port), "--mode", job.mode,
                "--groups", groups, "--cafile", job.cafile, "--servername", job.servername,
                "--count", str(count), "--warmup", str(job.warmup), "--timeout-ms", str(job.timeout_ms),
                "--worker", str(worker)] + (["--claim", str(claims)] if claims else [])
        if job.mode in ("page", "requests", "resume"):  # resume: the priming request's page
            argv += ["--path", job.path]
        if job.mode == "requests":
            argv += ["--requests", str(job.requests)]
        return argv

    def env(self) -> dict:
        # Nothing inherited: a GODEBUG in the caller's environment (tlsmlkem=0, ...) would change
        # what crypto/tls offers.
        return {}
