"""Our CA trusted by Chromium through its CACertificates policy, for roots NSS's tools cannot hold (ML-DSA).

Chromium reads enterprise policies from JSON files in /etc/chromium/policies/managed when it starts; the
CACertificates policy adds trust anchors of any key type its verifier knows, ML-DSA among them (Chromium 156),
without NSS. The folder is the machine's, so what pqbench writes there is written for the browsers that need it
and removed with them: each process that needs a root leaves an entry (the root, named by its owner's pid and
start time) in /run/pqbench/chromium-roots, and one policy file, pqbench-ca-certificates.json, lists the roots
of the entries whose owners are alive (rewritten under a lock at every change; removed when none is left).
An owner that dies without removing its entry has its guardian run `prune` (pqbench.testbed.lifeline.after),
and any later change prunes it too. Nothing else in the folder is touched. Chromium still verifies each chain
normally: a root that is not listed, or a chain that does not verify, fails as it would for a user."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import os
import ssl
import sys
from pathlib import Path

from pqbench.testbed import lifeline, registry

POLICY_DIR = Path("/etc/chromium/policies/managed")
POLICY_FILE = POLICY_DIR / "pqbench-ca-certificates.json"
ENTRIES = registry.RUN_ROOT / "chromium-roots"


def why_not() -> str | None:
    """Why a root cannot be trusted this way here (None: it can)."""
    if os.geteuid() != 0:
        return f"writing Chromium's policy folder {POLICY_DIR} needs root"
    return None


@contextlib.contextmanager
def _locked():
    ENTRIES.mkdir(parents=True, exist_ok=True)
    with open(ENTRIES / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _der(pem: str) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem)


def trust(ca_pem: Path) -> Path:
    """The root in ca_pem trusted by every Chromium started from now on until untrust(entry); returns the entry."""
    pem = Path(ca_pem).read_text()
    me = registry.proc_ref(os.getpid())
    entry = ENTRIES / f"{me['pid']}-{me['start']}-{hashlib.sha256(_der(pem)).hexdigest()[:16]}.pem"
    lifeline.after([sys.executable, "-m", "pqbench.endpoints.chromium.policy", "prune"])
    with _locked():
        entry.write_text(pem)
        _rewrite()
    return entry


def untrust(entry: Path) -> None:
    with _locked():
        entry.unlink(missing_ok=True)
        _rewrite()


def prune() -> None:
    with _locked():
        _rewrite()


def listed() -> list[bytes]:
    """The roots (DER) the policy file lists now."""
    try:
        return [base64.b64decode(c) for c in json.loads(POLICY_FILE.read_text())["CACertificates"]]
    except (OSError, ValueError, KeyError):
        return []


def _owner_alive(entry: Path) -> bool:
    pid, start = entry.name.split("-")[:2]
    return registry.is_alive({"pid": int(pid), "start": int(start)})


def _rewrite() -> None:
    """The policy file from the live entries (the dead ones removed); none left: no file."""
    roots = []
    for entry in sorted(ENTRIES.glob("*.pem")):
        if _owner_alive(entry):
            roots.append(base64.b64encode(_der(entry.read_text())).decode())
        else:
            entry.unlink(missing_ok=True)
    if not roots:
        POLICY_FILE.unlink(missing_ok=True)
        return
    POLICY_DIR.mkdir(parents=True, exist_ok=True)
    part = POLICY_FILE.with_suffix(".part")  # Chromium reads only *.json: a half-written file is never read
    part.write_text(json.dumps({"CACertificates": sorted(set(roots))}))
    part.replace(POLICY_FILE)


if __name__ == "__main__":
    if sys.argv[1:] != ["prune"]:
        sys.exit("usage: python -m pqbench.endpoints.chromium.policy prune")
    prune()
