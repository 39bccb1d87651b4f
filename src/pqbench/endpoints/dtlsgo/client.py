"""The `dtlsgo` stack's client: `dtlsgo client`, pion/dtls with pqtimer's command line and the DTLS sample
(one connection and UDP source port per sample; phases, datagram and ClientHello counts, the cookie and the
sample's own wire milestone: see native/dtlsgo/cmd/dtlsgo/client.go)."""

from __future__ import annotations

from pathlib import Path

from pqbench.endpoints.base import ClientJob
from pqbench.endpoints.dtlsgo import build
from pqbench.errors import MissingCapability
from pqbench.udp import dtls

SPEAKS = ("udp",)  # the transports the dtlsgo client and server speak
MODES = ("handshake",)


class DtlsGoClient:
    name = "dtlsgo"
    milestones = dtls.TIMELINE.milestones

    def argv(self, job: ClientJob, count: int, worker: int, claims: Path | None) -> list[str]:
        """claims None: the worker takes indices 0..count-1 itself (a single probe)."""
        b = build.require()
        if job.transport not in SPEAKS:
            raise MissingCapability(f"the dtlsgo client speaks only DTLS over UDP, not {job.transport}",
                                    "measure it with protocol = dtls")
        if job.mode not in MODES:
            raise MissingCapability(f"the dtlsgo client has no {job.mode} mode", "use handshake")
        if job.pad:
            raise MissingCapability("--pad: the dtlsgo client cannot pad its ClientHello",
                                    "measure padding with the openssl client over TCP")
        job.plain_offer("dtlsgo")
        groups = [build.group_name(g) or g for g in job.groups]  # unknown ones: dtlsgo exits 2 naming them
        return [str(b), "client", *job.tls_client_options(groups, count, worker, claims)]

    def env(self) -> dict:
        return {}  # nothing inherited: a GODEBUG in the caller's environment would change what Go offers
