"""Where a run's numbers come from: versions, commit, host, stacks, seeds, and each start's segment."""

from __future__ import annotations

import datetime
import subprocess

from pqbench import __version__, endpoints, paths, store
from pqbench.algorithms import liboqs, openssl_build
from pqbench.machine import host


def git_commit() -> str | None:
    try:
        rev = subprocess.run(["git", "-C", str(paths.PROJECT_ROOT), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(paths.PROJECT_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{rev}{'+dirty' if dirty else ''}" if rev else None


def of_node(stacks: list[str]) -> dict:
    """What this machine measures with: host facts, versions, commit (a node's row in the store)."""
    caps = {name: endpoints.get(name).capabilities() for name in stacks}
    out = {"pqbench": __version__, "git_commit": git_commit(), "host": host.facts(),
           "openssl": {"version": openssl_build.openssl_version(), **openssl_build.openssl_provenance()},
           "liboqs": {"version": liboqs.version(), **openssl_build.liboqs_provenance()},
           "pqprov": openssl_build.pqprov_path().exists(), "synthetic_work": openssl_build.SYNTHETIC_WORK,
           "stacks": {name: {"protocol": c.protocol, "versions": c.versions} for name, c in caps.items()},
           "congestion_control": host.congestion_control()}
    if "openssl" in caps:  # the key earlier runs had
        out["nginx"] = caps["openssl"].versions.get("nginx")
    return out


# The versions every node of a run must share with its driver (a difference would mix builds in one result).
MATCHED = {"pqbench": ("pqbench",), "OpenSSL": ("openssl", "version"), "liboqs": ("liboqs", "version"),
           "pqprov": ("pqprov",), "nginx": ("nginx",)}


def mismatch(driver: dict, node: dict) -> tuple[str, object, object] | None:
    """The first of MATCHED in which a node's provenance differs from the driver's: (field, driver's, node's)."""
    def get(prov, keys):
        for k in keys:
            prov = (prov or {}).get(k) if isinstance(prov, dict) else None
        return prov
    for field, keys in MATCHED.items():
        if get(driver, keys) != get(node, keys):
            return field, get(driver, keys), get(node, keys)
    return None


def of_run(spec, stacks: list[str]) -> dict:
    return {**of_node(stacks), "seed": spec.seed, "parallel": spec.parallel,
            "samples": {"min": spec.samples.min, "max": spec.samples.max, "ci": spec.samples.ci}}


def segments(con, run_id: str, testbeds: list[str]) -> list[dict]:
    """What each start or resume of the run ran on: a resumed run keeps its earlier segments."""
    return store.provenance(con, run_id).get("segments", []) + [
        {"started": datetime.datetime.now().isoformat(timespec="seconds"), "git_commit": git_commit(),
         "pqbench": __version__, "testbeds": testbeds}]
