"""Endpoints: the stacks pqbench measures, by name (one folder per stack), behind pqbench.endpoints.base."""

from __future__ import annotations

import threading
from typing import Mapping

from pqbench import axis
from pqbench import protocol as proto
from pqbench.endpoints.base import Stack
from pqbench.errors import BadInput
from pqbench.transport import DEFAULT as DEFAULT_TRANSPORT, TRANSPORTS

DEFAULT_STACK = proto.get(None).default_pair[0]
# One folder per stack under pqbench/endpoints/, each exporting STACK.
STACK_MODULES = ("openssl", "s2n", "rustls", "boringssl", "gotls", "openssh", "gossh", "quicgo", "dtlsgo", "dtlsboring",
                 "strongswan", "chromium", "firefox")
_STACKS: dict[str, Stack] = {}
_TARGETS: dict[str, Stack] = {}  # servers pqbench did not start (endpoints/remote): by get(), not in names()
_imported = False
_import_lock = threading.Lock()
_importing: int | None = None  # the thread importing the stacks (a stack's module may ask while imported)


def register(stack: Stack) -> None:
    _STACKS[stack.name] = stack


def names() -> list[str]:
    _import_stacks()
    return sorted(_STACKS)


def get(name: str, field: str = "stack") -> Stack:
    _import_stacks()
    if name in _TARGETS:
        return _TARGETS[name]
    if name not in _STACKS:
        raise BadInput(field, f"{name!r} is not one of {', '.join(sorted(_STACKS))}")
    return _STACKS[name]


def client_priority(name: str) -> str:
    """How the client stack name's timing process is scheduled (Client.priority); a name no longer known (an old
    store's) as measured processes are."""
    _import_stacks()
    stack = _STACKS.get(name) or _TARGETS.get(name)
    return getattr(stack.client, "priority", "measured") if stack is not None else "measured"


def load_client(protocol: str) -> str:
    """The stack whose load generator offers load in protocol (pqload for TLS, sshload for SSH)."""
    _import_stacks()
    return next(s.name for s in sorted(_STACKS.values(), key=lambda s: s.name != proto.get(protocol).default_pair[1])
                if s.protocol == protocol and s.load is not None)


def target_stack(protocol: str) -> Stack:
    """The server endpoint of a target (a server pqbench did not start) speaking protocol; exit 3 for a protocol
    pqbench measures only against servers it starts (DTLS)."""
    _import_stacks()
    found = next((s for s in _TARGETS.values() if s.protocol == protocol), None)
    if found is None:
        from pqbench.errors import MissingCapability
        label = proto.get(protocol).label
        raise MissingCapability(f"no {label} target: pqbench measures {label} only against the servers it starts",
                                f"measure {label} without --target (targets: "
                                f"{', '.join(sorted({proto.get(s.protocol).label for s in _TARGETS.values()}))})")
    return found


def unsupported(server: str, client: str, kex: str, sig: str, mode: str, values: Mapping | None = None) -> str | None:
    """Why the server stack and the client stack, as built here, cannot measure kex with sig in this mode,
    or None: each stack answers for its own role. values: the cell's registered axes (pqbench.axis; absent
    ones at their defaults): both stacks must speak its transport (pqbench.transport) in that mode, have the
    features its set values need (Axis.server_feature, client_feature) and pass the axes' own checks (the
    groups of an offer, the range of Initial sizes …); then each must have kex with sig in its role."""
    if get(server).protocol != get(client).protocol:
        return f"the {server} server and the {client} client speak different protocols"
    from pqbench.endpoints.remote import UNKNOWN_SIG
    if sig == UNKNOWN_SIG:  # a target's own chain: only the key exchange can be checked, with a signature
        sig = proto.get(get(server).protocol).classical[1]  # every stack has; the chain itself is the target's business
    values = {**(values or {}), "kex": kex, "sig": sig, "mode": mode}
    transport = values.get("transport") or DEFAULT_TRANSPORT
    label = TRANSPORTS[transport].label
    for role, name in (("server", server), ("client", client)):
        caps = get(name, role).capabilities()
        if transport not in caps.transports:
            return f"the {name} {role} has no {label} (it speaks {', '.join(TRANSPORTS[t].label for t in caps.transports)})"
        modes = caps.transport_modes.get(transport, caps.modes)
        if mode not in modes:
            return f"the {name} {role} has no {mode} mode" + (f" over {label}" if transport != DEFAULT_TRANSPORT else "")
        for feature in axis.needs(values, role):
            if feature not in caps.features:
                return f"{name} {role}: {axis.missing(feature, caps)}"
        why = axis.problems(values, caps, role) or caps.unsupported(kex, sig, role)
        if why:
            return f"{name} {role}: {why}"
    return None


def default_pair(protocol: str, sig: str) -> tuple[str, str]:
    """The default pair for a protocol and signature (its record's; for SSH, OpenSSH's sshd measured by
    sshtimer): ML-DSA host keys exist only in golang.org/x/crypto/ssh, so those go Go <-> Go. A fixed rule,
    not this build's capabilities: a spec's cells (and their ids) must not depend on what is built."""
    from pqbench.endpoints.sshkeys import MLDSA
    if sig in MLDSA:  # SSH's names of ML-DSA host keys
        return "gossh", "gossh"
    return proto.get(protocol).default_pair


def _import_stacks() -> None:
    global _imported, _importing
    if _imported or _importing == threading.get_ident():  # done, or asked again by a stack being imported
        return
    # once, under a lock: a population scan's threads ask at the same time, and one that saw the flag set
    # before the stacks were registered found none ("'openssl' is not one of ")
    with _import_lock:
        if _imported:
            return
        _importing = threading.get_ident()
        try:
            import importlib
            for module in STACK_MODULES:
                register(importlib.import_module(f"pqbench.endpoints.{module}").STACK)
            from pqbench.endpoints.remote import STACKS
            _TARGETS.update({s.name: s for s in STACKS})
            _imported = True
        finally:
            _importing = None
