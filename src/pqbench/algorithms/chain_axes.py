"""The chain axes (pqbench.axis): what certificate chain a cell's server sends (pqbench.algorithms.chains).

- chain: a shape as deployed or as proposed (webpki, webpki-ocsp, suppressed; real Merkle Tree Certificates
  mtc-standalone, mtc-landmark, for a server that sends one and a client that verifies one; the size-only stand-ins
  mtc-standalone-size, mtc-landmark-size, abridged); "plain" or absent: today's root → leaf.
- chain_bytes: a padded, size-only root → leaf chain whose certificates sent weigh exactly this many bytes
  (the byte staircase's sweep); for cells whose chain is plain.
- root_sig, intermediate_sig: the algorithm of the chain's root and of its intermediate, where it is not the
  cell's sig (the leaf's): the mixed hierarchies CAs propose (an ECDSA or RSA root over ML-DSA, an SLH-DSA root).
  root_sig for plain and WebPKI-shaped chains, intermediate_sig for WebPKI-shaped ones (they have one).
- client_sig: mutual TLS; the client sends a certificate of this algorithm (from a client CA of its own) and the
  server verifies it.

Each value is a port of its own (the server serves each chain on its own port); a cell's credentials follow
from (protocol, sig, credential_key(values)).
"""

from __future__ import annotations

from pqbench import axis
from pqbench import protocol as proto
from pqbench import transport as transportmod
from pqbench import units
from pqbench.algorithms import catalog, chains
from pqbench.errors import BadInput

PLAIN = "plain"  # today's root → leaf (the axis's default, None in a cell)
STAPLING = "ocsp_stapling"  # the stack feature a stapled OCSP response needs, server and client
# a real Merkle Tree Certificate needs a client that verifies one and a server that sends it
MTC = {"client": "mtc_verify", "server": "mtc_serve"}


def _shape(field: str, value) -> str | None:
    if value == PLAIN:
        return None
    if not isinstance(value, str):
        raise BadInput(field, f"{value!r} is not a chain shape (allowed: {PLAIN}, {', '.join(chains.SHAPES)})")
    return chains.parse_shape(field, value)


def _chain_bytes(field: str, value) -> int:
    n = units.size_bytes(field, value)
    if not chains.MIN_PADDED <= n <= chains.MAX_PADDED:
        raise BadInput(field, f"{n} bytes is outside {chains.MIN_PADDED}..{chains.MAX_PADDED}")
    return n



def _stack_can(value, caps, role: str, values) -> str | None:
    """A stapled OCSP response needs a server that staples it and a client that asks (status_request); a real
    MTC a client that verifies it and a server that sends a certificate no X.509 library can check."""
    shape = chains.SHAPES[value]
    if shape.staple and STAPLING not in caps.features:
        return axis.missing(STAPLING, caps)
    if shape.mtc and MTC[role] not in caps.features:
        does = "verify" if role == "client" else "send"
        return (f"{caps.stack} cannot {does} a Merkle Tree Certificate (the {MTC[role]} feature); "
                f"{value}-size is its size-only stand-in")
    return None


def _fits(value, caps, role: str, values) -> str | None:
    """A padded chain smaller than the cell's key and its issuer's signature cannot be made."""
    sig = values.get("sig")
    if role == "server" and sig and not catalog.is_size_only(sig) and value < chains.smallest_padded(sig):
        return f"a {value}-byte chain cannot hold a {sig} leaf (at least {chains.smallest_padded(sig)} bytes)"
    return None


def credential_key(values) -> tuple:
    """What of a cell's values picks its chain beyond (protocol, sig), as chains.make's arguments after sig: ()
    for today's chain, so every credentials key made before these axes stays as it was."""
    shape, nbytes, like = values.get("chain"), values.get("chain_bytes"), values.get("sized_as")
    levels = (values.get("root_sig"), values.get("intermediate_sig"), values.get("client_sig"))
    anchored = values.get("trust_anchors") is not None  # a fallback chain beside (pqbench.algorithms.trust_anchors)
    if any(levels) or anchored:  # a mixed hierarchy, a client certificate, trust anchor negotiation
        return (shape, nbytes, like, *levels) + ((True,) if anchored else ())
    if like:  # a classical chain padded to a post-quantum one's bytes (pqbench.algorithms.sized_chain_axis)
        return (shape, nbytes, like)
    return (shape, nbytes) if shape or nbytes else ()


