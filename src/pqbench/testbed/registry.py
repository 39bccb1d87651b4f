"""Leftover registry: every testbed writes what it creates to /run/pqbench/<name>/testbed.json
before creating it, so `pqbench net clean` can remove namespaces, devices and processes even after
the process that made them was killed with SIGKILL; the next testbed to come up removes those of
dead owners by itself (reap_stale).

Processes are only ever signalled by pid, after checking that the pid still is the process that
was recorded (same start time) or lives in one of our namespaces.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import signal
import time
from contextlib import contextmanager
from pathlib import Path

from pqbench.testbed import netns

RUN_ROOT = Path(os.environ.get("PQBENCH_RUN_ROOT", "/run/pqbench"))
PREFIX = "pqb"  # every namespace and host device pqbench creates starts with this


def new_name() -> str:
    """A fresh per-run testbed name like pqb-3f9a2c."""
    return f"{PREFIX}-{secrets.token_hex(3)}"


def run_dir(name: str) -> Path:
    return RUN_ROOT / name


def record_path(name: str) -> Path:
    return run_dir(name) / "testbed.json"


@contextmanager
def locked():
    """Serialises allocation (subnets, names) between concurrent pqbench processes."""
    RUN_ROOT.mkdir(parents=True, exist_ok=True)
    with open(RUN_ROOT / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def write_record(name: str, record: dict) -> None:
    path = record_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, path)


def read_record(name: str) -> dict | None:
    try:
        return json.loads(record_path(name).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def all_records() -> dict[str, dict]:
    out = {}
    if RUN_ROOT.is_dir():
        for d in RUN_ROOT.iterdir():
            if d.is_dir() and d.name.startswith(PREFIX):
                out[d.name] = read_record(d.name) or {"name": d.name}
    return out


# --- processes ---------------------------------------------------------------------------------

def children(table: dict | None = None) -> dict[int, list[int]]:
    """ppid -> pids of every process now (or in a table processes() read)."""
    tree: dict[int, list[int]] = {}
    for pid, (ppid, _start) in (processes() if table is None else table).items():
        tree.setdefault(ppid, []).append(pid)
    return tree


def processes() -> dict[int, tuple[int, int | None]]:
    """pid -> (ppid, start time) of every process now, each read in one go (see start_time)."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            out[int(entry)] = (int(fields[1]), None if fields[0] in ("Z", "X") else int(fields[19]))
    return out


PF_EXITING = 0x4  # the kernel's flag of a process in its exit (/proc/PID/stat's flags)


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (identifies it across pid reuse); None
    once it has ended, as a zombie too (a killed owner nobody has waited for yet is dead), and while it
    is in its exit (killed, it closes its files and ends its threads, which can take long: it runs no
    more code of its own)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") or int(fields[6]) & PF_EXITING else int(fields[19])


def proc_ref(pid: int) -> dict:
    return {"pid": pid, "start": start_time(pid)}


def is_alive(ref: dict | None) -> bool:
    if not ref or ref.get("pid") is None or ref.get("start") is None:
        return False
    return start_time(ref["pid"]) == ref["start"]


def kill(ref: dict, *, grace: float = 2.0) -> bool:
    """SIGTERM, then SIGKILL after grace seconds, to the process ref names: its pid and the start time it had when
    it was found (proc_ref). By the time it is killed that pid may be another process's, which is left alone (pids
    come round again within minutes where pid_max is 32768: a teardown that killed a namespace's pids one by one
    once ended another testbed's `ip addr add`). Returns True if the process is gone."""
    pid, start = ref["pid"], ref["start"]
    if start is None or start_time(pid) != start:
        return True
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        _reap(pid)  # first: an ended child of ours stays a zombie until waited for
        if start_time(pid) != start:
            return True
        time.sleep(0.01)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    for _ in range(200):
        _reap(pid)
        if start_time(pid) != start:
            return True
        time.sleep(0.01)
    return False


def kill_all(pids: list[int]) -> list[int]:
    """Kills the processes just found (their start times noted first: see kill); returns those gone."""
    refs = [proc_ref(pid) for pid in pids]
    return [ref["pid"] for ref in refs if ref["start"] is not None and kill(ref)]


def kill_child(proc, wait_s: float = 5.0) -> None:
    """SIGKILL to a child of ours (a subprocess.Popen), waited for until it has ended or is in its exit, at most
    wait_s. Not proc.wait(): a killed process's exit (closing its files, ending its threads) can take longer
    than a Ctrl-C may (S23: an interrupted scan waited on its killed pqtimer for more than 10 s under the
    slower-machine command), and in its exit it runs no more code of its own. Python reaps it later."""
    if proc.poll() is not None:
        return
    proc.kill()
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        exiting = start_time(proc.pid) is None  # looked at first: a zombie is reaped (and gone) by poll()
        if proc.poll() is not None or exiting:
            return
        time.sleep(0.01)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def pqlink_pids() -> list[int]:
    """Running processes whose executable is a pqlink binary (any checkout's build)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            exe = os.readlink(f"/proc/{entry}/exe")
        except OSError:
            continue
        if os.path.basename(exe.removesuffix(" (deleted)")) == "pqlink":
            found.append(int(entry))
    return found


def pqlink_netns(pid: int) -> list[str]:
    """The namespaces a pqlink process was started for (from its command line)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []
    out = []
    for flag in (b"--client-netns", b"--server-netns"):
        if flag in args and args.index(flag) + 1 < len(args):
            out.append(args[args.index(flag) + 1].decode(errors="replace"))
    return out


