"""Application protocols, each one registered record (as transports have theirs in pqbench.transport).

A cell runs a protocol (TLS, SSH) over a transport. What differs between protocols is a field of the record,
saying why, and code asks the record instead of comparing a protocol's name (tests/test_layout.py finds any
comparison outside this module). A new protocol is its record, registered in its own module, and that module's
line in pqbench.experiment.axes; the stacks that speak it name it in their Stack.protocol.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from pqbench import sample
from pqbench.errors import BadInput


@dataclasses.dataclass(frozen=True)
class Protocol:
    name: str  # a spec's `protocols` entry, a cell's and a sample's `protocol`, the store's value
    label: str  # what the report and the errors call it
    transports: tuple[str, ...]  # the transports it runs over (pqbench.transport names), its own first
    phases: tuple[str, ...]  # the phases its samples report a time for (pqbench.sample)
    # How the algorithm catalog names its algorithms in this protocol: the Algorithm method listing them
    # ("names": the catalog's names and aliases, TLS's groups and signature schemes; "ssh_names": SSH's).
    catalog_names: str
    default_pair: tuple[str, str]  # (server, client) stacks of a cell that names none
    # A classical key exchange and signature, by this protocol's names: the partner of an algorithm tried alone.
    classical: tuple[str, str]
    # The server proves itself with a certificate chain (the chain axes apply, certificates are made for it);
    # else with host keys (pqbench.endpoints.sshkeys), named by host key algorithm.
    chains: bool
    sig_option: str  # the command line's option naming the signature ("--sig", SSH's "--hostkey")
    sig_word: str  # what errors call a signature of it
    scheme: str  # an address's prefix naming it ("ssh://"; "" for the default protocol's host:port)
    default_port: int  # a target's port when its address names none
    # The client offers key shares and the server picks among groups (TLS's ClientHello and HelloRetryRequest):
    # the offer and server_groups options, the scan's group probes.
    key_shares: bool
    modelled: bool  # pqbench.analysis.model knows its flights (the lower bound)
    handshake_end: str  # where a handshake sample's time ends, as the report says it
    # The phase split the analysis and the report give: (label, from phase, to phase); "start" is the sample's
    # start. Phases a cell's samples did not report are left out.
    splits: tuple[tuple[str, str, str], ...] = ()

    @property
    def is_default(self) -> bool:
        """The protocol of a cell that names none (cells from before protocols: their ids leave it out)."""
        return self.name == DEFAULT

    @property
    def credentials_dir(self) -> str:
        """Where a run keeps what its servers prove themselves with."""
        return "certs" if self.chains else "keys"

    @property
    def credentials_word(self) -> str:
        return "certificates" if self.chains else "host key"

    def qualify(self, text: str) -> str:
        """text, prefixed with the protocol's label unless it is the default protocol ("SSH host key")."""
        return text if self.is_default else f"{self.label} {text}"


_REGISTRY: dict[str, Protocol] = {}
DEFAULT = "tls"


def register(*protocols: Protocol) -> None:
    for p in protocols:
        _REGISTRY[p.name] = p


def unregister(name: str) -> None:
    """Removes a protocol (a test's own)."""
    _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def registered() -> list[Protocol]:
    return list(_REGISTRY.values())


def get(name: str | None, field: str = "protocol") -> Protocol:
    """The protocol called name (None: the default); exit 2 naming the field and the choices."""
    if name is None:
        return _REGISTRY[DEFAULT]
    if not isinstance(name, str) or name not in _REGISTRY:
        raise BadInput(field, f"{name!r} is not a protocol; choose one of {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def of(row: Mapping) -> Protocol:
    """The protocol of a cell row, a sample or a scan result (the default where it names none)."""
    return _REGISTRY.get(row.get("protocol") or DEFAULT) or _REGISTRY[DEFAULT]


def by_scheme(text: str) -> Protocol:
    """The protocol an address's prefix names ("ssh://host"), else the default's."""
    return next((p for p in registered() if p.scheme and text.startswith(p.scheme)), _REGISTRY[DEFAULT])


def over(transport: str) -> tuple[str, ...]:
    """The protocols that run over a transport."""
    return tuple(p.name for p in registered() if transport in p.transports)


def sends_chains(p: Protocol) -> bool:
    """Its servers send certificate chains (the chain axes apply), not host keys."""
    return p.chains


def loads_pages(p: Protocol) -> bool:
    """Its clients can fetch a page after the handshake (its samples end at the page's last byte)."""
    return sample.Phase.LAST_BYTE.value in p.phases


P, S = sample.Phase, sample.SshPhase
TLS_SPLITS = (
    ("TCP handshake", P.START, P.TCP_CONNECTED),
    ("ClientHello ready", P.TCP_CONNECTED, P.CLIENT_HELLO_SENT),
    ("ClientHello→ServerHello", P.CLIENT_HELLO_SENT, P.SERVER_HELLO_RECEIVED),
    ("ServerHello→server Finished", P.SERVER_HELLO_RECEIVED, P.SERVER_FINISHED_RECEIVED),
    ("server Finished→done", P.SERVER_FINISHED_RECEIVED, P.HANDSHAKE_DONE),
    ("done→last byte", P.HANDSHAKE_DONE, P.LAST_BYTE),
)
# SSH's: to the client's NEWKEYS (its handshake_done), by the messages that cross the link.
SSH_SPLITS = (
    ("TCP handshake", S.START, S.TCP_CONNECTED),
    ("server identification", S.TCP_CONNECTED, S.SERVER_IDENT_RECEIVED),
    ("KEXINIT exchange", S.SERVER_IDENT_RECEIVED, S.KEXINIT_EXCHANGED),
    ("key exchange init→reply", S.KEXINIT_EXCHANGED, S.KEX_REPLY_RECEIVED),
    ("reply→client NEWKEYS", S.KEX_REPLY_RECEIVED, S.NEWKEYS_SENT),
)
TLS_SPLITS, SSH_SPLITS = (tuple((label, a.value, b.value) for label, a, b in s) for s in (TLS_SPLITS, SSH_SPLITS))

# TLS 1.3 (RFC 8446) over TCP and inside QUIC (RFC 9001); SSH (RFC 4253) over TCP.
register(
    Protocol("tls", "TLS", transports=("tcp", "quic"), phases=sample.PHASES, catalog_names="names",
             default_pair=("openssl", "openssl"), classical=("X25519", "ecdsap256"), chains=True, sig_option="--sig",
             sig_word="signature algorithm", scheme="", default_port=443, key_shares=True, modelled=True,
             handshake_end="the client's Finished", splits=TLS_SPLITS),
    Protocol("ssh", "SSH", transports=("tcp",), phases=sample.SSH_PHASES, catalog_names="ssh_names",
             default_pair=("openssh", "gossh"), classical=("curve25519-sha256", "ssh-ed25519"), chains=False,
             sig_option="--hostkey", sig_word="host key", scheme="ssh://", default_port=22, key_shares=False,
             modelled=False, handshake_end="the client's NEWKEYS (key exchange done, host key verified)", splits=SSH_SPLITS),
)
