"""The axes as options of the single-cell commands: each registered axis (pqbench.axis) is `--NAME VALUE` (a
BOOLEAN axis a flag, --no-NAME its opposite) on every command that adds them, made from its record, so a new
axis is an option with no edit to a command. The path's axes (MTU, initcwnd, congestion control) are the link's options
(pqbench.commands.net), as they are on every command with a link.
"""

from __future__ import annotations

import argparse

from pqbench import axis
from pqbench.experiment import axes as registry  # noqa: F401  (fills the registry)


def _offered(own: tuple[str, ...], timing_client: bool, protocol: str | None, sites_only: bool) -> list[axis.Axis]:
    """The axes a command takes as generated options: all but the path's, those it names with its own, those
    that do not apply to its protocol (None: a command of every protocol), where it has servers alone (`serve`)
    those that make no port of their own, and, where its client is a load generator or none (no timing client),
    those that ask something of the client or apply only beside a value of one that does (QUIC's Retry)."""
    return [a for a in axis.registered() if not a.path and a.name not in own
            and (protocol is None or a.for_protocol(protocol)) and (a.site or not sites_only)
            and (timing_client or a.for_load_generator)]


def add(p: argparse.ArgumentParser, own: tuple[str, ...] = (), timing_client: bool = True,
        protocol: str | None = None, sites_only: bool = False) -> None:
    """Adds an option per axis to a command's parser; own: axes the command takes through options of its own
    (handshake's certificate compression is two: what the client offers and whether the server compresses);
    timing_client: False for a command whose client is its protocol's load generator (`load`); protocol: the
    one protocol the command measures (`ssh`), None for a command of every protocol; sites_only: a command of
    servers alone (`serve`)."""
    offered = _offered(own, timing_client, protocol, sites_only)
    if not offered:
        return
    group = p.add_argument_group("axes", "one value of what a spec's [axes] sweeps (docs/spec.md): " +
                                 ("every port serves with these values" if sites_only else
                                  "the cell is a spec's cell with these values"))
    for a in offered:
        text = a.help or f"one of: {a.allowed}"
        if a.sql == "BOOLEAN":  # --NAME or --no-NAME (a DTLS cookie is on unless asked off)
            group.add_argument(a.command_option, dest=a.name, action=argparse.BooleanOptionalAction, default=None,
                               help=text)
        else:
            group.add_argument(a.command_option, dest=a.name, metavar=a.name.upper(), help=text)


def _value(a: axis.Axis, text: str):
    """The command line's text as a spec's value would be typed (an INTEGER axis's digits are a number)."""
    if a.sql == "INTEGER" and text.strip().lstrip("-").isdigit():
        return int(text)
    return text


def values(args, own: tuple[str, ...] = (), timing_client: bool = True, protocol: str | None = None,
           sites_only: bool = False) -> dict:
    """The axes given on the command line, each parsed by its record (errors name the option), in the registry's
    order; an option not given is left out (the cell takes the axis's default)."""
    out = {}
    for a in _offered(own, timing_client, protocol, sites_only):
        given = getattr(args, a.name, None)
        if given is None:
            continue
        out[a.name] = a.parse(a.command_option, given if isinstance(given, bool) else _value(a, given))
    return out
