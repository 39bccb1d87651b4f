"""The rig: testbed + server + client + certificates for one lane, used by `pqbench handshake` (one
cell) and `pqbench run` (many cells, one rig per lane) alike.

    with Rig(endpoints.get("openssl"), serving, link, tcp) as rig:
        rig.begin_cell(link, tcp)
        samples = rig.sample(job, 100, 4, scratch)
        wire = rig.end_cell(samples, job.mode, scratch)
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from pqbench import wire
from pqbench.endpoints import sampler
from pqbench.endpoints.base import ClientJob, Place, Serving, Stack
from pqbench.testbed import EmulatorOptions, LinkSpec, TcpKnobs, Testbed


class Rig:
    def __init__(self, stack: Stack, serving: Serving, link: LinkSpec, tcp: TcpKnobs | None = None, *,
                 backend: str = "auto", emulator: EmulatorOptions | None = None, index: int = 0):
        self.stack, self.serving, self.index = stack, serving, index
        self.link, self.tcp = link, tcp or TcpKnobs()
        self._backend, self._emulator = backend, emulator
        self._opened = contextlib.ExitStack()
        self.tb: Testbed | None = None
        self.client = None
        self._offset_ns = 0

    def __enter__(self) -> "Rig":
        try:
            self.tb = self._opened.enter_context(Testbed(self.link, tcp=self.tcp, backend=self._backend,
                                                         emulator=self._emulator))
            server = self.stack.server()
            self._opened.callback(server.stop)
            server.start(self.place("server"), self.serving)
            server.ready(self.place("client"))
            self.client = self.stack.client()
        except BaseException:
            self._opened.close()
            raise
        return self

    def __exit__(self, *exc) -> bool:
        self._opened.close()
        return False

    def place(self, side: str) -> Place:
        tb = self.tb

        def popen(argv, **kw):
            proc = tb.popen(side, argv, **kw)
            tb.note_process(proc.pid)  # so `pqbench net clean` can stop it after a crash
            return proc
        return Place(addr=tb.addr(side), popen=popen, socket=lambda: tb.socket(side))

    def job(self, port: int, kex: str, chain, **kw) -> ClientJob:
        return ClientJob(host=self.tb.server_addr, port=port, groups=[kex], cafile=str(chain.root_cert),
                         servername=chain.server_name, **kw)

    def begin_cell(self, link: LinkSpec, tcp: TcpKnobs | None = None) -> None:
        """Sets the link (and TCP knobs when they differ) and zeroes counters and the wire record;
        the loss pattern restarts from the link's seed (paired comparisons)."""
        self.tb.reconfigure(link)
        self.link = link
        if tcp is not None and tcp != self.tcp:
            self.tb.set_tcp(tcp)
            self.tcp = tcp
        self.tb.reset_counters()
        self._offset_ns = wire.clock_offset_ns()

    def sample(self, job: ClientJob, n: int, parallel, scratch: Path, *, tail=None, stop=None) -> list[dict]:
        return sampler.run(self.client, job, n, parallel, self.place("client"), scratch, tail=tail, stop=stop)

    def end_cell(self, samples: list[dict], mode: str, scratch: Path) -> dict:
        """Joins the emulator's per-connection record to the samples (sample["wire"]) and returns the
        link's counters; {"wire": None} in them when the backend keeps no record (netem)."""
        counters = self.tb.counters()
        flows = getattr(self.tb.backend, "flows", None)
        joined = None
        if flows is not None:
            records = flows(Path(scratch) / "flows.jsonl")
            joined = wire.join(samples, records, self._offset_ns, self.client.milestones[mode])
        for s in samples:
            s.setdefault("stack", self.stack.name)
            s.setdefault("protocol", self.stack.protocol)
        return {**counters, "wire_joined": joined}
