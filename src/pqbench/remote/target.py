"""A target as a spec or the command line names it: a server pqbench did not start, its address, the CA
to trust (or none: the verification result is recorded instead of failing) and the server name; or a
port of a `pqbench serve` manifest, which supplies all three for the signature algorithm asked."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from pqbench import protocol as proto
from pqbench.endpoints.base import Site
from pqbench.errors import BadInput
from pqbench.remote import address as addrmod
from pqbench.remote.address import Address

DEFAULT_RATE = 5.0  # connections per second to a target unless asked for more: one at a time, gently
MAX_RATE = 1000.0


@dataclasses.dataclass(frozen=True)
class Credentials:
    """What a client trusts a target with, in the shape of a chain (pqbench.algorithms.certs.Chain)."""
    root_cert: Path | None
    server_name: str
    sig: str
    sent_bytes: int | None = None  # unknown until the target sends its chain

    def to_json(self) -> dict:
        return {"root_cert": str(self.root_cert) if self.root_cert else None, "server_name": self.server_name,
                "sig": self.sig}


@dataclasses.dataclass(frozen=True)
class Target:
    name: str
    address: Address
    credentials: Credentials

    @property
    def protocol(self) -> str:
        return self.address.protocol

    def site(self) -> Site:
        return Site(self.address.port, self.credentials, host=self.address.ip)

    def to_json(self) -> dict:
        return {"name": self.name, "address": str(self.address), "ip": self.address.ip,
                **self.credentials.to_json()}


def make(field: str, address: str, *, name: str | None = None, ca=None, server_name: str | None = None,
         sig: str | None = None, protocol: str | None = None) -> Target:
    from pqbench.endpoints.remote import UNKNOWN_SIG
    a = addrmod.parse(f"{field}.address" if name is not None else field, address, protocol)
    root = None
    if ca:
        root = Path(ca).expanduser()
        if not root.is_file():
            raise BadInput(f"{field}.ca" if name is not None else "--ca", f"{root} is not a file (a PEM CA certificate)")
    if sig:
        p = proto.get(a.protocol)
        where = f"{field}.sig" if name is not None else p.sig_option
        if p.chains:
            from pqbench.algorithms import catalog
            sig = catalog.checked(str(sig), "sig", p.name, where)
        else:
            from pqbench.endpoints import sshkeys
            sig = sshkeys.check_hostkey(str(sig), where)
    return Target(name or str(a), a, Credentials(root, server_name or a.host, sig or UNKNOWN_SIG))


def from_manifest(field: str, manifest: Path, sig: str, *, name: str | None = None, host: str | None = None) -> Target:
    """The port serving sig's chain in a `pqbench serve` manifest; host: where the server is, when the
    manifest's own address is not how the client reaches it (a wildcard bind)."""
    try:
        m = json.loads(Path(manifest).read_text())
    except (OSError, ValueError) as e:
        raise BadInput(f"{field}.manifest", f"cannot read {manifest} as a `pqbench serve` manifest: {e}") from None
    served = {p["sig"]: (proto.get(name), p) for name in proto.names() for p in m.get(name, [])}
    if sig not in served:
        raise BadInput(f"{field}.sig", f"{sig!r}: the manifest serves {', '.join(served) or 'no chain'}")
    protocol, p = served[sig]
    where = host or m["address"]
    if where in ("0.0.0.0", ""):
        raise BadInput(f"{field}.host", f"the server listens on every address ({m['address']}): name the one to "
                                        "reach it by (host = \"…\")")
    trust = p.get("ca") or p.get("host_key")  # TLS: the root certificate; SSH: the host's public key
    root = Path(manifest).parent / trust if trust else None
    return Target(name or f"{where}:{p['port']}", addrmod.parse(f"{field}.host", f"{protocol.scheme}{where}:{p['port']}"),
                  Credentials(root, p.get("server_name") or where, sig, p.get("bytes_sent")))


# The clients that can leave a target's chain unverified and record the result (pqtimer); the others
# always verify (or, Go's, would skip verification without saying), so they need the target's CA.
RECORDS_VERIFICATION = ("openssl",)
SSH_CLIENT = "gossh"  # sshtimer --kex-only: to NEWKEYS, with no account on the server
# Protocols whose targets only one client measures, and why.
ONLY_CLIENT = {"ssh": (SSH_CLIENT, "authenticates, and a target gives it no account: SSH targets are measured by "
                                   f"{SSH_CLIENT} (sshtimer --kex-only, to NEWKEYS)")}


def client_problem(target: Target, client: str) -> str | None:
    """Why this client stack cannot measure this target, or None."""
    only, why = ONLY_CLIENT.get(target.protocol, (None, ""))
    if only and client != only:
        return f"the {client} client {why}"
    if proto.get(target.protocol).chains and target.credentials.root_cert is None and client not in RECORDS_VERIFICATION:
        return (f"the {client} client cannot record a verification result: give target {target.name!r} its CA "
                f"(ca, --ca), or measure it with the {' or '.join(RECORDS_VERIFICATION)} client")
    return None


def pause_ms(rate: float) -> int:
    """The pause after each connection that keeps one client at or under rate connections per second."""
    return int(round(1000 / rate))
