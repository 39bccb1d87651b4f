"""Waiting for a server pqbench has just started, the same way for every stack: poll each port until it
answers, against one deadline; give up at once when the server's process has died; and when it fails,
stop the server and say which one, what it did not do and what its log says.

A stack's ready() describes its process (Starting), waits for its ports (listening over TCP, or its own
check), then asks each site for one real handshake (serves): a server that listens but cannot serve its
chain fails here, not in a cell."""

from __future__ import annotations

import dataclasses
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence

from pqbench.endpoints.base import Place, Site, tcp_probe
from pqbench.errors import MeasurementFailed

TIMEOUT_S = 15.0  # from start to every port answering: a server takes well under a second
POLL_S = 0.05
LOG_TAIL = 2000  # characters of each log in an error


@dataclasses.dataclass
class Starting:
    """A server process on its way up."""
    name: str  # what the errors call it: "nginx", "tlsgo server", "sshd on port 4433"
    proc: subprocess.Popen
    logs: Sequence[Path]  # where it writes what went wrong (a piped stderr is read too, once it has exited)
    stop: Callable[[], None]  # stops all of the server, before an error is raised

    def wait(self, ports: Iterable[int], answers: Callable[[int], str | None], doing: str,
             timeout: float = TIMEOUT_S) -> None:
        """Polls answers(port), None once the port is ready or else why not yet, for every port until all are
        ready; `doing` says what that is ("listen on"). MeasurementFailed when the process exits or the
        timeout passes."""
        deadline = time.monotonic() + timeout
        pending = {p: "not tried" for p in ports}
        while True:
            if self.proc.poll() is not None:
                raise self.failed(f"exited with {self.proc.returncode} before it would {doing} {_ports(pending)}")
            pending = {p: why for p in pending if (why := answers(p)) is not None}
            if not pending:
                return
            if time.monotonic() > deadline:
                whys = "; ".join(sorted(set(pending.values())))
                raise self.failed(f"did not {doing} {_ports(pending)} within {timeout:g} s ({whys})")
            time.sleep(POLL_S)

    def serves(self, sites: Iterable[Site], handshake: Callable[[Site], str | None], what: str) -> None:
        """Each site completes `what` ("a TLS handshake"): handshake(site) is None, or else why not."""
        for site in sites:
            why = handshake(site)
            if why:
                raise self.failed(f"on port {site.port} does not complete {what}: {why}")

    def failed(self, what: str) -> MeasurementFailed:
        """Stops the server; the error names it, what it did not do and its log."""
        self.stop()
        return MeasurementFailed(f"{self.name} {what}; {self.log_text()}")

    def log_text(self) -> str:
        parts = []
        if self.proc.stderr is not None and self.proc.poll() is not None:
            parts.append(self.proc.stderr.read().decode(errors="replace"))
        parts += [p.read_text(errors="replace")[-LOG_TAIL:] for p in self.logs if p.exists()]
        text = " | ".join(x.strip() for x in parts if x.strip()) or "nothing"
        return f"its log ({', '.join(map(str, self.logs))}): {text}"


def listening(place: Place, addr: str) -> Callable[[int], str | None]:
    """A port is ready once it accepts a TCP connection from place."""
    return lambda port: None if tcp_probe(place, addr, port) else "no TCP connection"


def _ports(ports) -> str:
    ports = sorted(ports)
    return f"port {ports[0]}" if len(ports) == 1 else f"ports {', '.join(map(str, ports))}"
