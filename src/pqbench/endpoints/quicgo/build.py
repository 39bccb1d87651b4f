"""The `quicgo` stack's build: build/quicgo/bin/quicgo (native/quicgo: quic-go with HTTP/3 on Go 1.27's
crypto/tls, built by scripts/build-go.sh, step quicgo, on first use) and what that binary says it can do."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

from pqbench import paths
from pqbench.errors import MissingCapability

FIX = ("run `make stacks` or `bash scripts/build.sh quicgo` (builds native/quicgo with Go 1.27 and quic-go "
       "from the Go module proxy)")


def home() -> Path:
    return paths.BUILD / "quicgo"


def binary() -> Path:
    return home() / "bin" / "quicgo"


def require() -> Path:
    b = binary()
    if not b.exists():
        raise MissingCapability(f"{b} is missing", FIX)
    return b


@functools.lru_cache(maxsize=None)
def _capabilities(stamp: tuple) -> dict:
    proc = subprocess.run([str(binary()), "capabilities"], capture_output=True, text=True, timeout=120, env={})
    if proc.returncode != 0:
        raise MissingCapability(f"`quicgo capabilities` failed ({proc.returncode}): {proc.stderr.strip()[-300:]}", FIX)
    return json.loads(proc.stdout)


def capabilities() -> dict | None:
    """What the built binary found by trying each group and key type in a QUIC handshake on loopback UDP
    (groups, sigs, the client's signature_algorithms, Initial sizes); None when it is not built."""
    b = binary()
    if not b.exists():
        return None
    st = b.stat()
    return _capabilities((st.st_size, st.st_mtime_ns))


def provenance() -> dict:
    """Go version and the checksums of the toolchain and every module (quic-go's included), as the build
    recorded them."""
    try:
        return json.loads((home() / "PROVENANCE.json").read_text())
    except (OSError, ValueError):
        return {}


def group_name(kex: str) -> str | None:
    """quicgo's name for the catalog's key exchange `kex` (matched by TLS code point), or None when this
    build did not negotiate it over QUIC."""
    from pqbench.algorithms import catalog
    try:
        alg = catalog.find(kex, "kem")
    except Exception:
        return None
    for g in (capabilities() or {}).get("groups", []):
        if g["ok"] and alg.codepoint is not None and int(g["codepoint"], 16) == alg.codepoint:
            return g["name"]
    return None
