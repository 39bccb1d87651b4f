"""A spec expanded into cells (grid points), each with a stable id, in a randomised order.

Cells whose algorithms this build cannot use in TLS are kept as skipped with the reason, never
silently dropped. The link seed depends only on the link condition, not on the algorithms, so every
algorithm at the same condition sees the same loss pattern (paired comparisons).
"""

import dataclasses
import hashlib
import itertools
import json
import random

from pqbench import catalog
from pqbench.experiment.spec import Scenario, Spec
from pqbench.testbed import LinkSpec, Loss, TcpKnobs


@dataclasses.dataclass(frozen=True)
class Cell:
    kex: str
    sig: str
    scenario: Scenario
    mtu: int
    initcwnd: int | None
    mode: str
    page: str | None
    requests: int | None
    pad: int

    def params(self) -> dict:
        """The cell's parameters as the store's cells columns."""
        s = self.scenario
        loss_model = "bernoulli" if not s.gemodel else "gemodel " + ",".join(f"{v:g}" for v in s.gemodel)
        return {"kex": self.kex, "sig": self.sig, "scenario": s.name, "rtt_ms": s.rtt_ms,
                "loss": self.link_spec(0).client_to_server.loss.mean, "loss_model": loss_model,
                "rate_mbit": s.rate_mbit, "mtu": self.mtu, "initcwnd": self.initcwnd, "mode": self.mode,
                "page": self.page, "requests": self.requests, "pad": self.pad}

    @property
    def cell_id(self) -> str:
        blob = json.dumps(self.params(), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def link_key(self) -> str:
        """What determines the link: equal keys share a loss pattern (same seed)."""
        return json.dumps([dataclasses.asdict(self.scenario), self.mtu], sort_keys=True)

    def link_spec(self, run_seed: int) -> LinkSpec:
        s = self.scenario
        loss = Loss.gemodel(*s.gemodel) if s.gemodel else s.loss
        seed = int.from_bytes(hashlib.sha256(f"{run_seed}:{self.link_key()}".encode()).digest()[:4], "big")
        extra = {"queue_packets": s.queue} if s.queue else {}
        return LinkSpec.symmetric(s.rtt_ms, jitter_ms=s.jitter_ms, loss=loss, rate_mbit=s.rate_mbit,
                                  mtu=self.mtu, seed=seed, **extra)

    def tcp(self) -> TcpKnobs:
        return TcpKnobs(initcwnd=self.initcwnd) if self.initcwnd else TcpKnobs()

    def label(self) -> str:
        s = self.scenario
        link = s.name or f"rtt {s.rtt_ms:g}ms loss {self.params()['loss'] * 100:g}%" + \
            (f" rate {s.rate_mbit:g}mbit" if s.rate_mbit else "")
        extra = "".join([f" mtu {self.mtu}" if self.mtu != 1500 else "",
                         f" initcwnd {self.initcwnd}" if self.initcwnd else "",
                         f" page {self.page}" if self.page and self.mode == "page" else "",
                         f" requests {self.requests}" if self.mode == "requests" else "",
                         f" pad {self.pad}" if self.pad else "", " resume" if self.mode == "resume" else ""])
        return f"{self.kex} + {self.sig}, {link}{extra}"


def _mode(spec: Spec, page, requests) -> tuple[str, str | None, int | None]:
    if spec.resume:
        return "resume", None, None
    if requests is not None:
        return "requests", page or "1k", requests
    if page is not None:
        return "page", page, None
    return "handshake", None, None


def expand(spec: Spec) -> list[Cell]:
    cells = []
    for kex, sig, scen, mtu, cwnd, page, req, pad in itertools.product(
            spec.kex, spec.sig, spec.scenarios, spec.mtu, spec.initcwnd, spec.page, spec.requests, spec.pad):
        mode, page_, req_ = _mode(spec, page, req)
        cells.append(Cell(kex, sig, scen, mtu, cwnd, mode, page_, req_, pad))
    unique = {c.cell_id: c for c in cells}
    return list(unique.values())


def order(cells: list[Cell], seed: int) -> list[Cell]:
    """Randomised, interleaved order from the seed: slow drift hits every algorithm alike."""
    shuffled = sorted(cells, key=lambda c: c.cell_id)
    random.Random(seed).shuffle(shuffled)
    return shuffled


def unavailable_reason(cell: Cell) -> str | None:
    """Why this build cannot run the cell, or None."""
    for name, kind in ((cell.kex, "kem"), (cell.sig, "sig")):
        alg = catalog.find(name, kind)
        avail = catalog.availability(alg)
        if not avail.tls:
            return f"{alg.name} is not usable in TLS 1.3 here: {avail.reason or 'no TLS code point'}"
    return None
