"""DTLS 1.3 (RFC 9147): TLS 1.3's handshake in datagrams, the protocol its own reliability (a lost datagram costs
its sender's retransmission timer, not a round trip) and its server's address check a cookie in a
HelloRetryRequest (§5.1), so a client whose first ClientHello carries a post-quantum key share sends it twice.

Its record (pqbench.protocol), its timeline (pqbench.sample: what its timing clients report and where a
handshake ends on the wire) and its one axis of its own, `cookie` (pqbench.axis), are all here; its stacks are
under pqbench.endpoints (dtlsgo: pion/dtls). A DTLS cell runs over UDP (pqbench.transport) and names its
algorithms as TLS does.
"""

from __future__ import annotations

from pqbench import axis, sample, units
from pqbench import protocol as proto
from pqbench.errors import BadInput

P = sample.Phase
# What a DTLS timing client can time: the server's flight after its ServerHello is encrypted, and there is no
# connect. Each sample names the datagram that carried its client's Finished (`wire_milestone`); the default
# here is the client's second flight's first datagram.
PHASES = tuple(p.value for p in (P.CLIENT_HELLO_SENT, P.SERVER_HELLO_RECEIVED, P.HANDSHAKE_DONE))
TIMELINE = sample.Timeline(PHASES, {"handshake": sample.Milestone("c2s", 1, "first")})
sample.TIMELINES["dtls", "udp"] = TIMELINE

DTLS = proto.Protocol(
    "dtls", "DTLS", transports=("udp",), phases=PHASES, catalog_names="names", default_pair=("dtlsgo", "dtlsgo"),
    classical=("X25519", "ecdsap256"), chains=True, sig_option="--sig", sig_word="signature algorithm",
    scheme="dtls://", default_port=4433, key_shares=True, modelled=False,
    handshake_end="the datagram carrying the client's Finished",
    splits=(("ClientHello ready", P.START.value, P.CLIENT_HELLO_SENT.value),
            ("ClientHello→ServerHello (a cookie's retry included)", P.CLIENT_HELLO_SENT.value,
             P.SERVER_HELLO_RECEIVED.value),
            ("ServerHello→client Finished", P.SERVER_HELLO_RECEIVED.value, P.HANDSHAKE_DONE.value)))
proto.register(DTLS)


def _cookie(field: str, value) -> bool:
    if not isinstance(value, bool):
        raise BadInput(field, f"{value!r} is not true or false")
    return value


def _server_sends_cookie(value, caps, role: str, values) -> str | None:
    """The cookie exchange needs a server that can send one (the cookie feature); without it, a server that never
    sends one (BoringSSL's stateful DTLS 1.3 server) serves the cells without."""
    if role == "server" and value is not False and "cookie" not in caps.features:
        return axis.missing("cookie", caps)
    return None


MTUS = (256, 65507)  # the UDP payload a DTLS stack may be told to fill: a datagram of IPv4's largest payload at most
DEFAULT_MTU = 1200  # pion's and pqboring's own (either stack, when the cell does not set it)


def _mtu(field: str, value) -> int:
    return units.integer(field, value, minimum=MTUS[0], maximum=MTUS[1])


axis.register(
    # RFC 9147 §4.4: a DTLS stack fragments its handshake messages to its PMTU estimate, set here at both ends
    axis.Axis("dtls_mtu", _mtu, f"a whole number of bytes, {MTUS[0]} to {MTUS[1]}", default=None, sql="INTEGER",
              protocols=lambda p: p is DTLS, server_feature="dtls_mtu", client_feature="dtls_mtu",
              client_option="--mtu", site=True, order=35,
              help=f"DTLS: the largest UDP payload each side's datagrams carry (its handshake messages fragmented to "
                   f"fit; both stacks' default is {DEFAULT_MTU})",
              label=lambda v, row, short: f"DTLS datagrams ≤ {v} B" if v else None),
    # RFC 9147 §5.1: the server's stateless address check. On by default in every DTLS server measured here.
    axis.Axis("cookie", _cookie, "true or false", default=None, sql="BOOLEAN", protocols=lambda p: p is DTLS,
              default_for=lambda p: True if p is DTLS else None, check=_server_sends_cookie, site=True, order=34,
              help="DTLS: the server answers a first ClientHello with a HelloRetryRequest carrying a cookie (the "
                   "default; the client sends its ClientHello twice), or not (false)",
              label=lambda v, row, short: "no cookie" if v is False else None),
)
