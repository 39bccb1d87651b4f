"""Facts about this machine: privileges, kernel features, CPU — for doctor and provenance."""

import functools
import os
import platform
import shutil
import subprocess
from pathlib import Path


def is_root() -> bool:
    return os.geteuid() == 0


def has_tun() -> bool:
    try:
        fd = os.open("/dev/net/tun", os.O_RDWR)
    except OSError:
        return False
    os.close(fd)
    return True


def _sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        return None


def congestion_control() -> dict:
    return {"allowed": (_sysctl("net.ipv4.tcp_allowed_congestion_control") or "").split(),
            "available": (_sysctl("net.ipv4.tcp_available_congestion_control") or "").split(),
            "default": _sysctl("net.ipv4.tcp_congestion_control")}


@functools.lru_cache(maxsize=None)
def netns_and_netem() -> tuple[bool, bool, str]:
    """(can make network namespaces, kernel has netem, detail), probed in a throwaway namespace."""
    if not is_root():
        return False, False, "not root"
    if not shutil.which("ip"):
        return False, False, "iproute2 (`ip`) is not installed"
    ns = f"pqb-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", ns], capture_output=True, text=True)
    if made.returncode:
        return False, False, made.stderr.strip()
    try:
        from pqbench.testbed.backend_netem import kernel_has_netem
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], capture_output=True)
        netem = kernel_has_netem(ns)
        return True, netem, "netem qdisc works" if netem else "the kernel has no netem qdisc"
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def facts() -> dict:
    return {"hostname": platform.node(), "kernel": platform.release(), "machine": platform.machine(),
            "cpu": cpu_model(), "cpus": os.cpu_count(), "python": platform.python_version()}
