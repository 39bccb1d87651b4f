"""Paired differences: algorithms measured under the same link condition and loss seed.

Cells that are equal in everything but the key exchange (or the signature, the server stack, the
client stack, the transport) form a group; each member is compared with the group's baseline (a
classical algorithm when there is one; the openssl stack; TCP) by the difference of medians and its
bootstrap CI. Over the transport, QUIC is paired as it comes by default (no Retry, the client's own
Initial size): those axes are QUIC's alone.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pqbench import stats
from pqbench import transport as transportmod
from pqbench.algorithms import catalog
from pqbench.endpoints import DEFAULT_STACK
from pqbench.analysis.cells import ALG_FIELDS, CONDITION_FIELDS, CellStats
from pqbench.errors import BadInput

CLASSICAL_FAMILIES = {"elliptic curve", "finite field", "RSA"}


@dataclasses.dataclass
class PairedDiff:
    axis: str  # "kex", "sig", "server" or "client": what differs
    baseline: CellStats
    other: CellStats
    diff: tuple  # (median(other) - median(baseline), lo, hi) in ms
    relative: float  # diff / median(baseline)
    # the clock both cells were compared on: "wire" when either cell is reported on the wire's (CellStats.clock),
    # with the two medians on it
    clock: str = "client"
    medians: tuple | None = None  # (baseline, other) in ms on that clock; None: their p50s

    @property
    def significant(self) -> bool:
        """The CI excludes zero."""
        return self.diff[1] > 0 or self.diff[2] < 0


def is_classical(name: str, kind: str) -> bool:
    try:
        alg = catalog.find(name, kind)
    except BadInput:
        return False
    return alg.family in CLASSICAL_FAMILIES and not alg.hybrid


def baseline_name(names: list[str], kind: str | None) -> str:
    """The classical algorithm among names (first by name), else the first name; for stacks
    (kind None) the default stack when it is among them."""
    names = sorted(names)
    if kind is None:
        return DEFAULT_STACK if DEFAULT_STACK in names else names[0]
    classical = [n for n in names if is_classical(n, kind)]
    return (classical or names)[0]


# What varies with an axis besides the axis itself, and is left out of the pairing key with it.
WITH_AXIS = {"transport": ("quic_retry", "initial_size")}


def value(c: CellStats, axis: str):
    """The cell's value on the axis (a cell from before the transport axis ran over TCP)."""
    return c.row.get(axis) or transportmod.DEFAULT if axis == "transport" else c.row[axis]


def _key(c: CellStats, axis: str) -> tuple:
    seed = c.row.get("link", {}).get("seed") if isinstance(c.row.get("link"), dict) else None
    skip = (axis, *WITH_AXIS.get(axis, ()))
    return tuple(c.row.get(f) for f in ALG_FIELDS + CONDITION_FIELDS if f not in skip) + (seed,)


def _default_quic(c: CellStats) -> bool:
    return not c.row.get("quic_retry") and c.row.get("initial_size") is None


def on_one_clock(base: CellStats, other: CellStats) -> tuple | None:
    """(clock, base's times, other's times) on one clock: a comparison never mixes a client's clock with the wire's,
    so a cell reported on the wire's makes both compared on it; None when one of them has no wire times."""
    if base.clock == other.clock:
        return base.clock, base.durations, other.durations
    if base.wire_durations.size and other.wire_durations.size:
        return "wire", base.wire_durations, other.wire_durations
    return None


def paired_differences(cells: list[CellStats], *, resamples: int = 1000, seed: int = 0) -> list[PairedDiff]:
    out = []
    for axis, kind in (("kex", "kem"), ("sig", "sig"), ("server", None), ("client", None), ("transport", None)):
        groups: dict[tuple, list[CellStats]] = {}
        for c in cells:
            if c.durations.size and (axis != "transport" or _default_quic(c)):
                groups.setdefault(_key(c, axis), []).append(c)
        for members in groups.values():
            by_name = {value(c, axis): c for c in members}
            if len(by_name) < 2:
                continue
            base = by_name[transportmod.DEFAULT if axis == "transport" and transportmod.DEFAULT in by_name
                           else baseline_name(list(by_name), kind)]
            for name in sorted(by_name):
                other = by_name[name]
                if other is base:
                    continue
                pair = on_one_clock(base, other)
                if pair is None:
                    continue
                clock, a, b = pair
                diff = stats.bootstrap_diff(a, b, 50, resamples=resamples, seed=seed)
                medians = (float(np.median(a)), float(np.median(b)))
                out.append(PairedDiff(axis, base, other, diff, diff[0] / medians[0] if medians[0] else float("nan"),
                                      clock, medians if clock != "client" else None))
    return out
