"""`pqbench worker SCHEDULER`: this machine as a measuring node of a Dask cluster, until Ctrl-C or SIGTERM
(which close its testbeds). The worker has a `pqbench_node` resource of `slots` and as many threads, so the
scheduler never gives it more cells at once than its slots."""

from __future__ import annotations

import asyncio
import os
import signal

from pqbench.cluster.security import engine
from pqbench.errors import BadInput, MissingCapability
from pqbench.measure import identity


def serve(scheduler: str, *, slots: int = 1, name: str | None = None, security=None, say=print) -> int:
    if os.geteuid() != 0:
        raise MissingCapability("a pqbench worker measures in network namespaces and needs root",
                                "run it as root (e.g. sudo pqbench worker ...)")
    if scheduler.startswith("tls://") and security is None:
        raise BadInput("SCHEDULER", f"{scheduler} speaks TLS: give --tls-ca-file, --tls-cert and --tls-key")
    distributed = engine()
    from pqbench.cluster.node import RESOURCE, NodePlugin  # (imports distributed)
    node = identity.node_name()

    async def run() -> None:
        async with distributed.Worker(scheduler, nthreads=slots, resources={RESOURCE: slots}, name=name or node,
                                      plugins=(NodePlugin(slots, node),), security=security) as worker:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, lambda: asyncio.ensure_future(worker.close()))
            say(f"pqbench worker {name or node} (node {node}, {slots} slot(s)) at {worker.address}, "
                f"scheduler {scheduler}; Ctrl-C stops it")
            await worker.finished()

    asyncio.run(run())
    return 0
