"""Parsing of the CLI's and specs' units: durations, rates, loss, sizes.

Every parser takes the field name so that a bad value produces an error naming it (exit 2).
"""

import math
import re

from pqbench.errors import BadInput

_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

# in milliseconds; "m" is minutes, "ms" milliseconds: a unit is all the letters after its number
_DURATION_UNITS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "min": 60_000.0,
                   "h": 3_600_000.0}
# a combined duration: parts with units, largest first, each unit once ("1h30m", "1m30s", "2s500ms")
_DURATION_PART = re.compile(_NUMBER + r"\s*([a-zA-Zµ]+)\s*")
_RATE_UNITS = {"bit": 1e-6, "kbit": 1e-3, "mbit": 1.0, "gbit": 1000.0}
_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2,
               "ki": 1024, "kib": 1024, "mi": 1024**2, "mib": 1024**2}


def _split(field: str, value, allowed: str):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value), ""
    m = re.fullmatch(r"\s*([-+]?)" + _NUMBER + r"\s*([a-zA-Zµ%]*)\s*", str(value))
    if not m:
        raise BadInput(field, f"{value!r} is not a number with a unit ({allowed})")
    number = float(m.group(2)) * (-1 if m.group(1) == "-" else 1)
    return number, m.group(3).lower()


def _check_finite(field: str, value: float) -> float:
    if not math.isfinite(value):
        raise BadInput(field, f"{value} is not a finite number")
    return value


def duration_ms(field: str, value, *, allow_zero: bool = True, bare: str = "ms") -> float:
    """'31.1ms', '0.2s', '500us', '10m', '1h30m', '1m30s' or a bare number (of `bare` units) -> milliseconds."""
    allowed = f"a number with ns, us, ms, s, m (minutes) or h, or parts like 1h30m or 1m30s; bare numbers are {bare}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value) * _DURATION_UNITS[bare]
    else:
        number = _combined_duration(field, value, allowed, bare)
    ms = _check_finite(field, number)
    if ms < 0 or (ms == 0 and not allow_zero):
        raise BadInput(field, f"{value!r} must be {'>= 0' if allow_zero else '> 0'}")
    return ms


def _combined_duration(field: str, value, allowed: str, bare: str) -> float:
    text = str(value).strip()
    m = re.fullmatch(r"([-+]?)\s*(.*)", text)
    sign, rest = (-1.0 if m.group(1) == "-" else 1.0), m.group(2)
    if re.fullmatch(_NUMBER, rest):
        return sign * float(rest) * _DURATION_UNITS[bare]
    parts, at = [], 0
    for part in _DURATION_PART.finditer(rest):
        if part.start() != at:
            break
        parts.append((float(part.group(1)), part.group(2).lower()))
        at = part.end()
    if parts and at != len(rest) and re.fullmatch(_NUMBER, rest[at:].strip()):
        raise BadInput(field, f"{value!r}: its last part {rest[at:].strip()!r} has no unit ({allowed})")
    if not parts or at != len(rest):
        raise BadInput(field, f"{value!r} is not a number with a unit ({allowed})")
    total, previous = 0.0, math.inf
    for number, unit in parts:
        if unit not in _DURATION_UNITS:
            raise BadInput(field, f"unknown unit {unit!r} in {value!r} ({allowed})")
        if _DURATION_UNITS[unit] >= previous:  # "1m1h", "30s1m", "1s1s": a typo more likely than a sum
            raise BadInput(field, f"{value!r}: the parts of a duration go from the largest unit down, each once "
                                  f"({allowed})")
        previous = _DURATION_UNITS[unit]
        total += number * previous
    return sign * total


def rate_mbit(field: str, value) -> float:
    """'10mbit', '500kbit', '1gbit' or a bare number of Mbit/s -> Mbit/s (must be > 0)."""
    allowed = "a number with bit, kbit, mbit or gbit; bare numbers are mbit"
    number, unit = _split(field, value, allowed)
    if unit not in ("", *_RATE_UNITS):
        raise BadInput(field, f"unknown unit {unit!r} in {value!r} ({allowed})")
    mbit = _check_finite(field, number * _RATE_UNITS.get(unit, 1.0))
    if mbit <= 0:
        raise BadInput(field, f"{value!r} must be a rate > 0")
    return mbit


def probability(field: str, value) -> float:
    """'1%' or a fraction '0.01' -> probability in [0, 1]."""
    allowed = "a percentage like 1% or a fraction in [0, 1]"
    number, unit = _split(field, value, allowed)
    if unit not in ("", "%"):
        raise BadInput(field, f"unknown unit {unit!r} in {value!r} ({allowed})")
    p = _check_finite(field, number / 100 if unit == "%" else number)
    if not 0 <= p <= 1:
        raise BadInput(field, f"{value!r} is outside 0..100 % ({allowed})")
    return p


def fraction(field: str, value, *, minimum: float, maximum: float) -> float:
    """'2%' or '0.02' within minimum..maximum."""
    f = probability(field, value)
    if not minimum <= f <= maximum:
        raise BadInput(field, f"{value!r} is outside {minimum:g}..{maximum:g} ({minimum:.1%}..{maximum:.0%})")
    return f


def number(field: str, value, *, minimum: float, maximum: float) -> float:
    """A plain number (e.g. connections per second) within minimum..maximum."""
    try:
        f = _check_finite(field, float(value))
    except (TypeError, ValueError):
        raise BadInput(field, f"{value!r} is not a number") from None
    if not minimum <= f <= maximum:
        raise BadInput(field, f"{value!r} is outside {minimum:g}..{maximum:g}")
    return f


def size_bytes(field: str, value, *, minimum: int = 0) -> int:
    """'10k', '1M', '1500' -> bytes (k and M are decimal; Ki and Mi binary)."""
    allowed = "a whole number of bytes with optional k, M, Ki or Mi"
    number, unit = _split(field, value, allowed)
    if unit not in _SIZE_UNITS:
        raise BadInput(field, f"unknown unit {unit!r} in {value!r} ({allowed})")
    size = number * _SIZE_UNITS[unit]
    if size != int(size) or size < minimum:
        raise BadInput(field, f"{value!r} must be a whole number >= {minimum} ({allowed})")
    return int(size)


def page_name(size_bytes: int) -> str:
    """Page names: 1000 -> 1k, 1000000 -> 1000k, others in bytes."""
    return f"{size_bytes // 1000}k" if size_bytes % 1000 == 0 else str(size_bytes)


def page(field: str, value) -> str:
    """A page size as the user wrote it ('10k', '1M', 1500) -> the served page's name ('10k', '1000k')."""
    return page_name(size_bytes(field, value, minimum=1))


def integer(field: str, value, *, minimum: int | None = None, maximum: int | None = None) -> int:
    try:
        n = int(str(value), 0) if not isinstance(value, int) else value
    except ValueError:
        raise BadInput(field, f"{value!r} is not a whole number") from None
    if (minimum is not None and n < minimum) or (maximum is not None and n > maximum):
        bounds = f"{minimum if minimum is not None else '-inf'}..{maximum if maximum is not None else 'inf'}"
        raise BadInput(field, f"{n} is outside {bounds}")
    return n
