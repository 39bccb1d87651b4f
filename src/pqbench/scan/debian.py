"""Debian's own servers for the local population, as Debian ships them: the binary packages fetched from
Debian's archive with `apt-get download` (the version this machine's apt would install) and unpacked
with `dpkg-deb -x` under build/debian/NAME (one folder per set of versions, kept for the next time).
Nothing is installed: no host service starts, the machine's packages, accounts and /etc stay as they are.

    root = debian.unpacked("nginx")           # Debian's nginx and Debian's OpenSSL 3.0 (libssl3)
    env = debian.env(root)                    # run its binaries with that OpenSSL, not another
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from pqbench import paths
from pqbench.errors import MissingCapability

# what each server needs beside what this machine has: its own package and Debian's libraries it links
SETS = {
    "nginx": ["nginx", "libssl3"],  # nginx 1.22 on OpenSSL 3.0: no post-quantum group
    "sshd": ["openssh-server", "libssl3", "libwrap0"],  # OpenSSH 9.2: sntrup761x25519 only
}
LIB = "usr/lib/x86_64-linux-gnu"
FIX = "let apt reach Debian's archive (apt-get update), or run on Debian 12 (bookworm)"


def candidates(packages: list[str]) -> dict:
    """The versions apt would install (its candidates), in one apt-cache call, or MissingCapability."""
    out = subprocess.run(["apt-cache", "policy", *packages], capture_output=True, text=True, timeout=600)
    found, package = {}, None
    for line in out.stdout.splitlines():
        if not line.startswith(" ") and line.endswith(":"):
            package = line[:-1]
        key, _, value = line.strip().partition(": ")
        if key == "Candidate" and value and value != "(none)" and package in packages:
            found[package] = value
    missing = [p for p in packages if p not in found]
    if missing:
        raise MissingCapability(f"apt knows no version of Debian's {', '.join(missing)}", FIX)
    return {p: found[p] for p in packages}


def home(name: str, versions: dict) -> Path:
    tag = "_".join(f"{p}-{v}" for p, v in versions.items()).replace(":", "%3a").replace("~", "_")
    return paths.BUILD / "debian" / name / tag


def unpacked(name: str) -> Path:
    """The root folder Debian's packages of SETS[name] are unpacked in (fetched the first time)."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise MissingCapability("Debian's servers are fetched with apt-get and unpacked with dpkg-deb", FIX)
    versions = candidates(SETS[name])
    dest = home(name, versions)
    if (dest / "PROVENANCE.json").exists():
        return dest / "root"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        # apt-get download drops privileges to _apt where it can write; the folder is made writable for it
        os.chmod(tmp, 0o755)
        got = subprocess.run(["apt-get", "download", *[f"{p}={v}" for p, v in versions.items()]], cwd=tmp,
                             capture_output=True, text=True, timeout=600)
        debs = sorted(Path(tmp).glob("*.deb"))
        if got.returncode != 0 or len(debs) != len(versions):
            raise MissingCapability(f"apt-get download {' '.join(versions)} failed: {got.stderr.strip()[-300:]}", FIX)
        root = Path(tmp) / "root"
        for deb in debs:
            subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True, capture_output=True, timeout=300)
        (Path(tmp) / "PROVENANCE.json").write_text(json.dumps(
            {"name": name, "source": "Debian's archive (apt-get download; unpacked, not installed)",
             "packages": versions, "files": [d.name for d in debs]}, indent=1) + "\n")
        for deb in debs:
            deb.unlink()
        if dest.exists():
            shutil.rmtree(dest)
        os.rename(tmp, dest)
        os.makedirs(tmp)  # TemporaryDirectory removes its folder on exit
    return dest / "root"


def env(root: Path) -> dict:
    """The environment Debian's binaries under root run in: Debian's libraries first, no OpenSSL settings
    of pqbench's own build (its OPENSSL_CONF names providers OpenSSL 3.0 lacks)."""
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LD_LIBRARY_PATH": str(root / LIB)}


def provenance(root: Path) -> dict:
    return json.loads((root.parent / "PROVENANCE.json").read_text())
