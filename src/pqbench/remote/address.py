"""A target's address as the user names it: `host:port` (TLS) or `ssh://host:port` (SSH). A host name is
resolved once, to IPv4 (the timing clients connect to an IPv4 address), and kept as the server name."""

from __future__ import annotations

import dataclasses
import ipaddress
import socket

from pqbench import protocol as proto
from pqbench.errors import BadInput



@dataclasses.dataclass(frozen=True)
class Address:
    protocol: str  # pqbench.protocol's name: tls | ssh
    host: str  # as given (a name or an address): the default server name
    ip: str  # IPv4, what clients connect to
    port: int

    def __str__(self) -> str:
        return f"{proto.get(self.protocol).scheme}{self.host}:{self.port}"

    @property
    def endpoint(self) -> str:
        return f"{self.ip}:{self.port}"


def parse(field: str, text: str, protocol: str | None = None) -> Address:
    """An Address from `host[:port]` or `ssh://host[:port]`; protocol: the one expected, if any."""
    text = str(text).strip()
    given = proto.by_scheme(text)
    if "://" in text and not given.scheme:
        schemes = [p.scheme for p in proto.registered() if p.scheme]
        raise BadInput(field, f"{text!r}: only {' or '.join(schemes)} may prefix an address "
                              f"({proto.get(None).label} targets are host:port)")
    if protocol and given.name != protocol:
        want = proto.get(protocol)
        raise BadInput(field, f"{text!r} is an {given.label} address; a {want.label} target is "
                              f"{want.scheme}HOST:PORT")
    rest = text.removeprefix(given.scheme)
    host, sep, port = rest.rpartition(":")
    if not sep:
        host, port = rest, str(given.default_port)
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInput(field, f"{text!r} is not HOST:PORT (a port is 1..65535)")
    return Address(given.name, host, resolve(field, host), int(port))


def resolve(field: str, host: str) -> str:
    try:
        return str(ipaddress.IPv4Address(host))
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise BadInput(field, f"{host!r} does not resolve to an IPv4 address ({e.strerror})") from None
    return infos[0][4][0]
