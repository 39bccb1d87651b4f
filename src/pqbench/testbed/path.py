"""What joins a client side and a server side, as a rig uses it: a Testbed (two namespaces and an
emulated link) or a RealPath (the host's own network, measured instead of emulated).

A rig opens a path in a with-block (its exit closes the path and whatever still runs in it), runs the
servers in the "server" side and the clients in the "client" side, and per cell sets the link, the TCP
knobs and the counters. `emulated` tells the two kinds apart: an emulated link is configured and its
floor calibrated; a real one is neither, and each cell measures it (connect times) instead.
"""

from __future__ import annotations

import abc
import socket as socketmod
import subprocess

from pqbench.testbed.linkspec import LinkSpec, TcpKnobs


class Path(abc.ABC):
    emulated: bool  # True: the link is emulated (configured per cell, its floor calibrated); False: measured
    name: str  # in progress lines and provenance
    spec: LinkSpec  # the link as configured (a real path: LinkSpec(), nothing emulated)
    tcp: TcpKnobs
    backend: object | None  # the emulator behind the link (counters, wire record), None where there is none

    @property
    @abc.abstractmethod
    def backend_name(self) -> str | None:
        """What carries the link, as stored in provenance: "pqlink", "netem", "veth" or "real"."""

    @property
    @abc.abstractmethod
    def server_addr(self) -> str:
        """The address a client reaches the server side at ("" where the servers are targets)."""

    @abc.abstractmethod
    def ns(self, side: str) -> str | None:
        """The network namespace the side runs in, None for the host's own."""

    @abc.abstractmethod
    def addr(self, side: str) -> str:
        """The side's own address ("" where the kernel chooses)."""

    @abc.abstractmethod
    def popen(self, side: str, argv: list[str], **kw) -> subprocess.Popen:
        """A process in the side."""

    @abc.abstractmethod
    def run(self, side: str, argv: list[str], **kw) -> subprocess.CompletedProcess:
        """A process in the side, waited for."""

    @abc.abstractmethod
    def socket(self, side: str, family=socketmod.AF_INET, type=socketmod.SOCK_STREAM, proto: int = 0):
        """A socket in the side."""

    @abc.abstractmethod
    def note_process(self, pid: int) -> None:
        """A process started in the path, for the cleaning up after a crash."""

    @abc.abstractmethod
    def reconfigure(self, spec: LinkSpec) -> None:
        """The link from now on (a real path refuses anything but LinkSpec())."""

    @abc.abstractmethod
    def set_tcp(self, tcp: TcpKnobs) -> None:
        """TCP knobs for connections opened from now on (a real path refuses any)."""

    @abc.abstractmethod
    def reset_counters(self) -> None:
        """Zeroes the link's counters (and restarts an emulated loss pattern from its seed)."""

    @abc.abstractmethod
    def counters(self) -> dict:
        """Per-direction counters of the link ({} where nothing counts)."""

    @abc.abstractmethod
    def congestion_control(self) -> dict:
        """{"client": name, "server": name or None}: the congestion control each side's connections use."""

    @abc.abstractmethod
    def info(self) -> dict:
        """The path for provenance: name, backend and what else describes it."""

    @abc.abstractmethod
    def __enter__(self) -> "Path":
        """Opens the path."""

    @abc.abstractmethod
    def __exit__(self, *exc) -> bool:
        """Closes the path: what was started in it is stopped, what was made is removed."""
