"""Shards: a deterministic part K of N of a run's cells, for machines without a shared engine (Slurm job
arrays, Kubernetes indexed Jobs). Each shard measures into its own store; `pqbench merge` joins them.

The unit of a shard is a link condition: every cell at one condition is in the same shard, so the
comparisons the report makes between algorithms (and stacks) at that condition are measured on one
machine, in one interleaved order, with the same loss pattern — they stay paired. A condition here is
everything of a cell's parameters except its algorithms (kex, sig) and its stacks (stack, server,
client, and the protocol, which follows from the stacks): the emulated link (scenario, RTT, loss and its
model, rate, MTU), the TCP knobs (initcwnd, congestion control), the target, and the workload (mode,
page, requests, pad). The workload is part of it because the report compares algorithms within one
workload, never across workloads; keeping it in makes groups smaller, so shards balance better.

Groups are dealt out by size, largest first (ties by the condition itself, so the deal never depends on
the cells' order), each to the shard with the fewest cells so far (ties: the lowest K). Every cell lands
in exactly one shard for any N; when N exceeds the number of conditions, the shards left over are
empty (they measure nothing, and merge adds nothing).
"""

from __future__ import annotations

import json
import re

from pqbench.errors import BadInput

# Parameters that make up the algorithm side of a comparison; the rest is the condition.
COMPARED = ("kex", "sig", "stack", "server", "client", "protocol")

_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


def parse(text: str) -> tuple[int, int]:
    """"K/N" -> (K, N) with 1 <= K <= N."""
    m = _SHARD.fullmatch(text or "")
    if not m:
        raise BadInput("--shard", f"{text!r} is not K/N: give the part and the number of parts, e.g. 1/4 "
                                  "(K from 1 to N)")
    k, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= k <= n:
        raise BadInput("--shard", f"{text!r}: K must be from 1 to N and N at least 1, e.g. 1/4 … 4/4 "
                                  "(a job array's 0-based index is K - 1)")
    return k, n


def condition_key(cell) -> str:
    """The cell's link condition and workload as a stable text (equal for every algorithm and stack)."""
    params = cell.params() if hasattr(cell, "params") else dict(cell)
    return json.dumps({k: v for k, v in params.items() if k not in COMPARED}, sort_keys=True, default=str)


def assignment(cells: list, n: int) -> dict[str, int]:
    """Condition key -> its shard (1 … n): groups largest first, each to the shard with the fewest cells."""
    if n < 1:
        raise BadInput("--shard", f"N must be at least 1, not {n}")
    sizes: dict[str, int] = {}
    for cell in cells:
        key = condition_key(cell)
        sizes[key] = sizes.get(key, 0) + 1
    load = [0] * n
    shard_of = {}
    for key in sorted(sizes, key=lambda key: (-sizes[key], key)):
        k = min(range(n), key=lambda i: (load[i], i))
        shard_of[key] = k + 1
        load[k] += sizes[key]
    return shard_of


def part(cells: list, k: int, n: int) -> list:
    """Shard k of n: the cells of the conditions dealt to it, in their given order (possibly none)."""
    if not 1 <= k <= n:
        raise BadInput("--shard", f"{k}/{n}: K must be from 1 to N")
    shard_of = assignment(cells, n)
    return [c for c in cells if shard_of[condition_key(c)] == k]
