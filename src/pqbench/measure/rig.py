"""The rig: testbed + servers + clients + certificates for one lane, used by `pqbench handshake` (one
cell) and `pqbench run` (many cells, one rig per lane) alike.

A rig runs one server per server stack (each on its own ports, all inside the server namespace) and
can sample with any of its client stacks, so every server × client pair of a run meets the same link
and the same loss pattern (paired comparisons).

    with Rig(endpoints.get("openssl"), serving, link, tcp) as rig:          # one stack, both roles
    with Rig.pairs({"openssl": serving, "rustls": serving2}, ["openssl", "gotls"], link, tcp) as rig:
        rig.begin_cell(link, tcp)
        samples = rig.sample(job, 100, 4, scratch, client="gotls")
        wire = rig.end_cell(samples, job.mode, scratch, client="gotls")

The path between the sides (pqbench.testbed.path.Path) is a new Testbed (the emulated link) unless the
rig is given another: a RealPath, the host's own network, where the servers are targets (servers pqbench
did not start) and the path is measured before and after each cell instead of emulated (path_rtt).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from pqbench import axis, endpoints
from pqbench import protocol as proto
from pqbench.algorithms import catalog
from pqbench.measure import wire
from pqbench.measure import sampler
from pqbench.endpoints.base import ClientJob, Place, Serving, Stack
from pqbench.testbed import EmulatorOptions, LinkSpec, TcpKnobs, Testbed, registry
from pqbench.testbed.path import Path as NetPath
from pqbench.testbed.realpath import connect_rtt


def credentials(protocol: str, sig: str, directory: Path, chain: tuple = ()):
    """What a server proves itself with, made in directory: a certificate chain (TLS; chain: the shape and the
    padded size of pqbench.algorithms.chains, empty for root → leaf) or a host key set (SSH;
    pqbench.endpoints.sshkeys)."""
    from pqbench.algorithms import certs, chains
    from pqbench.endpoints import sshkeys
    if not proto.get(protocol).chains:
        return sshkeys.make_keys(sig, directory)
    return chains.make(sig, directory, *chain) if chain else certs.make_chain(sig, directory)


def place_on(path: NetPath, side: str, started: list[int] | None = None) -> Place:
    """One side of a path as an endpoint sees it. started: a list that collects the pids of the processes
    started through this place."""
    def popen(argv, **kw):
        proc = path.popen(side, argv, **kw)
        path.note_process(proc.pid)  # so `pqbench net clean` can stop it after a crash
        if started is not None:
            started.append(proc.pid)
        return proc
    return Place(addr=path.addr(side), popen=popen, socket=lambda: path.socket(side))


WARM_PER_WORKER = 8  # warm-up handshakes per server worker: 32 workers all reached but with p ≈ 1 %
WARM_MAX = 512
WARM_PARALLEL = 1  # one client: timing clients poll at real-time priority, and as many of them as CPUs
# starve a server that forks per connection (sshd's sessions waited on RT throttling, 10 s connect timeouts)


class Rig:
    def __init__(self, stack: Stack, serving: Serving, link: LinkSpec, tcp: TcpKnobs | None = None, *,
                 backend: str = "auto", emulator: EmulatorOptions | None = None, index: int = 0):
        """One stack as server and client (the common case); Rig.pairs for several."""
        self._init({stack.name: serving}, [stack.name], link, tcp, backend, emulator, index, None)

    @classmethod
    def pairs(cls, servers: dict[str, Serving], clients: list[str], link: LinkSpec, tcp: TcpKnobs | None = None, *,
              backend: str = "auto", emulator: EmulatorOptions | None = None, index: int = 0,
              path: NetPath | None = None) -> "Rig":
        """A server per stack named in `servers` (each serving on its own ports) and the named client stacks.
        path: what joins them when not a new testbed (a RealPath)."""
        rig = cls.__new__(cls)
        rig._init(dict(servers), list(clients), link, tcp, backend, emulator, index, path)
        return rig

    def _init(self, servers, clients, link, tcp, backend, emulator, index, path) -> None:
        self.servings = servers
        self.client_names = clients
        self.index, self.link, self.tcp = index, link, tcp or TcpKnobs()
        self._backend, self._emulator, self._path = backend, emulator, path
        self._opened = contextlib.ExitStack()
        self.tb: NetPath | None = None  # the path: a Testbed or the one given
        self.clients: dict = {}
        self.server_pids: dict[str, list[int]] = {}  # what each server started (load's CPU accounting)
        self._servers: dict[str, tuple] = {}  # name -> (server, its processes as started: pid and start time)
        self._offset_ns = 0
        self.hosts: dict[int, dict[str, str]] = {}  # port -> a multi-origin page's further origins (name -> address)

    def __enter__(self) -> "Rig":
        try:
            self.tb = self._opened.enter_context(self._path or Testbed(self.link, tcp=self.tcp, backend=self._backend,
                                                                       emulator=self._emulator))
            self.clients = {name: endpoints.get(name, "client").client() for name in self.client_names}
            for name, serving in self.servings.items():
                self._start_server(name, serving)
        except BaseException:
            self._opened.close()
            raise
        return self

    def _start_server(self, name: str, serving: Serving) -> None:
        server = endpoints.get(name, "server").server()
        self._opened.callback(server.stop)
        if any((s.options or {}).get("webpage") for s in serving.sites):  # their origins' addresses and leaves
            from pqbench.webpages import serve
            self.hosts.update(serve.prepare(self.tb, serving))
        self.server_pids[name] = []
        server.start(self.place("server", started=self.server_pids[name]), serving)
        # the processes that run as it serves (one already ended was a helper of its start, not the server)
        refs = [registry.proc_ref(pid) for pid in self.server_pids[name]]
        self._servers[name] = (server, [r for r in refs if r["start"] is not None])
        server.ready(self.place("client"))
        if getattr(server, "warm_up", True):
            self._warm(name, serving)

    def server_died(self, name: str | None = None) -> str | None:
        """How a server of this rig (default: its first) died since it started, or None while it runs. The
        processes a server starts through its place serve until it stops (nginx's master, sshd or a Go
        server per port): one of them ended means the server is gone, or part of it."""
        name = name or next(iter(self.servings))
        _, refs = self._servers.get(name, (None, []))
        gone = [r["pid"] for r in refs if not registry.is_alive(r)]
        return f"its process {', '.join(map(str, gone))} ended" if gone else None

    def revive(self) -> dict[str, str]:
        """Starts again each server that died (stopped first, so nothing of it is left): a crashed server
        costs the cell it crashed in, not every cell after it on this lane. Returns {name: how it had died}."""
        revived = {}
        for name, serving in self.servings.items():
            how = self.server_died(name)
            if how:
                self._servers[name][0].stop()
                self._start_server(name, serving)
                revived[name] = how
        return revived

    def _warm(self, name: str, serving: Serving) -> None:
        """Handshakes, not recorded, that every worker process of the server answers before anything is
        measured. Each nginx worker paid about 3 ms once, in its first handshake of any algorithm (32 of
        300 server answers stalled with the default 32 workers, one per worker, none after 200 warm-up
        handshakes: bench/bench_server_stalls.py); its connections are spread over the workers by a
        hash (reuseport), so WARM_PER_WORKER per worker reach each one almost surely. At 0 ms, no loss."""
        protocol = endpoints.get(name).protocol
        # each transport's server processes warm separately (the openssl stack serves QUIC from a second nginx)
        for transport in dict.fromkeys(site.transport for site in serving.sites):
            pick = next(((client, kex, site) for client in self.client_names for site in serving.sites
                         for kex in serving.groups if endpoints.get(client).protocol == protocol
                         and site.transport == transport
                         and not endpoints.unsupported(name, client, kex, site.chain.sig, "handshake",
                                                       {**site.options, "transport": transport})), None)
            if pick is None:
                continue
            client, kex, site = pick
            self.tb.reconfigure(LinkSpec())
            scratch = Path(serving.run_dir) / "warm-up"
            scratch.mkdir(parents=True, exist_ok=True)
            # as the site's cells connect (a trust anchor site's default chain is a fallback their root does not sign)
            job = self.job(site.port, kex, site.chain, **{**axis.job_fields(site.options), "mode": "handshake",
                                                          "path": "/1k", "transport": transport})
            sampler.run(self.clients[client], job, min(WARM_MAX, WARM_PER_WORKER * serving.workers), WARM_PARALLEL,
                        self.place("client"), scratch)
        self.tb.reconfigure(self.link)

    def __exit__(self, *exc) -> bool:
        self._opened.close()
        return False

    @property
    def client(self):
        """The first (in the one-stack form, the only) client."""
        return self.clients[self.client_names[0]]

    def place(self, side: str, started: list[int] | None = None) -> Place:
        """started: a list that collects the pids of the processes started through this place."""
        return place_on(self.tb, side, started)

    def job(self, port: int, kex: str, chain, host: str | None = None, **kw) -> ClientJob:
        """host: a target's address (default: the testbed's server side)."""
        if host is None and port in self.hosts:
            kw.setdefault("hosts", self.hosts[port])
        if getattr(chain, "client_cert", None):  # mutual TLS
            kw.update(cert=str(chain.client_cert), key=str(chain.client_key))
        if getattr(chain, "trust_anchors", None):  # trust anchor negotiation: the IDs and files the case chooses from
            kw.update(anchors=chain.trust_anchors)
        return ClientJob(host=host or self.tb.server_addr, port=port, groups=[kex],
                         cafile=str(chain.root_cert) if chain.root_cert else None, servername=chain.server_name,
                         target=host is not None, **kw)

    def path_rtt(self, job: ClientJob) -> dict | None:
        """TCP-connect times to the job's server over a measured path (a target's), None over an emulated
        link, whose round trip is what was configured."""
        if self.tb.emulated:
            return None
        return connect_rtt(lambda: self.tb.socket("client"), job.host, job.port).to_dict()

    def begin_cell(self, link: LinkSpec, tcp: TcpKnobs | None = None) -> dict[str, str]:
        """Starts again the servers that died (revive: {name: how it had died}), sets the link (and TCP knobs
        when they differ) and zeroes counters and the wire record; the loss pattern restarts from the link's
        seed (paired comparisons)."""
        revived = self.revive()
        self.tb.reconfigure(link)
        self.link = link
        if tcp is not None and tcp != self.tcp:
            self.tb.set_tcp(tcp)
            self.tcp = tcp
        self.tb.reset_counters()
        self._offset_ns = wire.clock_offset_ns()
        return revived

    def sample(self, job: ClientJob, n: int, parallel, scratch: Path, *, tail=None, stop=None,
               client: str | None = None) -> list[dict]:
        name = client or self.client_names[0]
        samples = sampler.run(self.clients[name], job, n, parallel, self.place("client"), scratch, tail=tail, stop=stop)
        protocol = endpoints.get(name).protocol
        return [catalog.respelled(s, protocol) for s in samples]

    def end_cell(self, samples: list[dict], mode: str, scratch: Path, *, client: str | None = None,
                 server: str | None = None) -> dict:
        """Joins the emulator's per-connection record to the samples (sample["wire"]) and returns the
        link's counters; {"wire": None} in them when the backend keeps no record (netem)."""
        client = client or self.client_names[0]
        server = server or next(iter(self.servings))
        counters = self.tb.counters()
        flows = getattr(self.tb.backend, "flows", None)
        joined = None
        if flows is not None:
            records = flows(Path(scratch) / "flows.jsonl")
            rtt_ns = round((self.link.client_to_server.delay_ms + self.link.server_to_client.delay_ms) * 1e6)
            joined = wire.join(samples, records, self._offset_ns, self.clients[client].milestones[mode], rtt_ns)
            from pqbench.endpoints.browsers.timing import connection_wire
            from pqbench.measure import page_wire
            # a page's load (a browser's, pqtimer's): every connection joined to its own flow (timing.flow_of skips
            # a record without a packet at the client, as wire.join does)
            for s in samples:
                if (s.get("browser") or {}).get("requests_detail"):
                    s["browser"]["connections_wire"] = connection_wire(s, records)
                    # … and the client's time minus the wire's per milestone, per connection (ms)
                    s["browser"]["connections_minus_wire"] = page_wire.connections(s, records)
        if any(s.get("browser") for s in samples):
            from pqbench.endpoints.browsers import warm  # a warm load resumed, by the server's own log
            warm.check(samples, sorted(self.servings[server].run_dir.glob("*access.log")), self.tb.client_addr)
        protocol = endpoints.get(client).protocol
        for s in samples:
            s.setdefault("stack", client)
            s.setdefault("server", server)
            s.setdefault("protocol", protocol)
        return {**counters, "wire_joined": joined}
