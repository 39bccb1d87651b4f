"""The `gotls` stack's build: build/gotls/bin/tlsgo (native/tlsgo, Go 1.27 crypto/tls, built by
scripts/build-go.sh) and what that binary says it can do."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

from pqbench import paths
from pqbench.errors import MissingCapability

FIX = "run `make` (scripts/build-go.sh builds native/tlsgo with Go 1.27 from the Go module proxy)"


def home() -> Path:
    return paths.BUILD / "gotls"


def binary() -> Path:
    return home() / "bin" / "tlsgo"


def require() -> Path:
    b = binary()
    if not b.exists():
        raise MissingCapability(f"{b} is missing", FIX)
    return b


@functools.lru_cache(maxsize=None)
def _capabilities(stamp: tuple) -> dict:
    proc = subprocess.run([str(binary()), "capabilities"], capture_output=True, text=True, timeout=60, env={})
    if proc.returncode != 0:
        raise MissingCapability(f"`tlsgo capabilities` failed ({proc.returncode}): {proc.stderr.strip()[-300:]}", FIX)
    return json.loads(proc.stdout)


def capabilities() -> dict | None:
    """What the built binary found by trying each group and key type in a handshake in memory
    (groups, sigs, the client's signature_algorithms(_cert)); None when it is not built."""
    b = binary()
    if not b.exists():
        return None
    st = b.stat()
    return _capabilities((st.st_size, st.st_mtime_ns))


def provenance() -> dict:
    """Go version and the checksums of the toolchain and every module, as the build recorded them."""
    try:
        return json.loads((home() / "PROVENANCE.json").read_text())
    except (OSError, ValueError):
        return {}


def group_name(kex: str) -> str | None:
    """tlsgo's name for the catalog's key exchange `kex` (matched by TLS code point), or None when this
    build's crypto/tls did not negotiate it."""
    from pqbench.algorithms import catalog
    try:
        alg = catalog.find(kex, "kem")
    except Exception:
        return None
    caps = capabilities() or {}
    for g in caps.get("groups", []):
        if g["ok"] and alg.codepoint is not None and int(g["codepoint"], 16) == alg.codepoint:
            return g["name"]
    return None
