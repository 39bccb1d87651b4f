"""Backend `netem`: a veth pair with the kernel's netem qdisc on each end (where the kernel has it).

The LinkSpec means the same as with pqlink: each end's netem shapes what that end sends, so the
client end carries client->server. netem's `limit` counts every packet inside the qdisc, including
the ones only being delayed, so it is set to the queue bound plus what the delay holds in flight.
"""

from __future__ import annotations

import json
import math

from pqbench.errors import MeasurementFailed, MissingCapability
from pqbench.testbed import netns
from pqbench.testbed.linkspec import Direction, LinkSpec

# Without a rate, in-flight packets are estimated at this speed for the limit.
_UNLIMITED_BPS_FOR_LIMIT = 10e9
# netem sorts by send time, so jitter reorders; with a rate it queues behind the previous
# packet instead. A rate this high keeps the order at a negligible serialisation cost.
_ORDER_KEEPING_RATE = "100gbit"


def _pct(p: float) -> str:
    return f"{p * 100:.6g}%"


def _us(ms: float) -> str:
    return f"{round(ms * 1000)}us"


def netem_limit(d: Direction, mtu: int) -> int:
    """Queue bound plus the packets the delay holds in flight at the rate (or a fast link)."""
    bps = d.rate_mbit * 1e6 if d.rate_mbit is not None else _UNLIMITED_BPS_FOR_LIMIT
    in_flight = math.ceil(bps * (d.delay_ms + d.jitter_ms) / 1e3 / (8 * mtu))
    return d.queue_packets + in_flight


def refuse_pqlink_only(spec: LinkSpec) -> None:
    """netem here cannot replay traces, run CoDel/PIE behind it or mark ECN: say so (exit 3) rather
    than emulate a different link."""
    what = spec.needs_pqlink
    if what:
        raise MissingCapability(f"the netem backend cannot emulate {what}",
                                "use --backend pqlink (it replays traces and runs CoDel and PIE)")


def netem_args(d: Direction, mtu: int, seed: int | None = None) -> list[str]:
    """The `netem ...` options for one direction (after `tc qdisc replace dev X root`)."""
    if d.trace is not None or d.aqm.kind != "droptail" or d.aqm.ecn:
        raise MissingCapability("the netem backend cannot emulate a delivery trace, CoDel, PIE or ECN marking",
                                "use --backend pqlink (it replays traces and runs CoDel and PIE)")
    args = ["netem", "limit", str(netem_limit(d, mtu)), "delay", _us(d.delay_ms)]
    if d.jitter_ms:
        args.append(_us(d.jitter_ms))  # no distribution table: uniform in [-jitter, +jitter]
    loss = d.loss
    if loss.model == "bernoulli":
        args += ["loss", "random", _pct(loss.p)]
    elif loss.model == "gemodel":
        args += ["loss", "gemodel", _pct(loss.p), _pct(loss.r), _pct(loss.one_minus_h), _pct(loss.one_minus_k)]
    if d.rate_mbit is not None:
        args += ["rate", f"{round(d.rate_mbit * 1e6)}bit"]
        if d.overhead_bytes:
            args.append(str(d.overhead_bytes))
    elif d.jitter_ms and not d.reorder:
        args += ["rate", _ORDER_KEEPING_RATE]
    if seed is not None:
        args += ["seed", str(seed)]
    return args


def qdisc_commands(spec: LinkSpec, client_ns: str, client_dev: str, server_ns: str, server_dev: str,
                   *, verb: str = "replace", with_seed: bool = False) -> list[list[str]]:
    """The tc command lines that put spec on the two veth ends. with_seed (tc >= 6.3 knows
    `seed`) gives each direction its own reproducible seed derived from spec.seed."""
    seeds = (spec.seed, (spec.seed + 1) % 2**64) if with_seed else (None, None)
    return [
        ["tc", "-n", client_ns, "qdisc", verb, "dev", client_dev, "root",
         *netem_args(spec.client_to_server, spec.mtu, seeds[0])],
        ["tc", "-n", server_ns, "qdisc", verb, "dev", server_dev, "root",
         *netem_args(spec.server_to_client, spec.mtu, seeds[1])],
    ]


