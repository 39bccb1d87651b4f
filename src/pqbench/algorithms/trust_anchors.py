"""The trust_anchors axis (pqbench.axis): trust anchor negotiation, draft-ietf-tls-trust-anchor-ids-06.

A cell with the axis set is served by a port that holds two chains (pqbench.algorithms.chains.ANCHOR_IDS): the
cell's chain, sent only to a client whose trust_anchors extension names its root's ID (the server then marks its
Certificate message so), and a classical fallback chain (chains.FALLBACK_SIG, from a root of its own) for every
other client; the server lists the IDs of its chains in EncryptedExtensions. The value is what the client does:

- match: it names the cell's root, which it has: the server sends the cell's chain.
- fallback: it names a root the server has no chain for, and has the fallback's root too: the fallback chain
  completes the handshake.
- retry: it names a root the server has no chain for and has only the cell's root: the fallback chain fails to
  verify, and it recovers as the draft's §5.6 says, with a new connection naming the ID the server listed. One
  sample holds both connections; the failed one is in its "first_attempt".
- unsent: it sends no trust_anchors (a client from before the draft), and has the fallback's root.
"""

from __future__ import annotations

import dataclasses

from pqbench import axis
from pqbench import protocol as proto
from pqbench import transport as transportmod
from pqbench.errors import BadInput

OFF = "off"  # the axis's default (None in a cell): one chain per port, no extension
VALUES = ("match", "fallback", "retry", "unsent")
FEATURES = {"server": "trust_anchors_server", "client": "trust_anchors_client"}


def _parse(field: str, value) -> str | None:
    if value == OFF:
        return None
    if value not in VALUES:
        raise BadInput(field, f"{value!r} is not a trust anchor case (allowed: {OFF}, {', '.join(VALUES)})")
    return value


@dataclasses.dataclass(frozen=True)
class ClientPlan:
    """What a client of the case sends and has."""
    requested: list[str] | None  # the IDs its ClientHello names (None: no extension)
    trusted: list[str]  # the IDs of the anchors it has, from which a recovery chooses
    cafile: str  # its trust file


def client_plan(value: str, anchors: dict, cafile: str) -> ClientPlan:
    """The case's client, given the chain's trust_anchors (chains.ANCHOR_IDS and files) and its root (cafile)."""
    own, unknown, fallback = anchors["id"], anchors["unknown"], anchors["fallback"]
    return {"match": ClientPlan([own], [own], cafile),
            "fallback": ClientPlan([unknown], [own, fallback["id"]], str(anchors["trust_both"])),
            "retry": ClientPlan([unknown], [own], cafile),
            "unsent": ClientPlan(None, [], str(fallback["root"]))}[value]


def _over_tcp(value, caps, role: str, values) -> str | None:
    if FEATURES[role] not in caps.features:
        return axis.missing(FEATURES[role], caps)
    if not transportmod.get(values.get("transport")).kernel_tcp:
        return "trust anchor negotiation is measured over TCP"
    return None


axis.register(
    axis.Axis("trust_anchors", _parse, f"trust anchor cases ({OFF}, {', '.join(VALUES)})", protocols=proto.sends_chains,
              check=_over_tcp, site=True, order=49, to_job=lambda v: {"trust_anchors": v} if v else {},
              help="trust anchor negotiation: the server holds the cell's chain and a classical fallback; the client "
                   "names the cell's root (match), an unknown root with the fallback's root at hand (fallback) or "
                   "without it, recovering with a second connection (retry), or sends nothing (unsent)",
              label=lambda v, row, short: f"trust anchors: {v}" if v else None),
)
