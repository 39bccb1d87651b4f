"""The `strongswan` stack's client: ikeclient workers (a charon per sample in the client namespace, timed from its
log), pqtimer's command line."""

from __future__ import annotations

from pathlib import Path

from pqbench.endpoints.base import ClientJob
from pqbench.endpoints.strongswan import build, ikeclient
from pqbench.udp import ike

SPEAKS = ("udp",)
MODES = ("handshake",)


class StrongswanClient:
    name = "strongswan"
    milestones = ike.TIMELINE.milestones

    def argv(self, job: ClientJob, count: int, worker: int, claims: Path | None) -> list[str]:
        build.require()
        job.handshakes_over_udp("strongswan", "ike")
        return ikeclient.argv(job, count, worker, claims)

    def env(self) -> dict:
        return dict(ikeclient.ENV)
