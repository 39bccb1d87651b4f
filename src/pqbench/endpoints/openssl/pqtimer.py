"""The `openssl` stack's client: pqtimer (native/pqtimer), a C program on our OpenSSL that prints one
JSON sample per connection (phase times, handshake message sizes, TCP_INFO, its local port).

Over QUIC (`--transport quic`, native/pqtimer/quic.c) it is OpenSSL 3.5's QUIC client with the same groups,
signatures and verification, HTTP/3 for pages, and the QUIC sample (datagrams, Initial size, Retry, and its
own wire milestone). OpenSSL's client cannot resume over QUIC here nor size its Initial datagrams (always
1200 bytes of UDP payload): those jobs are refused with the reason.

A multi-origin page (the webpage axis, pqbench.webpages) is pqtimer's page mode with the page's further
resources (`--resource ADDR,NAME,PATH`, native/pqtimer/page.h): the document on its own connection, then one
connection per further origin at once, over HTTP/1.1 on TCP; the sample carries the load as a browser's does."""

from __future__ import annotations

from pathlib import Path

from pqbench import paths, transport
from pqbench.algorithms import openssl_build
from pqbench.sample import TLS_MILESTONES
from pqbench.endpoints.base import ClientJob
from pqbench.endpoints.offer import parse_offer
from pqbench.errors import MissingCapability
from pqbench.webpages import pages

# OpenSSL 3.5's QUIC client pads every Initial datagram to RFC 9000's minimum and has no setting to change it.
OPENSSL_QUIC_INITIAL_SIZE = 1200
QUIC_MODES = ("handshake", "page", "requests")


def binary() -> Path:
    return paths.native_binary("pqtimer")


def quic_refusal(job: ClientJob) -> str | None:
    """Why pqtimer cannot measure this job over QUIC (pqtimer itself exits 3 with the same reason), or None."""
    if job.mode not in QUIC_MODES:
        return (f"mode {job.mode}: pqtimer does not resume QUIC connections yet "
                f"(over QUIC: {', '.join(QUIC_MODES)})")
    if job.initial_size is not None and job.initial_size != OPENSSL_QUIC_INITIAL_SIZE:
        return (f"initial_size {job.initial_size}: OpenSSL 3.5's QUIC client cannot set the size of its Initial "
                f"datagrams; it always sends {OPENSSL_QUIC_INITIAL_SIZE} bytes of UDP payload")
    return None


# What pqtimer cannot do over a transport that it can over TCP, by transport (pqbench.transport.TRANSPORTS).
REFUSALS = {"quic": quic_refusal}


def page_options(job: ClientJob) -> list[str]:
    """A multi-origin page's document (the last --path wins over the job's page) and its further resources, each
    on its origin's name and address (job.hosts; origin 0 is the job's own server)."""
    name = (job.axes or {}).get("webpage")
    if not name or job.mode != "page":
        return []
    page = pages.page(name, job.port)
    where = {0: (job.host, job.servername), **{k: (job.hosts[pages.origin_name(k)], pages.origin_name(k))
                                             for k in range(1, page.origins)}}
    return ["--path", page.document.path,
            *[a for r in page.resources[1:] for a in ("--resource", ",".join((*where[r.origin], r.path)))]]


class Pqtimer:
    name = "pqtimer"
    milestones = TLS_MILESTONES  # QUIC samples name their own (pqbench.sample.QUIC_MILESTONES: the same)

    def argv(self, job: ClientJob, count: int, worker: int, claims: Path | None) -> list[str]:
        """claims None: the worker takes indices 0..count-1 itself (a single probe)."""
        b = binary()
        if not b.exists():
            raise MissingCapability(f"{b} is missing", "run `make` in the project root")
        refusal = REFUSALS.get(job.transport)
        if refusal and (why := refusal(job)):
            raise MissingCapability(f"pqtimer over {transport.get(job.transport).label}: {why}",
                                    "measure it over TCP or with the quicgo client")
        # An offer is OpenSSL's groups list with its key shares marked (pqbench.endpoints.offer)
        groups = [parse_offer(job.offer).openssl()] if job.offer else job.groups
        return [str(b), *job.tls_client_options(groups, count, worker, claims), *page_options(job)]

    def env(self) -> dict:
        return openssl_build.openssl_env()
