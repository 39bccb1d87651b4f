"""`pqbench clean` removes the run folders old runs left and nothing else (issue 30, item 5)."""

import os
import time

from pqbench import paths
from pqbench.machine import clean


def test_clean_removes_old_run_folders_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    monkeypatch.setattr(clean.registry, "reap_stale", lambda: {"testbeds": []})  # testbeds: test_testbed
    runs = tmp_path / "runs"
    old, recent, mine = runs / "quick-20261101-101010", runs / "quick-20261125-101010", runs / f"handshake-x-{os.getpid()}"
    for d in (old, recent, mine, tmp_path / "openssl" / "lib"):
        d.mkdir(parents=True)
        (d / "file").write_bytes(b"x" * 1000)
    (tmp_path / "demo.duckdb").write_bytes(b"store")
    long_ago = time.time() - 3600
    for p in (old, old / "file", mine, mine / "file"):
        os.utime(p, (long_ago, long_ago))

    dry = clean.clean(dry_run=True)
    assert [r["path"] for r in dry["removed"]] == [str(old)] and old.exists()

    out = clean.clean()
    assert [r["path"] for r in out["removed"]] == [str(old)] and out["bytes"] == 1000
    assert not old.exists() and recent.exists() and mine.exists()  # written just now; its pqbench is running
    assert {k["path"] for k in out["kept"]} == {str(recent), str(mine)}
    assert (tmp_path / "openssl" / "lib" / "file").exists() and (tmp_path / "demo.duckdb").exists()
