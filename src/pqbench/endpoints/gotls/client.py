"""The `gotls` stack's client: `tlsgo client`, Go's crypto/tls with pqtimer's command line and sample
format (phases crypto/tls cannot show are null; see native/tlsgo/cmd/tlsgo/client.go)."""

from __future__ import annotations

from pathlib import Path

from pqbench.sample import TLS_MILESTONES
from pqbench.endpoints.base import ClientJob
from pqbench.endpoints.gotls import build
from pqbench.errors import MissingCapability


class GoClient:
    name = "tlsgo"
    milestones = TLS_MILESTONES

    def argv(self, job: ClientJob, count: int, worker: int, claims: Path | None) -> list[str]:
        """claims None: the worker takes indices 0..count-1 itself (a single probe)."""
        b = build.require()
        if job.mode not in ("handshake", "page", "requests", "resume"):
            raise MissingCapability(f"the Go client has no {job.mode} mode", "use handshake, page, requests or resume")
        if job.pad:
            raise MissingCapability("--pad: the Go client cannot pad its ClientHello (crypto/tls has no custom extensions)",
                                    "measure padding with the openssl client")
        job.plain_offer("Go")
        groups = [build.group_name(g) or g for g in job.groups]  # unknown ones: tlsgo exits 2 naming them
        return [str(b), "client", *job.tls_client_options(groups, count, worker, claims)]

    def env(self) -> dict:
        # Nothing inherited: a GODEBUG in the caller's environment (tlsmlkem=0, ...) would change
        # what crypto/tls offers.
        return {}
