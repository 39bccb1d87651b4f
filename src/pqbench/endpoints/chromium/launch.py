"""Starting Chromium for measurement: headless, its profile and NSS database in a folder of its own, the
DevTools protocol on a pipe, the testbed's names mapped to its addresses without DNS, and everything that
would reach outside the testbed switched off."""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

from pqbench.endpoints.browsers import nssdb
from pqbench.endpoints.browsers.cdp import Pipe
from pqbench.endpoints.chromium import policy
from pqbench.errors import MissingCapability
from pqbench.testbed import lifeline, sched

BINARY = "chromium"
FIX = "run `scripts/build.sh chromium` (Chromium and certutil from Debian's archive)"
# Background work that would open connections of its own: component and safe-browsing updates, telemetry,
# DNS prefetch and preconnects, sync, translation, optimization hints, network-time queries, the media router.
QUIET = ["--disable-background-networking", "--disable-component-update", "--disable-domain-reliability",
         "--disable-sync", "--disable-client-side-phishing-detection", "--disable-default-apps",
         "--disable-extensions", "--metrics-recording-only", "--no-pings", "--dns-prefetch-disable",
         "--disable-breakpad", "--disable-crash-reporter", "--safebrowsing-disable-auto-update",
         "--no-first-run", "--no-default-browser-check", "--disable-features=" + ",".join([
             "OptimizationHints", "Translate", "MediaRouter", "DialMediaRouteProvider", "NetworkTimeServiceQuerying",
             "AutofillServerCommunication", "CertificateTransparencyComponentUpdater", "InterestFeedContentSuggestions",
             "NetworkPrediction", "SafeBrowsingEnhancedProtection", "PrivacySandboxSettings4"])]
NETWORK_PREDICTION_NEVER = 2  # Chromium's net.network_prediction_options: preload and preconnect never
# Headless, as root in a namespace: no sandbox (it needs user namespaces of its own), no GPU, no shared memory
# beyond what a container's /dev/shm holds.
HEADLESS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--mute-audio",
            "--remote-debugging-pipe"]


def binary() -> str:
    found = shutil.which(BINARY)
    if found is None:
        raise MissingCapability("chromium is not installed", FIX)
    return found


def resolver_rules(hosts: dict[str, str]) -> str:
    """--host-resolver-rules: each name to its address, every other name unresolvable (no DNS query leaves)."""
    return ", ".join([*(f"MAP {name} {addr}" for name, addr in hosts.items()), "MAP * ~NOTFOUND"])


def profile(home: Path, cafile: str | None) -> tuple[dict, str | None]:
    """A fresh home for one browser: its NSS database trusting our CA, its config and cache folders.
    Returns the environment the browser runs in, and why our CA is not trusted (None: it is)."""
    home.mkdir(parents=True, exist_ok=True)
    untrusted = None
    if cafile:
        try:
            nssdb.make(home / ".pki" / "nssdb", cafile)
        except nssdb.Untrusted as e:
            untrusted = str(e)  # the browser runs without it: its loads fail as a user's would
    # No preconnects: Chromium's loading predictor learns the origin from the first load and then opens a connection
    # at each navigation's start, before the page's request exists. The request takes that connection over when it
    # is ready first (on a busy machine): a 0-RTT load then sends no early data, and the browser reports the
    # connection as reused (no handshake of the load's). "Never" is the preference users set for it.
    prefs = home / "profile" / "Default" / "Preferences"
    prefs.parent.mkdir(parents=True, exist_ok=True)
    prefs.write_text(json.dumps({"net": {"network_prediction_options": NETWORK_PREDICTION_NEVER}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DBUS_", "DISPLAY", "WAYLAND"))}
    return {**env, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache")}, untrusted


def _child_setup(to_browser: int, from_browser: int):
    libc = ctypes.CDLL(None, use_errno=True)

    def setup():
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser, from_browser)]  # 3 and 4 may be taken
        os.dup2(high[0], 3)
        os.dup2(high[1], 4)  # dup2 leaves them open across exec; Python's own fds are not inherited (PEP 446)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the browser dies with the worker
        sched.leave_realtime()  # the worker runs as measured processes do; a browser must not run real-time
    return setup


def start(home: Path, cafile: str | None, hosts: dict[str, str], flags: list[str]):
    """Chromium with a fresh profile under home: (its process, the DevTools pipe to it, why our CA is not
    trusted or None, the policy entry that trusts it or None: policy.untrust it once the browser has ended). A
    root NSS cannot hold (ML-DSA) is trusted through Chromium's CACertificates policy instead."""
    env, untrusted = profile(home, cafile)
    entry = None
    if untrusted and policy.why_not() is None:
        entry, untrusted = policy.trust(Path(cafile)), None
    cmd_r, cmd_w = os.pipe()
    ev_r, ev_w = os.pipe()
    argv = [binary(), *HEADLESS, *QUIET, f"--user-data-dir={home / 'profile'}",
            f"--host-resolver-rules={resolver_rules(hosts)}", *flags, "about:blank"]
    log = open(home / "chromium.log", "wb")
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            close_fds=False, preexec_fn=_child_setup(cmd_r, ev_w))
    os.close(cmd_r)
    os.close(ev_w)
    return proc, Pipe(cmd_w, ev_r), untrusted, entry


def start_towards(home: Path, url: str) -> subprocess.Popen:
    """Chromium with a fresh profile under home, loading url and nothing else (no DevTools pipe), in a process group
    of its own: what its ClientHello offers is read off a listener there (pqbench.endpoints.browsers.hello)."""
    env, _ = profile(home, None)
    argv = [binary(), *[f for f in HEADLESS if f != "--remote-debugging-pipe"], *QUIET,
            f"--user-data-dir={home / 'profile'}", url]
    with open(home / "chromium.log", "wb") as log:  # it dies with this process, whatever ends it; never real-time
        return lifeline.popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                              preexec_fn=sched.leave_realtime, process_group=0)
