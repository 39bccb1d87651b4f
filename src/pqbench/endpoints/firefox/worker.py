"""A firefox worker: one headless Firefox ESR, started before any sample is timed, loads the job's page once per
sample index it claims, each time in a new container (its own connections and TLS session cache: a cold
connection), and prints one JSON sample per load.

    python -m pqbench.endpoints.firefox.worker --job JSON --count N --worker K [--claim FILE] [--home DIR]

Post-quantum is on or off by Firefox's own prefs (security.tls.enable_kyber, network.http.http3.enable_kyber),
set from the cell's group. Each connection's times, local port, group and signature scheme are the parent
process's own record of its HTTP channels (load.js, run through Marionette).

A warm sample (modes resume_page, early: pqbench.endpoints.browsers.warm) is a priming load in the new container,
its connections closed (the net:prune-all-connections notification), then the timed load, which resumes with the
container's session ticket. Over 0-RTT Firefox reports its connect end at TCP's (NSS is done with its part
before the server's flight comes), so such a sample's handshake_done is its tcp_connected."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pqbench.endpoints.browsers import cpuwait, loop, names
from pqbench.endpoints.browsers.loop import BrowserGone
from pqbench.endpoints.browsers.timing import sample_of
from pqbench.endpoints.browsers.warm import is_warm
from pqbench.endpoints.chromium.worker import host_map, url
from pqbench.endpoints.firefox import launch, marionette
from pqbench.endpoints.firefox.channels import requests_of
from pqbench.transport import TRANSPORTS

LOAD_JS = (Path(__file__).with_name("load.js")).read_text()
# Firefox's own name -> address overrides of its native resolver (what its tests use instead of DNS)
OVERRIDE_JS = """const ov = Cc["@mozilla.org/network/native-dns-override;1"].getService(Ci.nsINativeDNSResolverOverride);
for (const [name, addr] of Object.entries(arguments[0])) ov.addIPOverride(name, addr);"""
# Firefox ESR 153's ClientHello with ML-KEM on: X25519MLKEM768 and X25519 shares (off: X25519 and P-256)
OFFERS = {True: "X25519MLKEM768+X25519:secp256r1:secp384r1:secp521r1", False: "X25519+secp256r1:secp384r1:secp521r1"}


PRUNE_JS = 'Services.obs.notifyObservers(null, "net:prune-all-connections");'


def extra_prefs(job: dict) -> dict:
    """The prefs a job needs beyond every profile's: a warm load's, HTTP/3 from the first request over QUIC."""
    out = {**launch.WARM, **launch.EARLY_DATA[job["mode"]]} if is_warm(job["mode"]) else {}
    if TRANSPORTS[job["transport"]].datagram:
        out.update(launch.http3([f"{name}:{job['port']}" for name in host_map(job)]))
    return out


def pq_on(job: dict) -> bool:
    return "mlkem" in job["groups"][0].lower()


class Browser:
    def __init__(self, home: Path, job: dict):
        self.untrusted = launch.profile(home, job.get("cafile"), job["host"], pq_on(job), per_name=bool(job.get("hosts")),
                                        extra=extra_prefs(job))
        self.proc, port = launch.start(home)
        try:
            self.m = marionette.Marionette(port, timeout=launch.STARTUP_S)
            self.m.send("WebDriver:NewSession", {"capabilities": {}}, timeout=launch.STARTUP_S)
            self.m.send("Marionette:SetContext", {"value": "chrome"})
            if job.get("hosts"):  # a multi-origin page: each name to its own address, still without DNS
                self.m.script(OVERRIDE_JS, [host_map(job)])
        except marionette.BrowserGone as e:
            raise BrowserGone(str(e)) from None
        self.container = 1000  # a new userContextId per load: its connections are its own
        # the first load to the origin starts what Firefox starts once for it: made before any sample
        self.load(url(job), launch.STARTUP_S)

    def load(self, target_url: str, timeout_s: float, warm: bool = False) -> dict:
        """One load in a new container. warm: a priming load first in the same container (untimed, unrecorded),
        then its connections closed (the session ticket stays in the container's cache), then the load."""
        self.container += 1
        try:
            if warm:
                primed = self._one(target_url, timeout_s)
                if primed.get("why") or primed.get("status"):
                    return {**primed, "records": [], "priming": True}
                # the connection manager closes its idle connections (and marks the others not to be reused)
                self.m.script(PRUNE_JS)
            return self._one(target_url, timeout_s)
        except marionette.BrowserGone as e:
            raise BrowserGone(str(e)) from None

    def _one(self, target_url: str, timeout_s: float) -> dict:
        return self.m.script(LOAD_JS, [target_url, self.container, int(timeout_s * 1000)], asynchronous=True,
                             timeout=timeout_s + 5)

    def close(self) -> None:
        try:
            self.m.send("Marionette:Quit", {"flags": ["eForceQuit"]}, timeout=5)
        except (marionette.BrowserGone, marionette.CommandFailed, TimeoutError, OSError):
            pass
        self.m.close()
        try:
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()


def start(home: Path, job: dict) -> Browser:
    return Browser(home, job)


def one(browser: Browser, job: dict, worker: int, i: int, timeout_s: float) -> dict:
    waited = cpuwait.waited_ns(browser.proc.pid)
    wall_minus_mono = time.time_ns() - time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
    try:
        got = browser.load(url(job), timeout_s, warm=is_warm(job["mode"]))
    except TimeoutError:
        return loop.failure(job, "firefox", worker, i, "browser_hung", f"the browser did not answer within {timeout_s:g} s")
    requests = requests_of(got["records"], 0)
    # sample_of reads CLOCK_MONOTONIC times and an offset to RAW; PRTime converts to RAW at once here
    for r in requests:
        if r.get("connection"):
            r["connection"]["start_mono_ns"] -= wall_minus_mono
    stopped = round(got["stopped_ms"] * 1e6) - wall_minus_mono if got.get("stopped_ms") else None
    s = sample_of(requests, stopped, 0)
    if TRANSPORTS[job["transport"]].datagram:
        s["transport"] = job["transport"]  # the wire join reads the flow over the transport's IP protocol
        if s["t_ns"]:
            s["t_ns"]["tcp_connected"] = None  # no TCP: Firefox gives QUIC's handshake end as its connect end
    pq = pq_on(job)
    mono_minus_raw = time.clock_gettime_ns(time.CLOCK_MONOTONIC) - time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
    s.update(worker=worker, i=i, mode=job["mode"], stack="firefox", browser_offer=OFFERS[pq], mono_minus_raw_ns=mono_minus_raw,
             pq_switch=None if pq else "browser", cpu_wait_ns=max(0, cpuwait.waited_ns(browser.proc.pid) - waited))
    if browser.untrusted:
        s["trust_error"] = browser.untrusted
    doc = next((r for r in requests if r["document"]), None)
    if got.get("why") == "timeout":
        s.update(ok=False, error_class="timeout", error=f"no load within {timeout_s:g} s")
    elif doc and doc.get("failed"):
        s.update(ok=False, error_class=names.nss_error_class(doc["failed"]),
                 error=doc["failed"] + (f" ({browser.untrusted})" if browser.untrusted else ""))
    elif got.get("status"):
        code = got["status"] & 0xFFFFFFFF
        s.update(ok=False, error_class=names.NSRESULTS.get(code, "browser_error"),
                 error=f"load failed: nsresult 0x{code:08X} (page {got.get('page')})"
                       + (f" ({browser.untrusted})" if browser.untrusted else ""))
    elif s["ok"] and (s["group"] or "").lower() != job["groups"][0].lower():
        s.update(ok=False, error_class="group_mismatch",
                 error=f"negotiated {s['group']}, not the cell's {job['groups'][0]}")
    return s


def main(argv: list[str] | None = None) -> int:
    return loop.main("firefox", start, one, argv)


if __name__ == "__main__":
    sys.exit(main())
