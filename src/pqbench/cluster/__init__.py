"""Cells measured on several machines with Dask's distributed scheduler: `pqbench worker` on each node
(node.py holds a node's state, worker.py starts it), `pqbench run --cluster` drives them (driver.py), and
security.py carries Dask's TLS options. distributed is an optional dependency (`pqbench[cluster]`): nothing
outside this package imports it."""
