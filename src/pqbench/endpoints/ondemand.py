"""The optional stacks are built the first time a command or a spec names one, not by `make demo`.

Each stack names the steps of scripts/build.sh that make it; a step is done when its folder under
build/ holds a `.done` file. ensure() builds what is missing, once, with one progress line that says
what and about how long; status() is what `pqbench doctor` shows (built / buildable / unavailable).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from pqbench import paths
from pqbench.errors import MissingCapability


class Build:
    """How one group of steps is built: what it is, about how long from nothing on 2 cores (with the
    registries' downloads), and the tool it cannot do without."""

    def __init__(self, steps: tuple[str, ...], what: str, about: str, needs: str, fix: str):
        self.steps, self.what, self.about, self.needs, self.fix = steps, what, about, needs, fix


_RUST = Build(("tlsrs",), "rustls + s2n-tls", "about 3 min", "cargo",
              "install Rust (rustup, or Debian: apt-get install cargo)")
_GO_TLS = Build(("gotls",), "Go 1.27's crypto/tls", "about 1 min", "go",
                "install any Go >= 1.21 to fetch Go 1.27 (Debian: apt-get install golang-go)")
_GO_SSH = Build(("sshgo",), "Go's SSH server and timing client", "about 1 min", "go", _GO_TLS.fix)
_OPENSSH = Build(("openssh", "sshgo"), "OpenSSH 10 (from Debian's archive) and Go's SSH timing client",
                 "about 1 min", "dpkg-deb", "apt-get install dpkg-dev")
# The stacks whose parts `make` does not build; openssl (nginx + pqtimer) is the core.
BUILDS = {"rustls": _RUST, "s2n": _RUST, "gotls": _GO_TLS, "gossh": _GO_SSH, "openssh": _OPENSSH}


def _script() -> Path:
    return Path(os.environ.get("PQBENCH_BUILD_SCRIPT") or paths.PROJECT_ROOT / "scripts" / "build.sh")


def _done(step: str) -> bool:
    return (paths.BUILD / step / ".done").exists()


def missing(stacks) -> list[str]:
    """The build steps the stacks still need, in a stable order, each once."""
    out = []
    for name in stacks:
        b = BUILDS.get(name)
        for step in b.steps if b else ():
            if not _done(step) and step not in out:
                out.append(step)
    return out


def status(name: str) -> tuple[str, str]:
    """("built" | "buildable" | "unavailable", detail) for `pqbench doctor`."""
    b = BUILDS.get(name)
    if b is None:  # the core's stack: nginx and pqtimer on our OpenSSL
        if paths.OPENSSL_BIN.exists() and paths.native_binary("pqtimer").exists():
            return "built", "part of the core build"
        return "buildable", "part of the core build: run `make`"
    if not missing([name]):
        return "built", f"under {paths.BUILD}"
    if shutil.which(b.needs) is None:
        return "unavailable", f"{b.needs} is missing: {b.fix}"
    return "buildable", f"{b.what}, built on first use ({b.about} on 2 cores, once) or by `make stacks`"


def ensure(stacks, say=None) -> None:
    """Builds the optional stacks among `stacks` that are not built yet (a no-op once they are)."""
    steps = missing(stacks)
    if not steps:
        return
    say = say or (lambda msg: print(msg, file=sys.stderr, flush=True))
    builds = list(dict.fromkeys(BUILDS[n] for n in stacks if n in BUILDS and set(BUILDS[n].steps) & set(steps)))
    for b in builds:
        if shutil.which(b.needs) is None:
            raise MissingCapability(f"{b.what} is not built and cannot be: {b.needs} is missing", b.fix)
    what = " and ".join(b.what for b in builds)
    about = builds[0].about if len(builds) == 1 else "a few minutes"
    logs = ", ".join(str(paths.BUILD / "logs" / f"{s}.log") for s in steps)
    say(f"[build] building {what}, {about} on 2 cores, once (log: {logs})")
    started = time.monotonic()
    proc = subprocess.run(["bash", str(_script()), *steps], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, env={**os.environ, "PQBENCH_BUILD": str(paths.BUILD)})
    left = missing(stacks)
    if proc.returncode != 0 or left:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise MissingCapability(f"building {what} failed (exit {proc.returncode}): {' / '.join(tail)}",
                                f"see {logs}, fix the cause, then run `make stacks`")
    say(f"[build] {what} built in {time.monotonic() - started:.0f} s")
    forget_capabilities(stacks)


def forget_capabilities(stacks=None) -> None:
    """What a stack could do was asked of a binary that did not exist yet; ask again (every stack's
    when stacks is None)."""
    from pqbench import endpoints
    for name in endpoints.names() if stacks is None else stacks:
        caps = endpoints.get(name).capabilities
        if hasattr(caps, "cache_clear"):
            caps.cache_clear()