def tc_knows_seed() -> bool:
    cp = netns.run(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "help"], check=False)
    return "seed" in (cp.stdout + cp.stderr)


OFFLOADS = ["rx", "off", "tx", "off", "tso", "off", "gso", "off", "gro", "off"]


def kernel_has_netem(probe_ns: str) -> bool:
    """Tries netem on the loopback device of an existing (scratch) namespace."""
    cp = netns.run(["tc", "-n", probe_ns, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"], check=False)
    if cp.returncode == 0:
        netns.run(["tc", "-n", probe_ns, "qdisc", "del", "dev", "lo", "root"], check=False)
        return True
    return False


def make_veth_pair(tb) -> None:
    """The veth pair joining the namespaces, offloads off. It is created in the client namespace
    directly, so no device ever appears on the host."""
    netns.ip("link", "add", tb.client_dev, "type", "veth", "peer", "name", tb.server_dev,
             "netns", tb.server_ns, netns=tb.client_ns)
    for ns, dev in ((tb.client_ns, tb.client_dev), (tb.server_ns, tb.server_dev)):
        netns.run(netns.exec_argv(ns, ["ethtool", "-K", dev, *OFFLOADS]), check=False)


class NetemBackend:
    name = "netem"

    def __init__(self):
        self.tb = None
        self.with_seed = False

    def create(self, tb, spec: LinkSpec, *, detached: bool) -> tuple[str, str]:
        refuse_pqlink_only(spec)
        self.tb = tb
        make_veth_pair(tb)
        self.with_seed = tc_knows_seed()
        for cmd in qdisc_commands(spec, tb.client_ns, tb.client_dev, tb.server_ns, tb.server_dev, verb="add",
                                  with_seed=self.with_seed):
            netns.run(cmd)
        return tb.client_dev, tb.server_dev

    def reconfigure(self, spec: LinkSpec) -> None:
        refuse_pqlink_only(spec)
        tb = self.tb
        for cmd in qdisc_commands(spec, tb.client_ns, tb.client_dev, tb.server_ns, tb.server_dev, verb="change",
                                  with_seed=self.with_seed):
            netns.run(cmd)

    def counters(self) -> dict:
        tb = self.tb
        return {"client_to_server": self._side(tb.client_ns, tb.client_dev),
                "server_to_client": self._side(tb.server_ns, tb.server_dev)}

    @staticmethod
    def _side(ns: str, dev: str) -> dict:
        link = json.loads(netns.ip("-s", "-j", "link", "show", "dev", dev, netns=ns).stdout)[0]
        qd = json.loads(netns.run(["tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev", dev]).stdout or "[]")
        drops = sum(q.get("drops", 0) for q in qd)
        tx = link["stats64"]["tx"]
        return {"packets": tx["packets"], "bytes": tx["bytes"], "offered_packets": tx["packets"] + drops,
                "lost": None, "queue_drops": None, "drops": drops, "lateness_us": None}

    def reset_counters(self) -> None:
        raise MeasurementFailed("the netem backend cannot reset kernel counters; take differences instead")

    def destroy(self) -> dict | None:
        final = None
        if self.tb is not None and netns.exists(self.tb.client_ns):
            try:
                final = self.counters()
            except (MeasurementFailed, json.JSONDecodeError, IndexError, KeyError):
                final = None
        return final  # the veth pair goes with the namespaces


class VethBackend(NetemBackend):
    """No emulation at all: the bare veth pair, as a reference for the emulator's own cost
    (bench/bench_pqlink.py). Only an all-default LinkSpec makes sense with it."""

    name = "veth"

    def create(self, tb, spec: LinkSpec, *, detached: bool) -> tuple[str, str]:
        self.tb = tb
        make_veth_pair(tb)
        return tb.client_dev, tb.server_dev

    def reconfigure(self, spec: LinkSpec) -> None:
        raise MeasurementFailed("the veth reference backend does not emulate anything")