SAME = "same"  # a level of the leaf's algorithm (the default)


def _level(field: str, value) -> str | None:
    return catalog.certificate_signer(field, value, SAME)


def _client_sig(field: str, value) -> str | None:
    return catalog.certificate_signer(field, value, "none")


def _verifies(value, caps, role: str, values) -> str | None:
    """A client must verify the signature this level puts on the certificate below it; a level of the leaf's own
    algorithm is the cell whose level is "same"."""
    if value == values.get("sig"):
        return f"{value} is the leaf's own algorithm: the cell with {SAME}"
    if role != "client" or not caps.unsupported:
        return None
    return caps.unsupported(values.get("kex"), value, role)


MTLS = {"client": "mtls_client", "server": "mtls_server"}  # sends a client certificate; asks for and verifies one


def _mutual(value, caps, role: str, values) -> str | None:
    """The client signs with the client certificate's key, the server verifies its signature; over TCP."""
    if MTLS[role] not in caps.features:
        return axis.missing(MTLS[role], caps)
    if not transportmod.get(values.get("transport")).kernel_tcp:
        return "mutual TLS is measured over TCP only (nginx-h3's client verification is not set up)"
    if caps.unsupported:
        return caps.unsupported(values.get("kex"), value, "server" if role == "client" else "client")
    return None


def _root_level(values) -> bool:
    return values.get("chain") in (None, *chains.WEBPKI_SHAPES) and not values.get("chain_bytes") \
        and not values.get("sized_as")


def _level_label(level: str):
    return lambda v, row, short: f"{level} {v}" if v else None


axis.register(
    axis.Axis("chain", _shape, f"chain shapes ({PLAIN}, {', '.join(chains.SHAPES)})", protocols=proto.sends_chains,
              check=_stack_can, site=True, order=43,
              help="the server's chain shape: plain (default: root -> leaf), webpki (leaf and intermediate sent, two "
                   "SCTs), webpki-ocsp, suppressed, a real Merkle Tree Certificate: mtc-standalone, mtc-landmark, or "
                   "a size-only stand-in: mtc-standalone-size, mtc-landmark-size, abridged (docs/chains.md)", records=(("chain_parts", "JSON"),), label=lambda v, row, short: chains.label(v, None)),
    axis.Axis("chain_bytes", _chain_bytes, "bytes (size-only padded chains)", sql="INTEGER", protocols=proto.sends_chains,
              check=_fits,
              applies=lambda values: values.get("chain") is None,
              needs_text='applies to cells whose chain is plain: add "plain" to axes.chain', site=True, order=44,
              help="a padded, size-only chain of exactly this many bytes (e.g. 14k), for the byte staircase; with a "
                   "plain chain",
              label=lambda v, row, short: chains.label(None, v)),
    axis.Axis("root_sig", _level, f"signature names (the root's algorithm; {SAME}: the leaf's, the default)",
              protocols=proto.sends_chains, check=_verifies, applies=_root_level,
              needs_text="applies to plain and WebPKI-shaped chains (chain plain, webpki, webpki-ocsp, suppressed; "
                         "not padded or sized)", site=True, order=46,
              help="the chain root's signature algorithm where it differs from the leaf's (--sig): a mixed "
                   "hierarchy, e.g. ecdsap256 over mldsa44", label=_level_label("root")),
    axis.Axis("intermediate_sig", _level,
              f"signature names (the intermediate's algorithm; {SAME}: the leaf's, the default)",
              protocols=proto.sends_chains, check=_verifies,
              applies=lambda values: values.get("chain") in chains.WEBPKI_SHAPES,
              needs_text="applies to WebPKI-shaped chains (chain webpki, webpki-ocsp, suppressed)", site=True,
              order=47, help="the intermediate's signature algorithm in a WebPKI-shaped chain, where it differs "
                             "from the leaf's (--sig)", label=_level_label("intermediate")),
    axis.Axis("client_sig", _client_sig, "signature names (the client certificate's algorithm; none: no client "
                                          "certificate, the default)", protocols=proto.sends_chains, check=_mutual,
              site=True, order=48, help="mutual TLS: the client sends a certificate of this algorithm (e.g. mldsa44) "
                                        "and the server verifies it",
              label=lambda v, row, short: f"client cert {v}" if v else None),
)
