"""Endpoints: the stacks pqbench measures, by name (one folder per stack), behind pqbench.endpoints.base."""

from __future__ import annotations

from pqbench.endpoints.base import Stack
from pqbench.errors import BadInput

DEFAULT_STACK = "openssl"
_STACKS: dict[str, Stack] = {}


def register(stack: Stack) -> None:
    _STACKS[stack.name] = stack


def names() -> list[str]:
    _load()
    return sorted(_STACKS)


def get(name: str, field: str = "stack") -> Stack:
    _load()
    if name not in _STACKS:
        raise BadInput(field, f"{name!r} is not one of {', '.join(sorted(_STACKS))}")
    return _STACKS[name]


def _load() -> None:
    if DEFAULT_STACK not in _STACKS:
        from pqbench.endpoints import openssl  # registers itself
        register(openssl.STACK)
