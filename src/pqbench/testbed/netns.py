"""Network namespaces: `ip` commands, and sockets or code running inside a namespace.

Inside a namespace we either spawn a process (`ip netns exec`) or switch one thread with setns(2):
a socket keeps the namespace it was created in, so sockets made by a helper thread can then be
used from any thread of this process.
"""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import threading
from contextlib import contextmanager

from pqbench.errors import MeasurementFailed, MissingCapability

NETNS_DIR = "/var/run/netns"
_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def run(argv: list[str], *, check: bool = True, timeout: float = 30, input: str | None = None) -> subprocess.CompletedProcess:
    """Runs a command, capturing output; on failure raises naming the command and its stderr."""
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input)
    except FileNotFoundError:
        raise MissingCapability(f"{argv[0]} is not installed", "run `make deps` (scripts/build.sh apt)") from None
    except subprocess.TimeoutExpired:
        raise MeasurementFailed(f"`{' '.join(argv)}` did not finish within {timeout} s") from None
    if check and cp.returncode != 0:
        raise MeasurementFailed(f"`{' '.join(argv)}` failed ({cp.returncode}): {cp.stderr.strip()}")
    return cp


def ip(*args: str, netns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    argv = ["ip"] + (["-n", netns] if netns else []) + list(args)
    return run(argv, check=check)


def exec_argv(netns: str, argv: list[str]) -> list[str]:
    """The command line that runs argv inside netns."""
    return ["ip", "netns", "exec", netns, *argv]


def exists(name: str) -> bool:
    return os.path.exists(os.path.join(NETNS_DIR, name))


def list_names() -> list[str]:
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def add(name: str) -> None:
    ip("netns", "add", name)


def delete(name: str) -> None:
    if exists(name):
        ip("netns", "del", name, check=False)


def pids(name: str) -> list[int]:
    """Processes living in the namespace (as `ip netns pids` finds them: their /proc/PID/ns/net is its file),
    read in this process, so that the caller can note each one's start time at once (registry.kill)."""
    try:
        ns = os.stat(os.path.join(NETNS_DIR, name))
    except OSError:
        return []
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                st = os.stat(f"/proc/{entry}/ns/net")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (ns.st_dev, ns.st_ino):
                out.append(int(entry))
    return out


def _setns(fd: int, what: str) -> None:
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise MeasurementFailed(f"setns({what}): {os.strerror(e)}")


@contextmanager
def entered(name: str):
    """Runs the body with the calling thread inside namespace name (restored afterwards)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open(os.path.join(NETNS_DIR, name), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        os.close(own)
        raise MeasurementFailed(f"network namespace {name} does not exist") from None
    try:
        _setns(target, name)
        try:
            yield
        finally:
            _setns(own, "own namespace")
    finally:
        os.close(target)
        os.close(own)


def call_in(name: str, fn, *args, **kwargs):
    """Calls fn in a helper thread that lives in namespace name; returns its result or raises."""
    result: dict = {}

    def body():
        try:
            with entered(name):
                result["value"] = fn(*args, **kwargs)
        except BaseException as e:  # handed to the caller's thread
            result["error"] = e

    t = threading.Thread(target=body, name=f"netns-{name}", daemon=True)
    t.start()
    t.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


def socket_in(name: str, family=socket.AF_INET, type=socket.SOCK_STREAM, proto: int = 0) -> socket.socket:
    """A socket that belongs to namespace name."""
    return call_in(name, socket.socket, family, type, proto)


def write_sysctls(name: str, values: dict[str, str], *, check: bool = True) -> None:
    """Writes /proc/sys/net/... values as seen from inside namespace name."""
    def write():
        for key, value in values.items():
            path = "/proc/sys/" + key.replace(".", "/")
            try:
                with open(path, "w") as f:
                    f.write(str(value))
            except OSError as e:
                if check:
                    raise MeasurementFailed(f"writing {key}={value} in {name}: {e.strerror}") from None
    call_in(name, write)


def read_sysctl(name: str, key: str) -> str:
    def read():
        with open("/proc/sys/" + key.replace(".", "/")) as f:
            return f.read().strip()
    return call_in(name, read)
