"""The endpoint seam: what every server and client offers the rig, whatever its library or protocol.

A stack is a server and a client of one implementation (today `openssl`: nginx + pqtimer). The rig
starts the server in the server namespace through a `Place` and waits for it to say it is ready by
a protocol-appropriate probe; the sampler runs the client's worker processes in the client
namespace. Each stack declares what it can do from its real build (`capabilities`), so a cell it
cannot measure is skipped with the reason instead of being emulated.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Callable, Protocol

from pqbench import axis
from pqbench.algorithms.certs import Chain
from pqbench.transport import DEFAULT as DEFAULT_TRANSPORT

# What a server serves unless a cell asks for a page: the 1 kB page that request cells fetch by default.
# Other pages are written only for the cells that ask for them (a 1000 kB page per handshake filled
# build/runs/ with 219 MB in an afternoon).
DEFAULT_PAGES = {"1k": 1000}
STUDY_PAGES = {"1k": 1000, "10k": 10_000, "100k": 100_000, "1000k": 1_000_000}  # Paquin et al.'s page sizes
# Server worker processes. An nginx worker runs one event loop: while it computes a handshake's crypto (or sleeps a synthetic
# algorithm's compute time) its other connections wait. With many concurrent clients, 2 workers made a
# SIKE-like handshake (22 ms of server time) queue: p50 159.8 instead of 124.0 ms at 30.9 ms RTT.
# So: enough workers that one is nearly always free (idle ones cost ~2 MB each), and `reuseport`, a
# listening socket per worker: with one shared socket the kernel's exclusive wake-up kept handing new
# connections to a worker busy with another handshake (p50 +4.9 ms at 16 clients with 32 workers;
# +0.5 ms with reuseport; 128 workers were no better than 32).
DEFAULT_WORKERS = 32


@dataclasses.dataclass
class Place:
    """One side of a testbed as an endpoint sees it: its address, and how to run a process or open
    a socket there. Processes started through it are noted, so a crashed run's leftovers can be
    removed (pqbench net clean)."""
    addr: str
    popen: Callable[..., subprocess.Popen]  # popen(argv, **kw), inside the namespace, noted
    socket: Callable[[], object]  # a socket inside the namespace


@dataclasses.dataclass
class Site:
    """One port serving one certificate chain; host: the server's address where it is not the testbed's
    server side (a target: a server pqbench did not start).

    What a server stack does per site beyond that (a stack without the feature refuses a site that asks,
    see Capabilities.features): server_groups, the groups this port accepts in OpenSSL's tuple syntax and
    its preference order (pqbench.endpoints.offer.parse_server_groups; None: the Serving's groups, one
    tuple); compress_certs, send the chain compressed (RFC 8879) to a client that offers an algorithm;
    early_data, accept 0-RTT early data on resumption."""
    port: int
    chain: Chain
    host: str | None = None
    server_groups: str | None = None
    compress_certs: bool = False
    early_data: bool = False
    # The transport this port serves (pqbench.transport.TRANSPORTS): "quic" is a UDP port, HTTP/3 over QUIC;
    # retry: validate a QUIC client's address with a Retry packet before the handshake (RFC 9000 §8.1).
    transport: str = "tcp"
    retry: bool = False
    # Registered axes (pqbench.axis) that make a port of their own without a field here: name -> value. A server
    # stack reads those it has the feature for (Capabilities.features; the axis names the feature).
    options: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Serving:
    """What a server serves for a run: a port per chain, the groups it accepts, pages."""
    run_dir: Path
    sites: list[Site]
    groups: list[str]
    pages: dict  # page name -> bytes
    workers: int


@dataclasses.dataclass
class ClientJob:
    """One cell's work for a client: where to connect and what to do per sample."""
    host: str
    port: int
    groups: list[str]
    cafile: str | None  # None: no verification enforced (a target without a CA: the result is recorded)
    servername: str
    mode: str = "handshake"
    path: str = "/"
    requests: int = 1
    warmup: int = 0
    timeout_ms: int = 10_000
    pad: int = 0
    pause_ms: int = 0  # between one sample's end and the next one's start, per worker (a target's gentle pace)
    target: bool = False  # a server pqbench did not start: no account there, trust only what was given
    # The ClientHello's groups and key shares in pqbench.endpoints.offer's notation (canonical); None: one
    # share for `groups` (every client). A client without the "offer" feature refuses any other.
    offer: str | None = None
    # Certificate compression algorithms the client offers (RFC 8879): none, all, or zlib/brotli/zstd
    # (comma-separated, in preference order). A client without the "cert_compression" feature refuses.
    cert_compression: str = "none"
    transport: str = "tcp"  # pqbench.transport.TRANSPORTS; "quic": HTTP/3 over QUIC to a UDP port
    initial_size: int | None = None  # QUIC: the UDP payload of the client's Initial datagrams; None: its default
    # mutual TLS: the client's certificate (PEM) and key, sent when the server asks
    cert: str | None = None
    key: str | None = None
    # trust anchor negotiation (pqbench.algorithms.trust_anchors): the case, and the chain's IDs and files
    trust_anchors: str | None = None
    anchors: dict = dataclasses.field(default_factory=dict)
    # Registered axes (pqbench.axis) that reach the client as an option of their own: name -> the cell's value.
    axes: dict = dataclasses.field(default_factory=dict)
    # More names than servername the client reaches without DNS: name -> address (a multi-origin page's origins,
    # pqbench.webpages; the browsers read it)
    hosts: dict = dataclasses.field(default_factory=dict)

    def tls_client_options(self, groups: list[str], count: int, worker: int, claims: Path | None) -> list[str]:
        """The options every TLS timing client takes as pqtimer defines them (pqtimer, tlsgo, pqrustls,
        pqs2n): groups as that client names them. A resumption primes its ticket with a request for the page
        (an error page there left servers' single ticket unusable)."""
        argv = ["--host", self.host, "--port", str(self.port), "--mode", self.mode, "--groups", ":".join(groups),
                *(["--cafile", self.cafile] if self.cafile else []), "--servername", self.servername, "--count", str(count),
                "--warmup", str(self.warmup), "--timeout-ms", str(self.timeout_ms), "--worker", str(worker)]
        argv += ["--claim", str(claims)] if claims else []
        argv += ["--path", self.path] if self.mode in ("page", "requests", "resume", "resume_page", "early") else []
        argv += ["--requests", str(self.requests)] if self.mode == "requests" else []
        argv += ["--pause-ms", str(self.pause_ms)] if self.pause_ms else []
        argv += ["--cert-compression", self.cert_compression] if self.cert_compression != "none" else []
        argv += ["--transport", self.transport] if self.transport != DEFAULT_TRANSPORT else []
        argv += ["--initial-size", str(self.initial_size)] if self.initial_size else []
        argv += ["--cert", self.cert, "--key", self.key] if self.cert else []
        argv += axis.client_options(self.axes)
        return argv + (["--pad", str(self.pad)] if self.pad else [])

    def handshakes_over_udp(self, client: str, protocol: str, offers: bool = False) -> None:
        """Raises MissingCapability when the job asks more of a client that times handshakes of one protocol over
        UDP alone (dtlsgo, strongswan): another transport or mode, padding, an offer (unless it takes offers) or
        compression."""
        from pqbench import protocol as proto
        from pqbench.errors import MissingCapability
        p = proto.get(protocol)
        if self.transport not in p.transports:
            raise MissingCapability(f"the {client} client speaks only {p.label} over UDP, not {self.transport}",
                                    f"measure it with protocol = {protocol}")
        if self.mode != "handshake":
            raise MissingCapability(f"the {client} client has no {self.mode} mode", "use handshake")
        if self.pad:
            raise MissingCapability(f"--pad: the {client} client cannot pad what it sends",
                                    "measure padding with the openssl client over TCP")
        self.plain_offer(client, offers)

    def plain_offer(self, client: str, offers: bool = False) -> None:
        """Raises MissingCapability when the job asks what only pqtimer's offer and compression options
        express (a client stack that has neither calls it before building its command line; offers: it chooses its
        key shares, so only compression is refused)."""
        from pqbench.errors import MissingCapability
        if self.offer is not None and not offers:
            from pqbench.endpoints.offer import parse_offer
            if not parse_offer(self.offer).single:
                raise MissingCapability(f"--offer: the {client} client cannot choose its key shares and groups",
                                        "measure offers with the openssl client (pqtimer)")
        if self.cert_compression != "none":
            raise MissingCapability(f"--cert-compression: the {client} client does not offer certificate "
                                    "compression here", "measure compression with the openssl client (pqtimer)")


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What a stack can measure, asked of its real build."""
    stack: str
    protocol: str  # tls | ssh
    transports: tuple[str, ...]
    modes: tuple[str, ...]
    versions: dict  # component -> version, for provenance
    # (kex, sig, role) -> why this build cannot, or None; role is "server" or "client", since a library
    # can lack in one role what it has in the other (Go's client cannot verify an all-ML-DSA chain).
    unsupported: Callable[[str, str, str], str | None]
    # What it can do beyond a one-share handshake, by name: "offer" (the client chooses its groups and key
    # shares; the server takes a per-site preference order), "cert_compression" (the client offers RFC 8879
    # algorithms; the server compresses its chain per site), "retry" (a QUIC server validates addresses with
    # Retry per site), "initial_size" (a QUIC client sets its Initial datagrams' size). feature_notes: why a feature is missing, when
    # there is more to say than that it is (s2n's client always sends its policy's two shares).
    features: tuple[str, ...] = ()
    feature_notes: dict = dataclasses.field(default_factory=dict)
    # The modes over a transport where they differ from `modes` (QUIC clients time fewer modes than TCP's).
    transport_modes: dict = dataclasses.field(default_factory=dict)
    # With the "initial_size" feature: the QUIC Initial sizes (UDP payload bytes) the client can send, lo..hi.
    initial_sizes: tuple[int, int] | None = None
    # A stack that retransmits over datagrams by its own timer (DTLS, IKEv2): its first timeout, ms, as built here
    # (the report counts a lost datagram's cost in it)
    first_timer_ms: float | None = None


class Server(Protocol):
    # False for a server that starts a process per connection: the rig's unrecorded warm-up handshakes
    # (measure.rig.Rig._warm) would leave nothing warm. Read with getattr: absent means True.
    warm_up: bool = True

    def start(self, place: Place, serving: Serving) -> None:
        """Starts in the server namespace (place)."""

    def ready(self, client_place: Place) -> None:
        """Returns once every site answers a protocol-appropriate probe from the client side (a real
        handshake, not only a TCP connect); raises MeasurementFailed with the server's log if not."""

    def stop(self) -> None: ...


