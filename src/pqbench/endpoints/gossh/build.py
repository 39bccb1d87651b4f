"""The `gossh` stack's build: build/sshgo/bin/{sshtimer,sshserver} (native/sshgo, golang.org/x/crypto/ssh
with Go 1.27, built by scripts/build-ssh.sh) and what those binaries say they implement."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

from pqbench import paths
from pqbench.errors import MissingCapability

FIX = "run `make` (scripts/build-ssh.sh builds native/sshgo with Go 1.27 from the Go module proxy)"


def home() -> Path:
    return paths.BUILD / "sshgo"


def binary(name: str) -> Path:
    return home() / "bin" / name


def require(name: str) -> Path:
    b = binary(name)
    if not b.exists():
        raise MissingCapability(f"{b} is missing", FIX)
    return b


@functools.lru_cache(maxsize=None)
def _capabilities(name: str, stamp: tuple) -> dict:
    proc = subprocess.run([str(binary(name)), "--capabilities"], capture_output=True, text=True, timeout=60, env={})
    if proc.returncode != 0:
        raise MissingCapability(f"`{name} --capabilities` failed ({proc.returncode}): {proc.stderr.strip()[-300:]}", FIX)
    return json.loads(proc.stdout)


def capabilities(name: str) -> dict | None:
    """{"kex": [...], "hostkeys": [...], "go", "x_crypto"} of the built binary; None when not built."""
    b = binary(name)
    if not b.exists():
        return None
    st = b.stat()
    return _capabilities(name, (st.st_size, st.st_mtime_ns))


def provenance() -> dict:
    try:
        return json.loads((home() / "PROVENANCE.json").read_text())
    except (OSError, ValueError):
        return {}
