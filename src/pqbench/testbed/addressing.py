"""Picks a private /16 that nothing on this machine uses (host, other namespaces, other runs)."""

from __future__ import annotations

import ipaddress
import json

from pqbench.errors import MissingCapability
from pqbench.testbed import netns

# 10.100.0.0/16 ... 10.254.0.0/16 first (rarely used by VPNs and container runtimes), then 172.16/12.
CANDIDATES = [ipaddress.ip_network(f"10.{b}.0.0/16") for b in range(100, 255)] + \
             [ipaddress.ip_network(f"172.{b}.0.0/16") for b in range(16, 32)]


def _networks_in(ns: str | None) -> list[ipaddress.IPv4Network]:
    """Every IPv4 network seen in addresses and routes of the host or of namespace ns."""
    nets = []
    addrs = netns.ip("-j", "addr", "show", netns=ns, check=False)
    try:
        for link in json.loads(addrs.stdout or "[]"):
            for a in link.get("addr_info", []):
                if a.get("family") == "inet":
                    nets.append(ipaddress.ip_interface(f"{a['local']}/{a.get('prefixlen', 32)}").network)
                    if a.get("address"):  # the peer of a point-to-point address
                        nets.append(ipaddress.ip_network(a["address"]))
    except (json.JSONDecodeError, ValueError):
        pass
    routes = netns.ip("-j", "route", "show", "table", "all", netns=ns, check=False)
    try:
        for r in json.loads(routes.stdout or "[]"):
            dst = r.get("dst")
            if dst and dst != "default" and ":" not in dst:
                try:
                    nets.append(ipaddress.ip_network(dst, strict=False))
                except ValueError:
                    pass
    except json.JSONDecodeError:
        pass
    return nets


def used_networks(claimed: list[str]) -> list[ipaddress.IPv4Network]:
    used = _networks_in(None)
    for ns in netns.list_names():
        used += _networks_in(ns)
    used += [ipaddress.ip_network(c) for c in claimed]
    return used


def first_free(used: list[ipaddress.IPv4Network]) -> ipaddress.IPv4Network | None:
    for cand in CANDIDATES:
        if not any(cand.overlaps(u) for u in used):
            return cand
    return None


def pick_subnet(claimed: list[str]) -> ipaddress.IPv4Network:
    """The first candidate /16 overlapping nothing in use; claimed are other testbeds' subnets."""
    free = first_free(used_networks(claimed))
    if free is not None:
        return free
    raise MissingCapability("no free private /16 for the testbed",
                            "remove leftovers with `pqbench net clean` or free a 10.100-254.0.0/16 range")
