"""IKEv2 (RFC 7296): the key exchange of IPsec, over UDP with its own retransmission timers. Post-quantum comes
as additional key exchanges (RFC 9370): IKE_SA_INIT cannot be fragmented, so it keeps its classical key
exchange, and each ML-KEM runs in an IKE_INTERMEDIATE exchange of its own (RFC 9242) before IKE_AUTH, a round
trip each; IKE_INTERMEDIATE and IKE_AUTH may be fragmented (RFC 7383), a fragment lost costing the whole message
its sender's timer.

A cell's key exchange is named as TLS names its groups (the catalog's names): X25519 is IKE_SA_INIT's x25519
alone, X25519MLKEM768 is x25519 then ML-KEM-768 as the first additional key exchange (strongSwan's
`x25519-ke1_mlkem768`), MLKEM768 is ML-KEM-768 in IKE_SA_INIT itself. The server proves itself with a
certificate chain of the catalog (its AUTH payload signed with the leaf's key).

Its record (pqbench.protocol), its timeline (pqbench.sample) and its axes of its own, `fragment_size`,
`additional_ke` and `retransmit_timeout` (pqbench.axis), are here; its stack is under pqbench.endpoints
(strongswan). An IKE cell runs over UDP (pqbench.transport).
"""

from __future__ import annotations

from pqbench import axis, sample, units
from pqbench import protocol as proto
from pqbench.algorithms import catalog
from pqbench.errors import BadInput

P = sample.IkePhase
# The wire milestone a sample names itself (the datagram that completed the IKE_AUTH response, by the bytes the
# server sent before it); the default is the last datagram the server sent.
TIMELINE = sample.Timeline(sample.IKE_PHASES, {"handshake": sample.Milestone("s2c", -1, "first")},
                           first_sent=P.IKE_SA_INIT_SENT.value, wire_end=P.IKE_AUTH_RECEIVED.value)
sample.TIMELINES["ike", "udp"] = TIMELINE

IKE = proto.Protocol(
    "ike", "IKEv2", transports=("udp",), phases=sample.IKE_PHASES, catalog_names="names",
    default_pair=("strongswan", "strongswan"), classical=("X25519", "ecdsap256"), chains=True, sig_option="--sig",
    sig_word="signature algorithm", scheme="ike://", default_port=500, key_shares=False, modelled=False,
    handshake_end="the IKE SA established (the IKE_AUTH response in, the server's AUTH verified)",
    splits=(("IKE_SA_INIT ready", P.START.value, P.IKE_SA_INIT_SENT.value),
            ("IKE_SA_INIT exchange", P.IKE_SA_INIT_SENT.value, P.IKE_SA_INIT_RECEIVED.value),
            ("IKE_INTERMEDIATE exchanges", P.IKE_SA_INIT_RECEIVED.value, P.INTERMEDIATE_RECEIVED.value),
            ("IKE_AUTH exchange", P.IKE_AUTH_SENT.value, P.IKE_AUTH_RECEIVED.value),
            ("server's AUTH verified", P.IKE_AUTH_RECEIVED.value, P.HANDSHAKE_DONE.value)))
proto.register(IKE)


FRAGMENT_SIZES = (576, 9000)  # IPv4's minimum datagram every host takes; a jumbo frame


def _fragment_size(field: str, value) -> int:
    return units.integer(field, value, minimum=FRAGMENT_SIZES[0], maximum=FRAGMENT_SIZES[1])


MAX_ADDITIONAL = 7  # RFC 9370: Additional Key Exchange 1 to 7
RETRANSMIT_MS = (100.0, 60_000.0)  # the first retransmission's timeout a cell may set (strongSwan's default 4 s)


def _retransmit_timeout(field: str, value) -> float:
    ms = units.duration_ms(field, value, allow_zero=False, bare="s")
    if not RETRANSMIT_MS[0] <= ms <= RETRANSMIT_MS[1]:
        raise BadInput(field, f"{value!r} is outside 0.1s..60s")
    return ms


def _additional_ke(field: str, value) -> str | None:
    """ML-KEMs (catalog names) joined by "+", each an additional key exchange after the cell's kex's; "none"."""
    if value == "none":
        return None
    if not isinstance(value, str) or not value:
        raise BadInput(field, f"{value!r} is not a list of ML-KEMs (allowed: none, or e.g. MLKEM768+MLKEM1024)")
    names = [catalog.find(v, "kem", field=field).name for v in value.split("+")]
    if any(not n.startswith("MLKEM") for n in names):
        raise BadInput(field, f"{value!r}: an additional key exchange here is an ML-KEM (MLKEM512, MLKEM768, "
                              "MLKEM1024)")
    if len(names) > MAX_ADDITIONAL - 1:
        raise BadInput(field, f"{len(names)} is more than IKEv2's {MAX_ADDITIONAL} additional key exchanges "
                              "allow beside the cell's own")
    return "+".join(names)


axis.register(
    # RFC 9370: each ML-KEM named here is one more IKE_INTERMEDIATE exchange (a round trip) after those of the
    # cell's kex: X25519MLKEM768 with MLKEM1024 is x25519-ke1_mlkem768-ke2_mlkem1024, two ML-KEMs. Both ends
    # propose it (the server on a port of its own).
    axis.Axis("additional_ke", _additional_ke, "ML-KEMs joined by + (none: the cell's kex alone)", default=None,
              protocols=lambda p: p is IKE, server_feature="additional_ke", client_feature="additional_ke",
              client_option="--additional-ke", site=True, order=36,
              help="IKEv2: further additional key exchanges after the cell's kex's own (RFC 9370), ML-KEMs joined "
                   "by + (MLKEM1024, MLKEM768+MLKEM1024): one IKE_INTERMEDIATE round trip each",
              label=lambda v, row, short: f"+ {v}" if v else None),
    # strongSwan retransmits a request after this, then 1.8 times longer each time (5 tries): a lost datagram costs
    # a timer, not a round trip. Both charons alike.
    axis.Axis("retransmit_timeout", _retransmit_timeout, "a duration, 0.1s to 60s (bare numbers are seconds)",
              default=None, sql="DOUBLE", protocols=lambda p: p is IKE, server_feature="retransmit_timeout",
              client_feature="retransmit_timeout", client_option="--retransmit-timeout",
              option_value=lambda ms: f"{ms / 1000:g}", site=True, order=37,
              help="IKEv2: the first retransmission's timeout at both ends (strongSwan's retransmit_timeout, "
                   "default 4s; each next 1.8 times longer)",
              label=lambda v, row, short: f"IKE retransmit {v / 1000:g} s" if v else None),
    # RFC 7383: IKE_INTERMEDIATE and IKE_AUTH messages larger than this go in fragments, each its own datagram and
    # all lost if one is. Both ends are set alike (each fragments what it sends).
    axis.Axis("fragment_size", _fragment_size, f"a whole number of bytes, {FRAGMENT_SIZES[0]} to {FRAGMENT_SIZES[1]}",
              default=None, sql="INTEGER", protocols=lambda p: p is IKE, server_feature="fragment_size",
              client_feature="fragment_size", client_option="--fragment-size", site=True, order=35,
              help="IKEv2: the largest IP datagram an IKE fragment makes, at both ends (RFC 7383; strongSwan's "
                   "fragment_size, whose default is 1280)",
              label=lambda v, row, short: f"IKE fragments ≤ {v} B" if v else None),
)
