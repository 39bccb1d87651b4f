"""`pqbench serve`: the server half of a rig on a machine the user controls. One port per certificate
chain (TLS) and per host key (SSH), every key exchange the server stack has in this build, the standard
pages; a manifest (JSON) says what is where, for a target entry (`manifest = "…"`) or a person to read.

It binds only the address given: a wildcard address must be asked for (`--any-address`)."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime
import hashlib
import ipaddress
import json
import os
from pathlib import Path

from pqbench import axis, endpoints
from pqbench.algorithms import catalog
from pqbench.algorithms.chain_axes import credential_key
from pqbench.endpoints.base import DEFAULT_WORKERS, STUDY_PAGES, Serving, Site
from pqbench.errors import BadInput, MissingCapability
from pqbench.measure.rig import Rig, credentials
from pqbench.testbed import LinkSpec, RealPath

WILDCARDS = ("0.0.0.0", "::", "*", "")
SERVER_STACKS = {"nginx": "openssl", "s2n": "s2n", "rustls": "rustls", "gotls": "gotls"}  # --stack: the TLS server
SSH_STACKS = ("openssh", "gossh")


@dataclasses.dataclass
class ServePlan:
    address: str
    directory: Path
    sigs: list[str]
    stack: str = "nginx"
    first_port: int = 4433
    hostkeys: list[str] = dataclasses.field(default_factory=list)
    ssh_stack: str = "openssh"
    ssh_port: int = 2222
    workers: int = DEFAULT_WORKERS
    netns: str | None = None
    any_address: bool = False
    # The registered axes' values every TLS port serves with (pqbench.axis: those that make a port of their own
    # and ask nothing of the client: the server's groups, the chain's shape …), as given; the others at defaults.
    axes: dict = dataclasses.field(default_factory=dict)


def check_address(address: str, any_address: bool) -> str:
    if address in WILDCARDS:
        if not any_address:
            raise BadInput("--address", f"{address or '(empty)'} listens on every address of the machine: pass "
                                        "--any-address to mean it, or give the one address to serve on")
        return "0.0.0.0"
    try:
        return str(ipaddress.IPv4Address(address))
    except ValueError:
        raise BadInput("--address", f"{address!r} is not an IPv4 address of this machine") from None


def groups_for(stack: str, protocol: str, sig: str) -> list[str]:
    """Every key exchange the stack's server has in this build, in the catalog's order (hybrids first)."""
    caps = endpoints.get(stack).capabilities()
    names = catalog.names_of("kem", protocol)
    return [n for n in dict.fromkeys(names) if caps.unsupported(n, sig, "server") is None]


def servings(plan: ServePlan) -> dict[str, Serving]:
    """What each server stack serves: a port per chain / host key, every key exchange it has."""
    out = {}
    tls = SERVER_STACKS[plan.stack]
    if plan.sigs:
        groups = groups_for(tls, "tls", plan.sigs[0])
        if not groups:
            raise MissingCapability(f"the {plan.stack} server has no key exchange in this build", "run `make`")
        values = {**{a.name: a.default for a in axis.registered()}, **plan.axes}
        _check_axes(plan, tls, {**values, "kex": groups[0], "sig": plan.sigs[0], "mode": "handshake"})
        chains = [credentials("tls", s, plan.directory / "certs" / s, credential_key(values)) for s in plan.sigs]
        fields = axis.site_fields(axis.site_key(values))
        out[tls] = Serving(plan.directory / "server" / tls,
                           [Site(plan.first_port + i, c, **fields) for i, c in enumerate(chains)],
                           groups, dict(STUDY_PAGES), plan.workers)
    if plan.hostkeys:
        keys = [credentials("ssh", h, plan.directory / "keys" / h) for h in plan.hostkeys]
        out[plan.ssh_stack] = Serving(plan.directory / "server" / plan.ssh_stack,
                                      [Site(plan.ssh_port + i, k) for i, k in enumerate(keys)],
                                      groups_for(plan.ssh_stack, "ssh", plan.hostkeys[0]), {}, plan.workers)
    return out


def _check_axes(plan: ServePlan, stack: str, values: dict) -> None:
    """The server stack has what the axes given ask of a server (exit 3 naming what is missing)."""
    caps = endpoints.get(stack).capabilities()
    missing = [axis.missing(f, caps) for f in axis.needs(values, "server") if f not in caps.features]
    why = missing[0] if missing else axis.problems(values, caps, "server")
    if why:
        given = " ".join(axis.get(n).command_option for n in plan.axes)
        able = [name for name, st in SERVER_STACKS.items() if not _lacks(st, values)]
        raise MissingCapability(f"{given}: the {plan.stack} server: {why}",
                                f"serve with --stack {' or '.join(able)}" if able else "serve without them")


def _lacks(stack: str, values: dict) -> bool:
    caps = endpoints.get(stack).capabilities()
    return any(f not in caps.features for f in axis.needs(values, "server"))


def manifest(plan: ServePlan, served: dict[str, Serving]) -> dict:
    """Ports, chains, the root certificates to trust (paths relative to the manifest), SSH host key
    fingerprints: what a target entry or a person needs to reach each port."""
    def rel(p) -> str:
        return os.path.relpath(p, plan.directory)
    tls = served.get(SERVER_STACKS[plan.stack])
    ssh = served.get(plan.ssh_stack)
    return {
        "pqbench_serve": 1, "address": plan.address, "netns": plan.netns,
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "tls": [{"port": s.port, "sig": s.chain.sig, "stack": plan.stack, "server_name": s.chain.server_name,
                 "ca": rel(s.chain.root_cert), "bytes_sent": s.chain.sent_bytes, "der_sizes": s.chain.der_sizes,
                 "groups": tls.groups} for s in tls.sites] if tls else [],
        "ssh": [{"port": s.port, "sig": s.chain.sig, "stack": plan.ssh_stack, "host_key": rel(s.chain.host_pub),
                 "fingerprint": fingerprint(s.chain.host_pub), "kex": ssh.groups} for s in ssh.sites] if ssh else [],
        "pages": {f"/{k}": v for k, v in STUDY_PAGES.items()} if tls else {},
        **({"axes": plan.axes} if plan.axes else {}),  # what every TLS port serves with
    }


def fingerprint(pub: Path) -> str:
    """OpenSSH's SHA256 fingerprint of a public key file (`ssh-keygen -lf`'s form)."""
    blob = base64.b64decode(Path(pub).read_text().split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


@contextlib.contextmanager
def serving(plan: ServePlan):
    """Starts the servers (they answer once this yields the manifest) and stops them on exit."""
    plan.directory.mkdir(parents=True, exist_ok=True)
    served = servings(plan)
    sides = {"server": plan.netns, "client": plan.netns} if plan.netns else None
    path = RealPath(netns=sides, bind=plan.address)
    # the server half of a rig; its TLS stack's own client only warms the server workers up (Rig._warm)
    warm = [SERVER_STACKS[plan.stack]] if plan.sigs else []
    with Rig.pairs(served, warm, LinkSpec(), path=path):
        m = manifest(plan, served)
        # whole or not at all: a script (or a test) waiting for the file reads it as soon as it is there
        tmp = plan.directory / "manifest.json.tmp"
        tmp.write_text(json.dumps(m, indent=2) + "\n")
        os.replace(tmp, plan.directory / "manifest.json")
        yield m
