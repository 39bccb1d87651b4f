"""A chromium worker: one headless Chromium, started before any sample is timed, loads the job's page once
per sample index it claims, each time in a new browser context (its own connections, session cache and HTTP
cache: a cold connection), and prints one JSON sample per load.

    python -m pqbench.endpoints.chromium.worker --job JSON --count N --worker K [--claim FILE] [--home DIR]

Its times come from the DevTools protocol's resource timing of each connection (connect start, TLS start and
end, request sent, first byte) and its loading-finished and load events, all on the browser's monotonic
clock (CLOCK_MONOTONIC, the emulator's). The sample's own phases are those of the document's connection;
every connection of the load is in `browser.connections`.

A warm sample (modes resume_page, early: pqbench.endpoints.browsers.warm) is a priming load in the new context, its
connections closed (chrome.benchmarking.closeConnections(), the --enable-net-benchmarking flag's page API), then
the timed load, which resumes with the context's session ticket; the HTTP cache is off for both."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from pqbench.endpoints.browsers import cpuwait, loop, names, sockets
from pqbench.endpoints.browsers.cdp import BrowserGone as CdpGone, CommandFailed
from pqbench.endpoints.browsers.loop import BrowserGone
from pqbench.endpoints.browsers.timing import sample_of
from pqbench.endpoints.browsers.warm import is_warm
from pqbench.endpoints.chromium.devtools import connections_of
from pqbench.endpoints.chromium import launch, policy
from pqbench.transport import TRANSPORTS
from pqbench.webpages import pages

# Chromium 156's ClientHello: its supported groups with a key share each for the first two
BROWSER_OFFER = "X25519MLKEM768+X25519:secp256r1:secp384r1"
STARTUP_S = 60.0  # the browser's first answer on a busy machine
EARLY_DATA_SWITCH = "--enable-features=EnableTLS13EarlyData"


def url(job: dict) -> str:
    """What the browser loads: the job's page as a document (nginx's /html/ location), by the server's name; a
    multi-origin page's document (the webpage axis, pqbench.webpages) in its place."""
    webpage = (job.get("axes") or {}).get("webpage")
    path = pages.document_path(webpage, job["port"]) if webpage else job["path"] if job["path"] != "/" else "/1k"
    return f"https://{job['servername']}:{job['port']}/html{path}"


def host_map(job: dict) -> dict[str, str]:
    """Every name the job's page reaches -> its address: the server's, and a multi-origin page's origins."""
    return {job["servername"]: job["host"], **(job.get("hosts") or {})}


def clock_offset_ns() -> int:
    """CLOCK_MONOTONIC minus CLOCK_MONOTONIC_RAW (samples' start_mono_ns are RAW, as pqtimer's)."""
    raw0 = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
    mono = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    raw1 = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
    return mono - (raw0 + raw1) // 2


