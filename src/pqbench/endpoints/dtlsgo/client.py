"""The `dtlsgo` stack's client: `dtlsgo client`, pion/dtls with pqtimer's command line and the DTLS sample
(one connection and UDP source port per sample; phases, datagram and ClientHello counts, the cookie and the
sample's own wire milestone: see native/dtlsgo/cmd/dtlsgo/client.go)."""

from __future__ import annotations

from pathlib import Path

from pqbench.endpoints.base import ClientJob
from pqbench.endpoints.dtlsgo import build
from pqbench.udp import dtls

SPEAKS = ("udp",)  # the transports the dtlsgo client and server speak
MODES = ("handshake",)


class DtlsGoClient:
    name = "dtlsgo"
    milestones = dtls.TIMELINE.milestones

    def argv(self, job: ClientJob, count: int, worker: int, claims: Path | None) -> list[str]:
        """claims None: the worker takes indices 0..count-1 itself (a single probe)."""
        b = build.require()
        job.handshakes_over_udp("dtlsgo", "dtls")
        groups = [build.group_name(g) or g for g in job.groups]  # unknown ones: dtlsgo exits 2 naming them
        return [str(b), "client", *job.tls_client_options(groups, count, worker, claims)]

    def env(self) -> dict:
        return {}  # nothing inherited: a GODEBUG in the caller's environment would change what Go offers
