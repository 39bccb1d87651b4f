"""The `strongswan` stack's build: build/strongswan/libexec/ipsec/charon (strongSwan 6.1 from Debian's archive on our
OpenSSL, scripts/build-ike.sh, step strongswan, built on first use)."""

from __future__ import annotations

import json
from pathlib import Path

from pqbench import paths
from pqbench.errors import MissingCapability

FIX = ("run `make stacks` or `bash scripts/build.sh strongswan` (builds strongSwan 6.1 from Debian's archive on "
       "pqbench's OpenSSL, about 2.5 min on 2 cores)")
# Compiled into charon (--with-piddir): each charon mounts a tmpfs of its own here (charon.Charon)
PIDDIR = Path("/run/pqbench/strongswan")


def home() -> Path:
    return paths.BUILD / "strongswan"


def charon() -> Path:
    return home() / "libexec" / "ipsec" / "charon"


def require() -> Path:
    if not (home() / ".done").exists() or not charon().exists():
        raise MissingCapability(f"{charon()} is missing", FIX)
    return charon()


def provenance() -> dict:
    try:
        return json.loads((home() / "PROVENANCE.json").read_text())
    except (OSError, ValueError):
        return {}