class Browser:
    def __init__(self, home: Path, job: dict, flags: list[str]):
        self.proc, self.pipe, self.untrusted, self.trusted_by_policy = launch.start(home, job.get("cafile"),
                                                                                    host_map(job), flags)
        self.pipe.send("Browser.getVersion", timeout=STARTUP_S)
        # The browser's first navigation to an origin starts what it starts once (its network service's state for
        # the origin; a speculative connection besides the page's own, which the page then does not use): made here,
        # before any sample, so each sample is a browser's steady cold load (a new context: new connections)
        self.load(url(job), STARTUP_S, set(), proto(job))

    def load(self, target_url: str, timeout_s: float, remote_hosts: set[str],
             proto: str, warm: bool = False) -> tuple[list[dict], set, set, str | None]:
        """One page load in a new browser context: (its DevTools events, sockets before, those seen while it ran, net
        error).
        warm: a priming load first (untimed, its events dropped), the context's connections closed, then the
        load, which can resume with the priming load's session ticket."""
        pipe = self.pipe
        ctx = pipe.send("Target.createBrowserContext")["browserContextId"]
        try:
            target = pipe.send("Target.createTarget", {"url": "about:blank", "browserContextId": ctx})["targetId"]
            session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            pipe.send("Network.enable", session=session)
            pipe.send("Page.enable", session=session)
            if warm:
                error = self._prime(session, target_url, timeout_s)
                if error:
                    return [], set(), set(), f"priming load: {error}"
            pipe.take_events()
            before = sockets.connections(proto, remote_hosts)
            with sockets.Watch(proto, remote_hosts, before) as during:
                error = self._navigate(session, target_url, timeout_s)
            return [e for e in pipe.take_events() if e.get("sessionId") == session], before, during.seen, error
        finally:
            try:
                pipe.send("Target.disposeBrowserContext", {"browserContextId": ctx})
            except (CommandFailed, TimeoutError):
                pass

    def _navigate(self, session: str, target_url: str, timeout_s: float) -> str | None:
        """Navigates and waits for the load event: None, or the net error (or "timeout")."""
        nav = self.pipe.send("Page.navigate", {"url": target_url}, session=session, timeout=timeout_s)
        if nav.get("errorText"):
            return nav["errorText"]
        if not self.pipe.wait_for(lambda evs: any(e["method"] == "Page.loadEventFired" and
                                                  e.get("sessionId") == session for e in evs), timeout_s):
            return "timeout"
        return None

    def _prime(self, session: str, target_url: str, timeout_s: float) -> str | None:
        """The priming load of a warm sample, then its connections closed (the session ticket stays in the
        context's session cache). No HTTP cache: the timed load must fetch its page again."""
        self.pipe.send("Network.setCacheDisabled", {"cacheDisabled": True}, session=session)
        # the favicon request a load makes after its load event would open a connection of its own after the
        # close, which the timed load would then reuse
        self.pipe.send("Network.setBlockedURLs", {"urls": ["*/favicon.ico"]}, session=session)
        error = self._navigate(session, target_url, timeout_s)
        if error:
            return error
        # --enable-net-benchmarking's page API: closes the network context's sockets (idle and active, QUIC's too)
        got = self.pipe.send("Runtime.evaluate", {"expression": "chrome.benchmarking.closeConnections()",
                                                  "awaitPromise": True}, session=session, timeout=timeout_s)
        if got.get("exceptionDetails"):
            return "closing its connections: " + str(got["exceptionDetails"].get("text"))
        return None

    def close(self) -> None:
        try:
            self.pipe.send("Browser.close", timeout=5)
        except (CdpGone, CommandFailed, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        if self.trusted_by_policy:
            policy.untrust(self.trusted_by_policy)


def transport_flags(job: dict) -> list[str]:
    """HTTP/3 over QUIC to the job's port from the first request (no Alt-Svc round first): a QUIC cell's."""
    if not TRANSPORTS[job["transport"]].datagram:
        return []
    # every origin of the page (a multi-origin page's too): HTTP/3 to each from its first request
    return ["--enable-quic", "--origin-to-force-quic-on=" + ",".join(f"{name}:{job['port']}" for name in host_map(job))]


def proto(job: dict) -> str:
    """The kernel's socket table a connection of the job is in (a QUIC connection is a UDP socket)."""
    return TRANSPORTS[job["transport"]].ip_proto


def start(home: Path, job: dict) -> Browser:
    # a warm load closes its priming load's connections through the benchmarking API (chrome.benchmarking)
    warm_flags = ["--enable-net-benchmarking"] if is_warm(job["mode"]) else []
    # Chromium 156 sends no early data unless its EnableTLS13EarlyData feature is on (off by default: a resumed
    # load sends its GET after the handshake); a 0-RTT cell switches it on and records so (EARLY_DATA_SWITCH)
    warm_flags += [EARLY_DATA_SWITCH] if job["mode"] == "early" else []
    try:
        return Browser(home, job, transport_flags(job) + warm_flags)
    except CdpGone as e:
        raise BrowserGone(str(e)) from None


def failure(job: dict, worker: int, i: int, error_class: str, error: str) -> dict:
    return loop.failure(job, "chromium", worker, i, error_class, error)


def main(argv: list[str] | None = None) -> int:
    return loop.main("chromium", start, one, argv)


def one(browser: Browser, job: dict, worker: int, i: int, timeout_s: float) -> dict:
    offset, waited = clock_offset_ns(), cpuwait.waited_ns(browser.proc.pid)
    try:
        events, before, seen, error = browser.load(url(job), timeout_s, set(host_map(job).values()), proto(job),
                                                    warm=is_warm(job["mode"]))
    except CdpGone as e:
        raise BrowserGone(str(e)) from None
    except TimeoutError:
        return failure(job, worker, i, "browser_hung", f"the browser did not answer within {timeout_s:g} s")
    requests, load_event = connections_of(events, sockets.opened(before, seen))
    s = sample_of(requests, load_event, offset)
    if not TRANSPORTS[job["transport"]].is_default:
        s["transport"] = job["transport"]  # the wire join reads the flow over the transport's IP protocol
    s.update(worker=worker, i=i, mode=job["mode"], stack="chromium", mono_minus_raw_ns=offset,
             cpu_wait_ns=max(0, cpuwait.waited_ns(browser.proc.pid) - waited))
    # The browser offers its own shares whatever the cell: the server's groups decide; a cell whose group the
    # server did not choose measured something else (a classical cell against a server that accepts ML-KEM)
    s.update(browser_offer=BROWSER_OFFER, pq_switch=None if "mlkem" in job["groups"][0].lower() else "server")
    if job["mode"] == "early":
        s["early_data_switch"] = EARLY_DATA_SWITCH  # not Chromium's default
    if browser.untrusted:
        s["trust_error"] = browser.untrusted
    if error:
        cause = error.removeprefix("priming load: ")  # a warm sample's priming load failed as the load would
        s.update(ok=False, error_class="timeout" if cause == "timeout" else names.error_class(cause),
                 error=error + (f" ({browser.untrusted})" if browser.untrusted else ""))
    elif s["ok"] and (s["group"] or "").lower() != job["groups"][0].lower():
        s.update(ok=False, error_class="group_mismatch",
                 error=f"negotiated {s['group']}, not the cell's {job['groups'][0]}: Chromium always offers "
                       f"{BROWSER_OFFER}; the server's groups must switch post-quantum off (server_groups)")
    return s


if __name__ == "__main__":
    sys.exit(main())