# --- teardown ------------------------------------------------------------------------------------

def host_devices() -> list[str]:
    """Host network devices named like ours (veth ends left behind)."""
    try:
        return sorted(d for d in os.listdir("/sys/class/net") if d.startswith(PREFIX))
    except FileNotFoundError:
        return []


def teardown(record: dict) -> dict:
    """Removes what one record describes: processes, namespaces, host devices, the run dir."""
    removed = {"processes": [], "namespaces": [], "devices": []}
    namespaces = [ns for ns in record.get("namespaces", []) if netns.exists(ns)]
    recorded = [ref for ref in record.get("processes", []) if is_alive(ref)]
    # everything running now counts, also what ends by itself (nginx workers follow their master)
    present = recorded + [proc_ref(pid) for ns in namespaces for pid in netns.pids(ns)]
    for ref in recorded:
        kill(ref)
    for ns in namespaces:
        kill_all(netns.pids(ns))
        netns.delete(ns)
        removed["namespaces"].append(ns)
    removed["processes"] = sorted({r["pid"] for r in present if r["start"] is not None and not is_alive(r)})
    for dev in record.get("host_devices", []):
        if os.path.exists(f"/sys/class/net/{dev}"):
            netns.ip("link", "del", dev, check=False)
            removed["devices"].append(dev)
    name = record.get("name")
    if name:
        shutil.rmtree(run_dir(name), ignore_errors=True)
    return removed


def owner_alive(record: dict) -> bool:
    return not record.get("detached") and is_alive(record.get("owner"))


def stale(record: dict) -> bool:
    """A testbed whose owning process died without tearing it down. Detached testbeds (`net up`)
    outlive their owner on purpose, and a record without an owner cannot be judged: both wait for
    `net down` or `net clean`."""
    return bool(record.get("owner")) and not record.get("detached") and not is_alive(record["owner"])


def reap_stale() -> dict:
    """Removes the testbeds of dead owners (a `kill -9`ed run leaves namespaces, nginx and pqtimer
    behind) and nothing else: no stray namespaces or emulators without a record, since a testbed
    being made right now may not have its namespaces yet, though its record with a live owner was
    written first, under the lock held here. Returns what went, as clean() does."""
    summary = {"testbeds": [], "namespaces": [], "devices": [], "processes": []}
    with locked():
        dead = {name: rec for name, rec in all_records().items() if stale(rec)}
        if not dead:
            return summary
        theirs = {ns for rec in dead.values() for ns in rec.get("namespaces", [])}
        for ref in [proc_ref(pid) for pid in pqlink_pids()]:  # an emulator started but not yet noted in its record
            if theirs.intersection(pqlink_netns(ref["pid"])) and kill(ref):
                summary["processes"].append(ref["pid"])
        for name, rec in sorted(dead.items()):
            removed = teardown(rec)
            summary["testbeds"].append(name)
            for k in ("namespaces", "devices", "processes"):
                summary[k] += removed[k]
    for k in ("namespaces", "devices", "processes"):
        summary[k] = sorted(set(summary[k]), key=str)
    return summary


def describe_reaped(summary: dict) -> str | None:
    """One line on what reap_stale removed, or None if nothing."""
    names = summary["testbeds"]
    if not names:
        return None
    counts = [f"{len(summary['namespaces'])} namespaces"]
    if summary["devices"]:
        counts.append(f"{len(summary['devices'])} host devices")
    counts.append(f"{len(summary['processes'])} processes")
    what = "1 stale testbed of a dead process" if len(names) == 1 else f"{len(names)} stale testbeds of dead processes"
    return f"removed {what} ({', '.join(names)}): {', '.join(counts)}"


def clean(*, force: bool = False) -> dict:
    """Removes every pqbench leftover: testbeds whose owning process is gone (and detached ones
    from `net up`), stray pqb namespaces and host devices, and pqlink processes serving no live
    testbed. With force, also testbeds of running pqbench processes."""
    summary = {"testbeds": [], "namespaces": [], "devices": [], "processes": [], "kept": []}
    with locked():
        records = all_records()
        keep_ns: set[str] = set()
        for name, rec in sorted(records.items()):
            if owner_alive(rec) and not force:
                summary["kept"].append({"name": name, "owner_pid": rec["owner"]["pid"]})
                keep_ns.update(rec.get("namespaces", []))
                continue
            r = teardown(rec)
            summary["testbeds"].append(name)
            for k in ("namespaces", "devices", "processes"):
                summary[k] += r[k]
        for ref in [proc_ref(pid) for pid in pqlink_pids()]:  # emulators of testbeds whose record is gone
            if not keep_ns.intersection(pqlink_netns(ref["pid"])) and kill(ref):
                summary["processes"].append(ref["pid"])
        for ns in netns.list_names():
            if ns.startswith(PREFIX + "-") and ns not in keep_ns:
                summary["processes"] += kill_all(netns.pids(ns))
                netns.delete(ns)
                summary["namespaces"].append(ns)
        kept_devices = {d for n in summary["kept"] for d in records[n["name"]].get("host_devices", [])}
        for dev in host_devices():
            if dev not in kept_devices:
                netns.ip("link", "del", dev, check=False)
                summary["devices"].append(dev)
    for k in ("namespaces", "devices", "processes"):
        summary[k] = sorted(set(summary[k]), key=str)
    return summary
