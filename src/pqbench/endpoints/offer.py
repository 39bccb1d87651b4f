"""What a TLS client offers and what a server prefers: the key-share groups and the supported groups of
a ClientHello, and the server's preference order among groups.

**Client offer** (`offer`, `--offer`): the groups that carry a key share, joined by `+`, optionally
followed by ` / ` and more groups that are listed in supported_groups without a share:

    X25519MLKEM768           one share (what every cell did before offers existed)
    X25519MLKEM768+X25519    two shares, both listed (what browsers send)
    X25519 / X25519MLKEM768  a share for X25519 only; X25519MLKEM768 listed without one

supported_groups lists the shares' groups first, then the others, in the order written. When the part
after ` / ` names every share group too, it is the whole supported_groups list in its own order:
`X25519 / X25519MLKEM768:X25519` lists the hybrid first but sends only an X25519 share. Groups are
joined by `+` or `:` on either side. OpenSSL 3.5's groups list expresses it (`*` marks a key share):
`*X25519:X25519MLKEM768`; its clients send at most 4 shares.

**Server groups** (`server_groups`, `--server-groups`): OpenSSL 3.5's tuple syntax. `:` joins groups of
one tuple, `/` separates tuples in falling preference. OpenSSL's server takes the first tuple that holds
any group the client supports; within it, a group the client sent a share for wins over one it only
listed (no HelloRetryRequest if it can be avoided), and among those the server's order wins (nginx runs
with `ssl_prefer_server_ciphers on` for an explicit server order). A group only listed in the first
matching tuple costs a HelloRetryRequest:

    X25519MLKEM768/X25519    the hybrid strictly first: a client that shares only X25519 but lists the
                             hybrid gets one HelloRetryRequest (a wrong prediction)
    X25519MLKEM768:X25519    comparable: that client gets X25519 at once; a client sharing both gets the
                             hybrid (the server's order within the tuple)

**Certificate compression** (`cert_compression`, `--cert-compression`): the RFC 8879 algorithms a client
offers, in preference order: none, all (zlib, brotli, zstd) or a comma-separated list of them.
"""

from __future__ import annotations

import dataclasses
import re

from pqbench import axis, units
from pqbench.algorithms import catalog
from pqbench.errors import BadInput

MAX_SHARES = 4  # OpenSSL 3.5's clients send at most 4 key shares
CERT_COMPRESSION_ALGORITHMS = ("zlib", "brotli", "zstd")  # RFC 8879's, in their code points' order
_JOIN = re.compile(r"\s*[+:]\s*")


def _names(part: str, field: str, what: str) -> list[str]:
    """The catalog's names of the groups in part (joined by + or :), each once."""
    raw = [n for n in _JOIN.split(part.strip())]
    if any(not n for n in raw):
        raise BadInput(field, f"an empty group name in {what} {part.strip()!r} (groups are joined by + or :)")
    names = [catalog.find(n, "kem", field=field, protocol="tls").name for n in raw]
    seen = set()
    for given, name in zip(raw, names):
        if name in seen:
            raise BadInput(field, f"{name} appears twice in {what}" + ("" if given == name else f" (as {given!r})"))
        seen.add(name)
    return names


@dataclasses.dataclass(frozen=True)
class Offer:
    """A ClientHello's groups: `groups` in supported_groups order, `shares` those with a key share (in the
    key_share extension's order)."""
    groups: tuple[str, ...]
    shares: tuple[str, ...]

    @property
    def single(self) -> bool:
        """One group with its share: what a cell without an offer sends."""
        return len(self.groups) == 1

    def openssl(self) -> str:
        """The groups list for SSL_CTX_set1_groups_list (pqtimer --groups)."""
        if self.single:
            return self.groups[0]
        return ":".join(("*" if g in self.shares else "") + g for g in self.groups)

    def notation(self) -> str:
        """The canonical spelling (what a spec, the store and the report show)."""
        head = "+".join(self.shares)
        others = tuple(g for g in self.groups if g not in self.shares)
        if self.groups == self.shares:
            return head
        if self.groups == self.shares + others:
            return f"{head} / {':'.join(others)}"
        return f"{head} / {':'.join(self.groups)}"

    def __str__(self) -> str:
        return self.notation()


