"""The `strongswan` stack's client: ikeclient workers (a charon per sample in the client namespace, timed from its
log), pqtimer's command line."""

from __future__ import annotations

from pathlib import Path

from pqbench.endpoints.base import ClientJob
from pqbench.endpoints.strongswan import build, ikeclient
from pqbench.errors import MissingCapability
from pqbench.udp import ike

SPEAKS = ("udp",)
MODES = ("handshake",)


class StrongswanClient:
    name = "strongswan"
    milestones = ike.TIMELINE.milestones

    def argv(self, job: ClientJob, count: int, worker: int, claims: Path | None) -> list[str]:
        build.require()
        if job.transport not in SPEAKS:
            raise MissingCapability(f"the strongswan client speaks IKEv2 over UDP only, not {job.transport}",
                                    "measure it with protocol = ike")
        if job.mode not in MODES:
            raise MissingCapability(f"the strongswan client has no {job.mode} mode", "use handshake")
        if job.pad:
            raise MissingCapability("--pad: the strongswan client cannot pad its messages",
                                    "measure padding with the openssl client over TCP")
        job.plain_offer("strongswan")
        return ikeclient.argv(job, count, worker, claims)

    def env(self) -> dict:
        return dict(ikeclient.ENV)
