"""A Dask cluster on this one machine: a scheduler on loopback and pqbench workers, each in its own UTS
namespace so each has its own host name (its node name in the store). What the tests and the cluster
benchmark measure on; on real machines start `dask scheduler` and `pqbench worker` by hand (README)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from pqbench.testbed import lifeline

BIN = Path(sys.executable).parent  # the venv's dask and pqbench


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalCluster:
    """A scheduler and named workers, their logs in log_dir; stop() ends them all (workers close their testbeds)."""

    def __init__(self, log_dir: Path, tls: list[str] = ()):
        """tls: pqbench's TLS options (--tls-ca-file CA --tls-cert PEM --tls-key PEM), also the scheduler's."""
        self.logs, self.port = Path(log_dir), free_port()
        self.logs.mkdir(parents=True, exist_ok=True)
        self.address = f"{'tls' if tls else 'tcp'}://127.0.0.1:{self.port}"
        self.workers: dict[str, subprocess.Popen] = {}
        self.scheduler = lifeline.popen([BIN / "dask", "scheduler", "--host", "127.0.0.1", "--port", str(self.port),
                                           "--protocol", "tls" if tls else "tcp", "--no-dashboard", *tls],
                                          stdout=subprocess.DEVNULL, stderr=open(self.logs / "scheduler.log", "w"))

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def worker(self, name: str, *args: str, env: dict | None = None) -> subprocess.Popen:
        """A pqbench worker whose host name is name (unshare --uts, then exec: the pid is the worker's)."""
        proc = lifeline.popen(["unshare", "--uts", "sh", "-c", f'hostname {name} && exec "$0" worker "$@"',
                                 BIN / "pqbench", self.address, *args], stdout=subprocess.DEVNULL,
                                stderr=open(self.logs / f"{name}.log", "w"), env={**os.environ, **(env or {})})
        self.workers[name] = proc
        return proc

    def wait_for(self, count: int, timeout: float = 60) -> None:
        """Until count workers have registered with the scheduler."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if sum("Registered to" in (self.logs / f"{n}.log").read_text() for n in self.workers) >= count:
                return
            time.sleep(0.3)
        raise RuntimeError(f"{count} workers did not register: " + "\n".join(
            (self.logs / f"{n}.log").read_text()[-2000:] for n in self.workers))

    def run(self, spec: Path, db: Path, *extra: str, **kw) -> subprocess.Popen:
        """`pqbench run SPEC --cluster` against this cluster (stdout and stderr piped, as text)."""
        return lifeline.popen([BIN / "pqbench", "run", str(spec), "--db", str(db), "--cluster", self.address, *extra],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)

    def stop(self) -> None:
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.workers.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=60)
        self.scheduler.terminate()
        self.scheduler.wait(timeout=30)
