"""The `openssh` stack (protocol "ssh"): OpenSSH 10 from Debian's bookworm-backports packages, sshd as
the server and ssh as the client, timed by sshtimer through a relay started by ssh as its
ProxyCommand (so ssh's own start-up, which would dominate, is outside the timing; see
openssh/client.py). OpenSSH has no ML-DSA host keys: those cells are Go <-> Go (stack gossh)."""

from __future__ import annotations

import functools
import json
import re
import subprocess

from pqbench import paths
from pqbench.endpoints import sshkeys
from pqbench.endpoints.base import Capabilities, Stack
from pqbench.endpoints.openssh.client import OpenSshClient
from pqbench.endpoints.openssh import sshd
from pqbench.endpoints.openssh.sshd import SshdServer

__all__ = ["STACK"]


def _query(what: str) -> list[str]:
    ssh = sshkeys.openssh_root() / "usr" / "bin" / "ssh"
    proc = subprocess.run([str(ssh), "-Q", what], capture_output=True, text=True, env=sshkeys.openssh_env(), timeout=30)
    return proc.stdout.split() if proc.returncode == 0 else []


def queried() -> dict:
    """What the unpacked OpenSSH implements, asked of its binaries (`ssh -Q kex`, `ssh -Q key-sig`;
    sshd is the same release and the same library code). Empty when it is not unpacked (not
    remembered: it may be unpacked on first use, pqbench.endpoints.ondemand)."""
    if not sshd.sbin().exists():
        return {}
    return _queried(str(sshd.sbin()), sshd.sbin().stat().st_mtime_ns)


@functools.lru_cache(maxsize=None)
def _queried(sbin: str, stamp: int) -> dict:
    ssh = sshkeys.openssh_root() / "usr" / "bin" / "ssh"
    v = subprocess.run([str(ssh), "-V"], capture_output=True, text=True, env=sshkeys.openssh_env(), timeout=30)
    m = re.search(r"OpenSSH_(\S+)", v.stderr + v.stdout)
    try:
        prov = json.loads((paths.BUILD / "openssh" / "PROVENANCE.json").read_text())
    except (OSError, ValueError):
        prov = {}
    return {"version": m.group(1) if m else None, "debian_version": prov.get("version"),
            "kex": _query("kex"), "key_sig": _query("key-sig")}


def unsupported(kex: str, sig: str, role: str = "server") -> str | None:
    """Why this OpenSSH cannot run kex with host key sig in this role, or None."""
    from pqbench.endpoints.gossh import build
    if role == "client" and not build.binary("sshtimer").exists():
        return f"the openssh client is timed by sshtimer, which is not built ({build.FIX})"
    q = queried()
    if not q:
        return f"OpenSSH is not unpacked ({sshd.FIX})"
    if kex not in q["kex"]:
        return f"key exchange {kex} is not implemented by OpenSSH {q['version']}"
    alg, bits = sshkeys.split_hostkey(sig)
    if alg in sshkeys.MLDSA:
        return f"OpenSSH {q['version']} has no ML-DSA host keys ({alg} exists here only in golang.org/x/crypto/ssh: stack gossh)"
    if alg not in q["key_sig"]:
        return f"host key algorithm {alg} is not implemented by OpenSSH {q['version']}"
    return None


@functools.lru_cache(maxsize=None)
def capabilities() -> Capabilities:
    q = queried()
    return Capabilities(stack="openssh", protocol=sshkeys.PROTOCOL, transports=("tcp",), modes=("handshake",),
                        versions={"openssh": q.get("version"), "debian_package": q.get("debian_version")},
                        unsupported=unsupported)


STACK = Stack(name="openssh", protocol=sshkeys.PROTOCOL, server=SshdServer, client=OpenSshClient, capabilities=capabilities)
