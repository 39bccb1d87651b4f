"""The `quicgo` stack's client: `quicgo client`, quic-go with pqtimer's command line and the QUIC sample
(one connection and UDP source port per sample; phases, datagram counts and the sample's own wire
milestone: see native/quicgo/cmd/quicgo/client.go)."""

from __future__ import annotations

from pathlib import Path

from pqbench.endpoints.base import ClientJob
from pqbench.endpoints.quicgo import build
from pqbench.errors import MissingCapability
from pqbench.sample import QUIC_MILESTONES

# The transports the quicgo client and server speak (its capabilities say so; pqbench.transport.TRANSPORTS).
SPEAKS = ("quic",)
# quic-go's largest packet (its packet buffer): it would silently clamp a larger Initial size.
MAX_INITIAL = 1452
# The quicgo client's modes (the stack's capabilities say so too unless the binary names others).
MODES = ("handshake", "page")
# quic-go turns UDP segmentation offload off only through this variable; quicgo sets it itself too.
ENV = {"QUIC_GO_DISABLE_GSO": "true"}


class QuicGoClient:
    name = "quicgo"
    milestones = QUIC_MILESTONES

    def argv(self, job: ClientJob, count: int, worker: int, claims: Path | None) -> list[str]:
        """claims None: the worker takes indices 0..count-1 itself (a single probe)."""
        b = build.require()
        if job.transport not in SPEAKS:
            raise MissingCapability(f"the quicgo client speaks only QUIC, not {job.transport}", "use transport = quic")
        if job.mode not in MODES:
            raise MissingCapability(f"the quicgo client has no {job.mode} mode", "use handshake or page")
        if job.pad:
            raise MissingCapability("--pad: the quicgo client cannot pad its ClientHello",
                                    "measure padding with the openssl client")
        if job.initial_size is not None and job.initial_size > MAX_INITIAL:
            raise MissingCapability(f"initial_size {job.initial_size}: quic-go sends Initial datagrams of at most "
                                    f"{MAX_INITIAL} bytes (its packet buffer)", f"use 1200..{MAX_INITIAL} with quicgo")
        job.plain_offer("quicgo")
        groups = [build.group_name(g) or g for g in job.groups]  # unknown ones: quicgo exits 2 naming them
        return [str(b), "client", *job.tls_client_options(groups, count, worker, claims)]

    def env(self) -> dict:
        # Nothing else inherited: a GODEBUG in the caller's environment would change what crypto/tls offers.
        return dict(ENV)