class Client(Protocol):
    name: str
    milestones: dict  # mode -> pqbench.sample.Milestone: where its metric ends on the wire
    # How its timing process is scheduled (pqbench.measure.wire.PRIORITIES), so which emulator floor judges its
    # clock against the wire's: "measured" (the default, where absent), or "normal" for a browser
    priority: str

    def argv(self, job: ClientJob, count: int, worker: int, claims: Path) -> list[str]:
        """A worker process that takes sample indices from the shared counter in `claims` (8 bytes,
        native order, incremented atomically) and prints one JSON sample per line."""

    def env(self) -> dict: ...


class LoadGenerator(Protocol):
    """Open-loop load: handshakes started at Poisson arrivals, many in flight, from one process."""
    name: str

    def argv(self, job: ClientJob, rate: float, duration_ms: int, *, max_inflight: int, seed: int) -> list[str]:
        """A process that offers `rate` full handshakes per second for duration_ms and prints one JSON
        object (the fields pqbench.measure.loadgen names)."""

    def env(self) -> dict: ...


@dataclasses.dataclass(frozen=True)
class Stack:
    name: str
    protocol: str
    server: Callable[[], Server]
    client: Callable[[], Client]
    capabilities: Callable[[], Capabilities]
    load: Callable[[], LoadGenerator] | None = None  # the stack's load generator, if it has one


def tcp_probe(place: Place, addr: str, port: int) -> bool:
    """True when addr:port accepts a TCP connection from place."""
    s = place.socket()
    s.settimeout(0.5)
    try:
        s.connect((addr, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


PROBE_TIMEOUT_S = 15.0


def probe(place: Place, argv: list[str], env: dict | None = None) -> str | None:
    """Runs a client for one sample (argv), from place: None when it succeeded, else why not. What a
    server's ready() uses to check that it completes a real handshake."""
    proc = place.popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return f"no answer within {PROBE_TIMEOUT_S:g} s"
    for line in out.decode(errors="replace").splitlines():
        try:
            sample = json.loads(line)
        except ValueError:
            continue
        return None if sample.get("ok") else f"{sample.get('error_class')}: {sample.get('error')}"
    return f"{Path(argv[0]).name} printed no sample (exit {proc.returncode}): {err.decode(errors='replace').strip()[-300:]}"


def stop_group(proc: subprocess.Popen | None) -> None:
    """Stops a server started in a process group of its own (its workers follow) and waits for it."""
    if not proc or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass
