"""A browser's wait for a CPU during a load, as every timing client reports its own (`cpu_wait_ns`, for the
late-sample detector, pqbench.measure.late): the kernel's schedstat run-queue time of every thread of the
browser's processes, summed, read before and after the load."""

from __future__ import annotations

import os


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            tree.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    return tree


def waited_ns(root: int) -> int:
    """The run-queue wait so far of root's process tree, ns (threads that ended are not counted)."""
    tree, todo, total = _children(), [root], 0
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
