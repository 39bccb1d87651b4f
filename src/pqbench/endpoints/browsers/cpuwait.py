"""A browser's wait for a CPU during a load, as every timing client reports its own (`cpu_wait_ns`, for the
late-sample detector, pqbench.measure.late): the kernel's schedstat run-queue time of every thread of the
browser's processes, summed, read before and after the load."""

from __future__ import annotations

import os

from pqbench.testbed import registry


def waited_ns(root: int) -> int:
    """The run-queue wait so far of root's process tree, ns (threads that ended are not counted)."""
    tree, todo, total = registry.children(), [root], 0
    while todo:
        pid = todo.pop()
        todo += tree.get(pid, [])
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                total += int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return total
