"""Identities that stay unique when stores from several machines meet (`run --cluster`, `run --shard`,
`merge`): a run id carries a random part besides its name and start time, a node is a host name, and a
segment (one node's part in one start of a run) is random. Cell ids are already stable hashes of their
parameters (pqbench.experiment.cells), the same on every node."""

from __future__ import annotations

import datetime
import secrets
import socket


def new_run_id(name: str) -> str:
    """name-YYYYmmdd-HHMMSS-xxxxxx: two runs of one spec started in the same second on two machines differ."""
    return f"{name}-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def new_segment() -> str:
    return secrets.token_hex(8)


def node_name() -> str:
    """This machine as a node: its host name (each worker of a one-machine test cluster runs in its own UTS
    namespace, so its own name)."""
    return socket.gethostname()
