"""A population scan: the targets of a file, each scanned once, as politely as pqbench.scan.polite
says, and each result handed to `done` as soon as it is there (the command stores it at once, so an
interrupted scan resumes where it stopped). Addresses only as listed: no name is expanded, no range,
no discovery.

Target file: one target a line (HOST:PORT for TLS, ssh://HOST:PORT for SSH), `#` starts a comment; a
line that is not a target is reported with its number and skipped; a target listed twice is scanned once.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import threading
from pathlib import Path
from typing import Callable

from pqbench.errors import BadInput
from pqbench.remote import address as addr
from pqbench.remote.address import Address
from pqbench.scan.polite import Hosts, Pace


@dataclasses.dataclass
class TargetFile:
    targets: list[tuple[int, Address]]  # (line number, target), each target once, in file order
    bad: list[tuple[int, str, str]]  # (line number, text, why)
    digest: str  # of the file's bytes: a resumed scan is of the same file


def read(path: Path, field: str = "--file") -> TargetFile:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise BadInput(field, f"{path}: {e.strerror}") from None
    targets, bad, seen = [], [], set()
    for k, line in enumerate(raw.decode(errors="replace").splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        if "://" not in text and any(c in text for c in "/*,"):  # a range, a pattern or a list: never expanded
            bad.append((k, text, "a range, pattern or list: list each target on its own line (nothing is expanded)"))
            continue
        try:
            a = addr.parse(f"{path}:{k}", text)
        except BadInput as e:
            bad.append((k, text, e.detail))
            continue
        if a not in seen:
            seen.add(a)
            targets.append((k, a))
    return TargetFile(targets, bad, hashlib.sha256(raw).hexdigest())


def by_host(targets: list[tuple[int, Address]]) -> list[list[tuple[int, Address]]]:
    """The targets grouped by address, each group in file order, the groups in the order of their first."""
    groups: dict[str, list] = {}
    for k, a in targets:
        groups.setdefault(a.ip, []).append((k, a))
    return list(groups.values())


def refused(result: dict) -> bool:
    f = result.get("failure") or {}
    return f.get("class") == "refused"


def run(targets: list[tuple[int, Address]], scan_one: Callable[[Address, Pace], dict], *, rate: float,
        concurrency: int, backoff_s: float, done: Callable[[int, Address, dict], None],
        stop: threading.Event, interrupted: Callable[[], bool] = lambda: False) -> dict:
    """Scans every target once; done(line, target, result) for each as it finishes (from the scanning
    threads, one at a time). interrupted() true (a Ctrl-C): stop is set, the targets in progress end with
    Stopped (not stored), no other starts. Returns the pace's account: connections started."""
    pace = Pace(rate, stop)
    hosts = Hosts(backoff_s, stop)
    lock = threading.Lock()

    def host(group):
        for k, a in group:
            if stop.is_set():
                return
            hosts.before(a.ip)
            result = scan_one(a, pace)
            hosts.after(a.ip, refused(result))
            with lock:
                done(k, a, result)

    with concurrent.futures.ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = [pool.submit(host, g) for g in by_host(targets)]
        while not all(f.done() for f in futures):
            if interrupted():
                stop.set()
            concurrent.futures.wait(futures, timeout=0.1, return_when=concurrent.futures.FIRST_COMPLETED)
    errors = [f.exception() for f in futures if f.done() and f.exception() is not None]
    from pqbench.scan.tls import Stopped
    for e in errors:
        if not isinstance(e, Stopped):
            raise e
    return {"connections": pace.taken}
