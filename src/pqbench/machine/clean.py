"""`pqbench clean`: what earlier runs left in the build folder (run folders under build/runs/) and the
testbeds of pqbench processes that died; nothing else (not the builds, the stores or `net up`'s
testbeds, which wait for `net down`)."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

from pqbench import paths
from pqbench.testbed import registry

IN_USE_S = 300  # a folder something wrote into this recently belongs to a run still going
_HANDSHAKE_PID = re.compile(r"-(\d+)$")  # handshake-YYYYmmdd-HHMMSS-PID


def runs_dir() -> Path:
    return paths.BUILD / "runs"


def _size_and_newest(folder: Path) -> tuple[int, float]:
    size, newest = 0, folder.stat().st_mtime
    for f in folder.rglob("*"):
        try:
            st = f.lstat()
        except OSError:
            continue
        size += st.st_size if f.is_file() else 0
        newest = max(newest, st.st_mtime)
    return size, newest


def _in_use(folder: Path, newest: float) -> str | None:
    m = _HANDSHAKE_PID.search(folder.name)
    if m and Path(f"/proc/{m.group(1)}").exists():
        return f"its pqbench (pid {m.group(1)}) is running"
    if time.time() - newest < IN_USE_S:
        return f"written to in the last {IN_USE_S // 60} minutes"
    return None


def clean(*, dry_run: bool = False) -> dict:
    """{"removed": [{path, bytes}], "kept": [{path, why}], "bytes": freed, "testbeds": what reap_stale
    removed}: the run folders no running pqbench uses, and dead processes' testbeds."""
    out = {"removed": [], "kept": [], "bytes": 0, "testbeds": {}}
    folders = sorted(p for p in runs_dir().iterdir() if p.is_dir()) if runs_dir().is_dir() else []
    for folder in folders:
        size, newest = _size_and_newest(folder)
        why = _in_use(folder, newest)
        if why:
            out["kept"].append({"path": str(folder), "why": why})
            continue
        if not dry_run:
            shutil.rmtree(folder, ignore_errors=True)
        out["removed"].append({"path": str(folder), "bytes": size})
        out["bytes"] += size
    if not dry_run:
        out["testbeds"] = registry.reap_stale()
    return out
