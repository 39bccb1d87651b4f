"""Targets: servers pqbench did not start, as server endpoints. Starting one does nothing; its
readiness is the TCP connects that measure the path before each cell (never fatal: a target that does
not answer gives failed samples with their class, and the run goes on); what it can do is unknown until
asked (`pqbench scan`), so no cell is refused in advance. Any client stack of the protocol measures it."""

from __future__ import annotations

import functools

from pqbench.endpoints.base import Capabilities, Place, Serving, Stack
from pqbench.errors import BadInput
from pqbench.sample import END_PHASE

__all__ = ["STACKS", "UNKNOWN_SIG"]

UNKNOWN_SIG = "target-chain"  # a target's signature algorithm when nobody named it: what the server sends
MODES = {"tls": tuple(END_PHASE), "ssh": ("handshake",)}


class RemoteServer:
    warm_up = False  # not ours to warm: its first handshakes are part of what is measured

    def start(self, place: Place, serving: Serving) -> None:
        pass

    def ready(self, client_place: Place) -> None:
        pass  # each cell's path measurement connects first, and records a target that does not answer

    def stop(self) -> None:
        pass


def _no_client():
    raise BadInput("client", "a target is a server pqbench did not start: it has no client of its own "
                             "(measure it with a client stack: openssl, s2n, rustls, gotls; gossh, openssh)")


def _capabilities(name: str, protocol: str) -> Capabilities:
    return Capabilities(stack=name, protocol=protocol, transports=("tcp",), modes=MODES[protocol],
                        versions={"server": "unknown until asked (pqbench scan)"},
                        unsupported=lambda kex, sig, role="server": None if role == "server"
                        else "a target is a server only")


STACKS = tuple(Stack(name=name, protocol=protocol, server=RemoteServer, client=_no_client,
                     capabilities=functools.partial(_capabilities, name, protocol))
               for name, protocol in (("remote", "tls"), ("remote-ssh", "ssh")))
