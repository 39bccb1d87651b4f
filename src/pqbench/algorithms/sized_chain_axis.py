"""The sized_as axis (pqbench.axis): a classical chain padded to the bytes of a post-quantum one, size-only.

Browsers verify classical signatures only (docs/browsers.md), so a post-quantum chain reaches them as its size:
the cell's own root → leaf chain (its sig, e.g. ecdsap256, root and leaf alike, which every client verifies),
its leaf padded with pqbench's filler extension (pqbench.algorithms.chains.make_sized_as) until the server sends
exactly what a root → leaf chain of the named algorithm sends (its leaf: the algorithm's key and its root's
signature in a real certificate of this build, so framing and encodings are the real ones).

    [axes]
    sig = ["ecdsap256"]
    sized_as = ["plain", "mldsa44", "mldsa65"]    # plain: the cell's chain as it is

Labelled "size-only" wherever it appears; a port of its own per value (the server serves each chain on its own
port); its bytes by part are the cell's chain_parts, with the algorithm it stands for.
"""

from __future__ import annotations

from pqbench import axis
from pqbench import protocol as proto
from pqbench.algorithms import catalog

PLAIN = "plain"


def parse(field: str, value) -> str | None:
    return catalog.certificate_signer(field, value, PLAIN)


def _unpadded(values) -> bool:
    return values.get("chain") is None and values.get("chain_bytes") is None



def _fits(value, caps, role: str, values) -> str | None:
    """The padded chain must be larger than the cell's own: a chain cannot be padded down."""
    sig = values.get("sig")
    if role != "server" or not sig or catalog.is_size_only(sig):
        return None
    own, like = catalog.find(sig, "sig"), catalog.find(value, "sig")
    if own.pk + (own.sig or 0) >= like.pk + (like.sig or 0):
        return f"a {own.name} chain is not smaller than a {like.name} one: nothing to pad"
    return None


def label(value: str | None) -> str | None:
    return f"chain sized as {value} (size-only)" if value else None


axis.register(
    axis.Axis("sized_as", parse, f"signature names ({PLAIN}: the cell's chain as it is)", protocols=proto.sends_chains,
              help="a size-only stand-in: the cell's classical chain padded to the bytes a chain of this signature "
                   "sends (e.g. mldsa44; plain: as it is)",
              applies=_unpadded, needs_text='applies to cells whose chain is plain and unpadded',
              check=_fits, site=True, order=45, label=lambda v, row, short: label(v)),
)
