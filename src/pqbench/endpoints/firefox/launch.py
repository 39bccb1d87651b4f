"""Starting Firefox ESR for measurement: headless, a fresh profile whose NSS database trusts our CA, Marionette
on a loopback port of the client namespace (chosen by Firefox, written to the profile), every name resolved
to the testbed's server address without DNS, post-quantum on or off by its own prefs, and everything that
would reach outside the testbed switched off."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from pqbench.endpoints.browsers import nssdb
from pqbench.testbed import lifeline, sched

BINARY = "firefox-esr"
FIX = "run `scripts/build.sh firefox` (Firefox ESR and certutil from Debian's archive)"
# Background traffic of its own: updates, telemetry and studies, remote settings, safe browsing, captive-portal
# and connectivity checks, DNS over HTTPS, prefetch and speculative connections, OCSP.
QUIET = {"app.update.disabledForTesting": True, "app.normandy.enabled": False, "toolkit.telemetry.enabled": False,
         "datareporting.healthreport.uploadEnabled": False, "datareporting.policy.dataSubmissionEnabled": False,
         "services.settings.server": "data:,", "messaging-system.rsexperimentloader.enabled": False,
         "browser.safebrowsing.malware.enabled": False, "browser.safebrowsing.phishing.enabled": False,
         "browser.safebrowsing.downloads.enabled": False, "browser.safebrowsing.blockedURIs.enabled": False,
         "browser.safebrowsing.update.enabled": False, "extensions.update.enabled": False,
         "network.captive-portal-service.enabled": False, "network.connectivity-service.enabled": False,
         "network.trr.mode": 5, "network.dns.disablePrefetch": True, "network.prefetch-next": False,
         "network.predictor.enabled": False, "network.http.speculative-parallel-limit": 0,
         "security.OCSP.enabled": 0, "security.remote_settings.crlite_filters.enabled": False,
         "security.remote_settings.intermediates.enabled": False, "browser.region.network.url": "",
         "geo.provider.network.url": "", "browser.startup.page": 0, "browser.newtabpage.enabled": False,
         "browser.shell.checkDefaultBrowser": False, "network.http.http3.enable": False}
STARTUP_S = 60.0
# A warm load (pqbench.endpoints.browsers.warm) loads its page twice in one container: no HTTP cache (the timed
# load must fetch the page again) and no favicon request after the priming load (it would open a connection
# after the close, which the timed load would then reuse).
WARM = {"browser.cache.disk.enable": False, "browser.cache.memory.enable": False, "browser.chrome.site_icons": False}
# Firefox sends 0-RTT early data on a resumption by default (checked against nginx's log): a resumed cell (mode
# resume_page) switches it off, since its server refuses early data and the ClientHello would carry it anyway.
EARLY_DATA = {"resume_page": {"security.tls.enable_0rtt_data": False}, "early": {"security.tls.enable_0rtt_data": True}}


def http3(origins: list[str]) -> dict:
    """HTTP/3 over QUIC from the first request to each "name:port" (no Alt-Svc round first): the alternative
    service mapping Firefox's own tests use, forced; H3 kept although our CA is a root a user added."""
    return {"network.http.http3.enable": True, "network.http.http3.force-use-alt-svc-mapping-for-testing": True,
            "network.http.http3.alt-svc-mapping-for-testing": ",".join(
                f"{o.rsplit(':', 1)[0]};h3=:{o.rsplit(':', 1)[1]}" for o in origins),
            "network.http.http3.disable_when_third_party_roots_found": False}


def binary() -> str | None:
    return shutil.which(BINARY)


def prefs(host: str, pq: bool, per_name: bool = False) -> dict:
    """The profile's prefs: Marionette on a port Firefox picks, every name to host (per_name: each name to its own
    address instead, by the native resolver's overrides the worker sets: forceResolve would win over them),
    ML-KEM on or off."""
    return {**QUIET, "marionette.port": 0, **({} if per_name else {"network.dns.forceResolve": host}),
            "security.tls.enable_kyber": pq, "network.http.http3.enable_kyber": pq}


def profile(home: Path, cafile: str | None, host: str, pq: bool, per_name: bool = False,
            extra: dict | None = None) -> str | None:
    """A fresh profile in home (its NSS database trusting our CA, its prefs and the extra ones); why our CA is not
    trusted, or None."""
    home.mkdir(parents=True, exist_ok=True)
    untrusted = None
    if cafile:
        try:
            nssdb.make(home, cafile)  # Firefox's database is the profile folder itself (cert9.db)
        except nssdb.Untrusted as e:
            untrusted = str(e)
    (home / "user.js").write_text("".join(f"user_pref({json.dumps(k)}, {json.dumps(v)});\n"
                                          for k, v in {**prefs(host, pq, per_name), **(extra or {})}.items()))
    return untrusted


def _die_with_parent():
    libc = ctypes.CDLL(None, use_errno=True)

    def setup():
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: the browser dies with the worker
        sched.leave_realtime()  # the worker runs as measured processes do; a browser must not run real-time
    return setup


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DBUS_", "DISPLAY", "WAYLAND"))}
    return {**env, "HOME": str(home), "MOZ_CRASHREPORTER_DISABLE": "1", "MOZ_HEADLESS": "1"}


def start_towards(home: Path, url: str) -> subprocess.Popen:
    """Firefox with a fresh profile in home (post-quantum on, as shipped), loading url and nothing else, in a process
    group of its own: what its ClientHello offers is read off a listener there (pqbench.endpoints.browsers.hello)."""
    profile(home, None, "127.0.0.1", pq=True)
    with open(home / "firefox.log", "wb") as log:  # it dies with this process, whatever ends it
        return lifeline.popen([binary(), "--headless", "--no-remote", "--profile", str(home), url], env=_env(home),
                              stdin=subprocess.DEVNULL, stdout=log, stderr=log, preexec_fn=sched.leave_realtime,
                              process_group=0)


def start(home: Path) -> tuple[subprocess.Popen, int]:
    """Firefox on the profile in home: (its process, its Marionette port)."""
    env = _env(home)
    log = open(home / "firefox.log", "wb")
    proc = subprocess.Popen([binary(), "--headless", "--marionette", "--remote-allow-system-access", "--no-remote",
                             "--profile", str(home), "about:blank"], env=env, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=log, preexec_fn=_die_with_parent())
    port_file = home / "MarionetteActivePort"
    deadline = time.monotonic() + STARTUP_S
    while not port_file.exists() or not port_file.read_text().strip():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise TimeoutError(f"firefox wrote no Marionette port (exit {proc.poll()})")
        time.sleep(0.05)
    return proc, int(port_file.read_text())