def parse_offer(text: str, field: str = "offer") -> Offer:
    """An offer in our notation (module doc), checked: unknown groups name the closest ones; a group twice,
    a share for a group the full list leaves out, more than 4 shares or nothing at all are bad input."""
    if not isinstance(text, str) or not text.strip():
        raise BadInput(field, "an empty offer (e.g. X25519MLKEM768+X25519, or X25519 / X25519MLKEM768)")
    parts = text.split("/")
    if len(parts) > 2:
        raise BadInput(field, f"{text!r}: at most one ' / ' (key-share groups / groups listed without a share)")
    shares = _names(parts[0], field, "the key-share groups")
    if not shares:
        raise BadInput(field, f"{text!r} sends no key share")
    if len(shares) > MAX_SHARES:
        raise BadInput(field, f"{len(shares)} key shares: OpenSSL's client sends at most {MAX_SHARES}")
    if len(parts) == 1:
        return Offer(tuple(shares), tuple(shares))
    listed = _names(parts[1], field, "the listed groups")
    named = [g for g in shares if g in listed]
    if not named:
        return Offer(tuple(shares + listed), tuple(shares))
    missing = [g for g in shares if g not in listed]
    if missing:
        raise BadInput(field, f"a key share for {', '.join(missing)}, which the list after ' / ' "
                              f"({':'.join(listed)}) does not name: list every key-share group there, or none of "
                              f"them (they are then listed first)")
    return Offer(tuple(listed), tuple(shares))


def offer_from_parts(groups: list[str], shares: list[str], field: str = "offer") -> Offer:
    """An offer from its two lists (a spec's table form: groups in supported_groups order, shares)."""
    if not groups:
        raise BadInput(field, "an empty offer: no groups listed")
    if not shares:
        raise BadInput(field, "an offer without a key share")
    g = _names(":".join(groups), f"{field}.groups", "the listed groups")
    s = _names(":".join(shares), f"{field}.shares", "the key-share groups")
    missing = [x for x in s if x not in g]
    if missing:
        raise BadInput(f"{field}.shares", f"a key share for {', '.join(missing)}, which {field}.groups "
                                          f"({', '.join(g)}) does not list")
    if len(s) > MAX_SHARES:
        raise BadInput(f"{field}.shares", f"{len(s)} key shares: OpenSSL's client sends at most {MAX_SHARES}")
    return Offer(tuple(g), tuple(s))


@dataclasses.dataclass(frozen=True)
class ServerGroups:
    """The server's groups in OpenSSL 3.5's tuples, most preferred tuple first."""
    tuples: tuple[tuple[str, ...], ...]

    @property
    def groups(self) -> list[str]:
        return [g for t in self.tuples for g in t]

    def openssl(self) -> str:
        """The groups list for SSL_CTX_set1_groups_list (nginx ssl_ecdh_curve)."""
        return "/".join(":".join(t) for t in self.tuples)

    def __str__(self) -> str:
        return self.openssl()


def parse_server_groups(text: str, field: str = "server_groups") -> ServerGroups:
    """Server groups in OpenSSL's tuple syntax (module doc), checked like an offer."""
    if not isinstance(text, str) or not text.strip():
        raise BadInput(field, "no group (e.g. X25519MLKEM768/X25519: the hybrid strictly first)")
    tuples = []
    seen: set[str] = set()
    for part in text.split("/"):
        if not part.strip():
            raise BadInput(field, f"{text!r}: an empty tuple (tuples are separated by /, groups in one by :)")
        names = _names(part, field, "the server's groups")
        again = [n for n in names if n in seen]
        if again:
            raise BadInput(field, f"{again[0]} appears twice in the server's groups")
        seen.update(names)
        tuples.append(tuple(names))
    return ServerGroups(tuple(tuples))


def unavailable(groups) -> str | None:
    """Why our OpenSSL (with pqprov) cannot use one of the groups in TLS 1.3, or None."""
    for name in groups:
        alg = catalog.find(name, "kem")
        avail = catalog.availability(alg)
        if not avail.tls:
            return f"{alg.name} is not usable in TLS 1.3 here: {avail.reason or 'no TLS code point'}"
    return None


def parse_cert_compression(text: str, field: str = "cert_compression") -> str:
    """The client's compression algorithms, canonical: none, all, or a comma-separated list (each once)."""
    value = (text or "").strip().lower()
    if value in ("none", "all"):
        return value
    algs = [a.strip() for a in value.split(",")]
    allowed = f"none, all, or a comma-separated list of {', '.join(CERT_COMPRESSION_ALGORITHMS)}"
    for a in algs:
        if a not in CERT_COMPRESSION_ALGORITHMS:
            raise BadInput(field, f"{a!r} is not a certificate compression algorithm (allowed: {allowed})")
    if len(set(algs)) != len(algs):
        raise BadInput(field, f"{text!r} names an algorithm twice")
    return ",".join(algs)


