"""Delivery traces in mahimahi's format: the ones the project ships (traces/, with their attribution)
and users' own files.

One integer a line, milliseconds from the trace's start; each line is one opportunity for one
1500-byte packet; the trace loops with its last time as the period (native/pqlink/README.md,
"Delivery traces"). A bad file is BadInput naming the file and the line, before pqlink sees it
(pqlink refuses it too).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from pqbench.errors import BadInput
from pqbench.paths import PROJECT_ROOT

TRACES_DIR = PROJECT_ROOT / "traces"
SUFFIXES = {"up": ".up", "down": ".down"}  # client->server is the mobile user's uplink
MAX_MS = 10**12  # pqlink's bound (31 years)
BYTES_PER_LINE = 1500


@dataclass(frozen=True)
class TraceInfo:
    lines: int
    period_ms: int  # the last time, at least 1 (a trace of zeros repeats every millisecond)
    mean_mbit: float  # lines x 1500 B over the period


def shipped() -> list[str]:
    """The file names of the traces the project ships (each with its .up/.down suffix)."""
    if not TRACES_DIR.is_dir():
        return []
    return sorted(p.name for p in TRACES_DIR.iterdir() if p.suffix in SUFFIXES.values())


def names() -> list[str]:
    """The shipped traces' names without the direction suffix."""
    return sorted({Path(n).stem for n in shipped()})


def resolve(name_or_path, direction: str | None = None, *, field_name: str = "trace") -> Path:
    """A shipped trace by name ('ATT-LTE-driving-2016.down', or 'ATT-LTE-driving-2016' with
    direction 'up' or 'down' adding the suffix) or a file path. BadInput if it names nothing."""
    text = str(name_or_path).strip()
    if not text:
        raise BadInput(field_name, "an empty trace name (give a file or one of: " + ", ".join(names()) + ")")
    if direction is not None and direction not in SUFFIXES:
        raise ValueError(f"direction {direction!r} is not one of {sorted(SUFFIXES)}")
    candidates = [text]
    if direction is not None and not text.endswith(tuple(SUFFIXES.values())):
        candidates.insert(0, text + SUFFIXES[direction])
    for c in candidates:
        if "/" not in c and (TRACES_DIR / c).is_file():
            return TRACES_DIR / c
    path = Path(text).expanduser()
    if path.is_file():
        return path.resolve()
    hint = f" (for a direction: {text}.up or {text}.down)" if text in names() else ""
    raise BadInput(field_name, f"{text!r} is neither a trace file nor a shipped trace{hint} "
                               f"(shipped: {', '.join(shipped()) or 'none'})")


def canonical(name_or_path, direction: str | None = None, *, field_name: str = "trace") -> str:
    """What a LinkSpec records: a shipped trace's file name, else the file's absolute path."""
    path = resolve(name_or_path, direction, field_name=field_name)
    return path.name if path.parent == TRACES_DIR else str(path)


def validate(path, *, field_name: str = "trace") -> TraceInfo:
    """Reads a trace file; BadInput("trace", "<file> line N: ...") for an empty file, a line that is
    not a whole number, a negative time or a time before the line above."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError as e:
        raise BadInput(field_name, f"{path}: {e.strerror}") from None
    return _validate(str(path), st.st_size, st.st_mtime_ns, field_name)


@functools.lru_cache(maxsize=64)
def _validate(path: str, size: int, mtime_ns: int, field_name: str) -> TraceInfo:
    try:
        with open(path, "rb") as f:
            text = f.read().decode("ascii")
    except UnicodeDecodeError:
        raise BadInput(field_name, f"{path}: not a text file of whole numbers") from None
    except OSError as e:
        raise BadInput(field_name, f"{path}: {e.strerror}") from None
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()  # what follows the newline that ends the last line
    if lines and lines[-1].strip(" \t\r") == "":
        lines.pop()  # one blank last line is allowed, as pqlink allows it
    prev = 0
    for i, raw in enumerate(lines, 1):
        s = raw.strip(" \t\r")
        digits = s[1:] if s.startswith("-") else s
        if not digits.isdigit() or not digits.isascii():
            raise BadInput(field_name, f"{path} line {i}: {s[:40]!r} is not a whole number of milliseconds")
        ms = int(s)
        if ms < 0:
            raise BadInput(field_name, f"{path} line {i}: {ms} is negative (times count from the trace's start)")
        if ms > MAX_MS:
            raise BadInput(field_name, f"{path} line {i}: {ms} ms is too large (at most {MAX_MS})")
        if ms < prev:
            raise BadInput(field_name, f"{path} line {i}: {ms} is before the line above ({prev}): "
                                       "times must not decrease")
        prev = ms
    if not lines:
        raise BadInput(field_name, f"{path} line 1: the trace is empty (it needs at least one delivery time)")
    period = max(prev, 1)
    return TraceInfo(len(lines), period, len(lines) * BYTES_PER_LINE * 8 / period / 1000)


def info(name_or_path, *, field_name: str = "trace") -> TraceInfo:
    """validate() of a shipped name (with its suffix) or a path."""
    return validate(resolve(name_or_path, field_name=field_name), field_name=field_name)


def whitespace_free(path: Path, field_name: str = "trace") -> str:
    """pqlink's control socket splits on whitespace, so a trace path must have none."""
    text = str(path)
    if any(c.isspace() for c in text):
        raise BadInput(field_name, f"{text!r}: pqlink cannot take a trace path with whitespace (copy or rename it)")
    return text


__all__ = ["TRACES_DIR", "TraceInfo", "canonical", "info", "names", "resolve", "shipped", "validate",
           "whitespace_free"]
