"""The optional stacks are built the first time a command or a spec names one, not by `make demo`.

Each stack names the steps of scripts/build.sh that make it; a step is done when its folder under
build/ holds a `.done` file. ensure() builds what is missing, once, with one progress line that says
what and about how long; status() is what `pqbench doctor` shows (built / buildable / unavailable).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from pqbench import paths
from pqbench.algorithms import catalog, liboqs, openssl_build
from pqbench.errors import MissingCapability


class Build:
    """How one group of steps is built: what it is, about how long from nothing on 2 cores (with the
    registries' downloads), and the tool it cannot do without."""

    def __init__(self, steps: tuple[str, ...], what: str, about: str, needs: str, fix: str, done=None):
        self.steps, self.what, self.about, self.needs, self.fix = steps, what, about, needs, fix
        self.done = done  # step -> built already (None: its folder under build/ holds `.done`, _done)


# liboqs: `make` builds the demo's algorithms; the catalog's replace them when a command first names another.
# It is wanted only when liboqs lacks an algorithm named (_builds), so it is never done when it is asked for.
_LIBOQS_CATALOG = Build(("liboqs-catalog",), "liboqs with every algorithm of the catalog", "about 3 min", "cmake",
                        "apt-get install cmake ninja-build", done=lambda step: False)


_RUST = Build(("tlsrs",), "rustls + s2n-tls", "about 3 min", "cargo",
              "install Rust (rustup, or Debian: apt-get install cargo)")
_BORING = Build(("tlsboring",), "BoringSSL (the boring-sys crate's vendored source)", "about 5 min", "cargo",
                _RUST.fix)
_GO_TLS = Build(("gotls",), "Go 1.27's crypto/tls", "about 1 min", "go",
                "install any Go >= 1.21 to fetch Go 1.27 (Debian: apt-get install golang-go)")
_GO_SSH = Build(("sshgo",), "Go's SSH server and timing client", "about 1 min", "go", _GO_TLS.fix)
_OPENSSH = Build(("openssh", "sshgo"), "OpenSSH 10 (from Debian's archive) and Go's SSH timing client",
                 "about 1 min", "dpkg-deb", "apt-get install dpkg-dev")
_QUIC_GO = Build(("quicgo",), "quic-go (HTTP/3 over QUIC on Go 1.27's crypto/tls)", "about 1 min", "go", _GO_TLS.fix)
_DTLS_GO = Build(("dtlsgo",), "pion/dtls (DTLS 1.3 in Go)", "about 1 min", "go", _GO_TLS.fix)
_STRONGSWAN = Build(("strongswan",), "strongSwan 6.1 (IKEv2; Debian's strongswan source on our OpenSSL)",
                    "about 2.5 min", "cc", "apt-get install build-essential")
_CHROMIUM = Build(("chromium",), "Chromium and NSS's certutil (Debian's archive)", "about 1 min", "apt-get",
                  "run as root, or: apt-get install chromium libnss3-tools")
_FIREFOX = Build(("firefox",), "Firefox ESR and NSS's certutil (Debian's archive)", "about 1 min", "apt-get",
                 "run as root, or: apt-get install firefox-esr libnss3-tools")
# The stacks whose parts `make` does not build; openssl (nginx + pqtimer) is the core.
BUILDS = {"rustls": _RUST, "s2n": _RUST, "boringssl": _BORING, "gotls": _GO_TLS, "gossh": _GO_SSH, "openssh": _OPENSSH,
          "quicgo": _QUIC_GO, "dtlsgo": _DTLS_GO, "dtlsboring": _BORING, "strongswan": _STRONGSWAN,
          "chromium": _CHROMIUM, "firefox": _FIREFOX}
# What a stack's QUIC server needs beyond its TCP build, by stack: built when a run first has QUIC sites.
# openssl: nginx with HTTP/3 (Debian's nginx-light has none), compiled from trixie's nginx source.
_NGINX_H3 = Build(("nginx-h3",), "nginx 1.26 with HTTP/3 on our OpenSSL (Debian trixie's nginx source)",
                  "about 1 min", "cc", "apt-get install build-essential")
QUIC_BUILDS = {"openssl": _NGINX_H3}
# What a stack's servers need over a transport beyond the stack's own build: transport -> stack -> Build.
TRANSPORT_BUILDS = {"quic": QUIC_BUILDS}


def _script() -> Path:
    return Path(os.environ.get("PQBENCH_BUILD_SCRIPT") or paths.PROJECT_ROOT / "scripts" / "build.sh")


def _done(step: str) -> bool:
    return (paths.BUILD / step / ".done").exists()


def _builds(stacks, transports=(), algorithms=()) -> list[Build]:
    """What the stacks need, over QUIC what their QUIC servers need beyond that, and liboqs's catalog when one of
    the algorithms is a liboqs algorithm the built liboqs lacks."""
    out = [BUILDS[n] for n in stacks if n in BUILDS]
    for t in transports:
        extra = TRANSPORT_BUILDS.get(t, {})
        out += [extra[n] for n in stacks if n in extra]
    if _liboqs_lacks(algorithms):
        out.append(_LIBOQS_CATALOG)
    return list(dict.fromkeys(out))


def _liboqs_lacks(names) -> list[str]:
    """The liboqs algorithms behind these catalog names (key exchanges, signatures; others are ignored) that the
    built liboqs lacks."""
    by_name = {n.lower(): a for a in catalog.algorithms() for n in a.names()}
    return liboqs.lacks(a.liboqs for n in names if (a := by_name.get(str(n).lower())) and a.liboqs)


def names_in(texts) -> set[str]:
    """The names in texts that may name algorithms (a kex, a sig, an offer "a:b/c", a server's groups); for
    ensure(), which counts those that name catalog algorithms and ignores the others."""
    return {n for t in texts if isinstance(t, str) for n in re.split(r"[:/,\s]+", t) if n}


def named_algorithms(cells) -> set[str]:
    """names_in every value of the cells (their kex and sig, the groups a client offers or a server accepts …)."""
    return names_in(v for c in cells for v in c.values().values())


def missing(stacks, transports=(), algorithms=()) -> list[str]:
    """The build steps the stacks (over these transports) and the algorithms still need, in a stable order, each
    once."""
    out = []
    for b in _builds(stacks, transports, algorithms):
        for step in b.steps:
            if not (b.done or _done)(step) and step not in out:
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


def ensure(stacks, say=None, transports=(), algorithms=()) -> None:
    """Builds the optional stacks among `stacks` that are not built yet, their QUIC servers when transports has
    QUIC, and liboqs's catalog when one of the algorithms (catalog names) needs it (a no-op once they are)."""
    steps = missing(stacks, transports, algorithms)
    if not steps:
        return
    say = say or (lambda msg: print(msg, file=sys.stderr, flush=True))
    builds = [b for b in _builds(stacks, transports, algorithms) if set(b.steps) & set(steps)]
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
    openssl_build.forget()  # liboqs's catalog: what our OpenSSL offers with pqprov has changed
    left = missing(stacks, transports, algorithms)
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