# --- the axes of what clients offer and servers prefer (pqbench.axis) ----------------------------------
COMPRESSIONS = ("none", "zlib", "brotli", "zstd", "all")  # a spec's compress values


def _groups_usable(groups, caps, role: str, values) -> str | None:
    """Why the stack in role cannot use one of the groups with the cell's signature, or None."""
    for group in dict.fromkeys(groups):
        why = caps.unsupported(group, values["sig"], role)
        if why:
            return why
    return None


def _shares_keys(p) -> bool:
    """The protocol's client offers key shares among groups (its ClientHello: the axes of what it offers)."""
    return p.key_shares


def _offer_check(value: str, caps, role: str, values) -> str | None:
    if role != "client":
        return None
    offer = parse_offer(value)
    if not offer.single and "offer" not in caps.features:
        return axis.missing("offer", caps)
    return _groups_usable(offer.groups, caps, role, values)


def _server_groups_check(value: str, caps, role: str, values) -> str | None:
    if role != "server":
        return None
    accepted = parse_server_groups(value).groups
    # a server that accepts none of the groups the client offers measures a failed handshake, not the cell (a
    # spec crossing kex with server_groups to switch post-quantum off on the server's side makes such pairs)
    offered = parse_offer(values["offer"]).groups if values.get("offer") else (values.get("kex"),)
    wanted = {catalog.find(g, "kem").name for g in offered if g}
    if wanted and not wanted & {catalog.find(g, "kem").name for g in accepted}:
        return f"the server accepts only {value}: none of the groups the client offers ({', '.join(sorted(wanted))})"
    return _groups_usable(accepted, caps, role, values)


def _compress_check(value: str, caps, role: str, values) -> str | None:
    """The client offers value; the server compresses, unless told not to (`handshake --server-compression
    off` keeps a client's offer without the server's compression)."""
    if role == "server" and not values.get("compress_certs", True):
        return None
    return axis.missing("cert_compression", caps) if "cert_compression" not in caps.features else None


def _compression(field: str, value) -> str | None:
    if value not in COMPRESSIONS:
        raise BadInput(field, f"{value!r} is not one of {', '.join(COMPRESSIONS)}")
    return None if value == "none" else value


axis.register(
    # the ClientHello's groups and key shares (None: one share, the cell's kex); the spec's kex follows from it
    axis.Axis("offer", lambda field, v: parse_offer(v, field).notation(), "offers", check=_offer_check,
              protocols=_shares_keys,
              help="the client's groups and key shares: X25519MLKEM768+X25519 (two shares), X25519 / X25519MLKEM768 "
                   "(a share for X25519, the hybrid listed without one); the openssl and boringssl clients (DTLS: dtlsboring)",
              to_job=lambda v: {"offer": v}, order=40, label=lambda v, row, short: f"offer {v}"),
    # the server's preference order (None: every group of the run, one tuple)
    axis.Axis("server_groups", lambda field, v: parse_server_groups(v, field).openssl(), "preference orders",
              protocols=_shares_keys,
              server_feature="offer", check=_server_groups_check, site=True,
              help="the server's groups in OpenSSL's tuple syntax, preferred first: X25519MLKEM768/X25519 (the hybrid "
                   "strictly first: a HelloRetryRequest when the client did not share it), X25519MLKEM768:X25519 "
                   "(comparable: a share the client sent wins); default: the offer's groups (or --kex)",
              to_site=lambda v: {"server_groups": v}, order=41, label=lambda v, row, short: f"server prefers {v}"),
    # certificate compression (RFC 8879) the client offers and the server uses (None: none)
    axis.Axis("compress", _compression, "compression names", check=_compress_check, protocols=lambda p: p.chains,
              help="certificate compression (RFC 8879) the client offers and the server uses: zlib, brotli or zstd",
              to_job=lambda v: {"cert_compression": v or "none"}, site=True,
              to_site=lambda v: {"compress_certs": v is not None}, order=42,
              label=lambda v, row, short: f"certs {v}"),
    # a ClientHello padding extension of this many bytes (the Chrome study's dummy extension, without crypto)
    axis.Axis("pad", lambda field, v: units.integer(field, v, minimum=0, maximum=60000), "bytes", default=0,
              sql="INTEGER", id_omit=axis.ALWAYS, to_job=lambda v: {"pad": v}, order=80, protocols=_shares_keys,
              help="ClientHello padding extension of this many bytes",
              label=lambda v, row, short: f"pad {v}" if v else None),
)
