"""What every browser worker does around its loads: its command line, its browser started before any sample
is timed, one JSON sample per claimed index, a crashed browser's sample a failure (the indices left are the
sampler's client_lost), the profile removed at the end."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from pqbench.endpoints.claims import Claims
from pqbench.endpoints.browsers.timing import PHASES, UNSEEN


class BrowserGone(Exception):
    """The browser went away (crashed or killed) while driven."""


def failure(job: dict, stack: str, worker: int, i: int, error_class: str, error: str) -> dict:
    return {"worker": worker, "i": i, "mode": job["mode"], "ok": False, "error_class": error_class, "error": error,
            "t_ns": {"start": 0, **{p: None for p in (*UNSEEN, *PHASES) if p != "request_sent"}}, "group": None,
            "sigalg": None, "stack": stack}


def main(stack: str, start, one, argv: list[str] | None = None) -> int:
    """start(home, job) -> a browser (close() ends it); one(browser, job, worker, i, timeout_s) -> a sample.
    Either raises BrowserGone when the browser went away."""
    ap = argparse.ArgumentParser(prog=f"pqbench.endpoints.{stack}.worker")
    ap.add_argument("--job", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--worker", type=int, default=0)
    ap.add_argument("--claim")
    ap.add_argument("--home")
    a = ap.parse_args(argv)
    job = json.loads(a.job)
    claims = Claims(a.claim, a.count)
    home = Path(tempfile.mkdtemp(prefix=f"{stack}-{a.worker}-", dir=a.home))
    i = None
    try:
        try:
            browser = start(home, job)  # outside every timed span: process start and profile
        except (BrowserGone, TimeoutError) as e:
            logs = sorted(home.glob("*.log"))
            print(f"{stack} did not start: {e}: {logs[0].read_text(errors='replace')[-400:] if logs else ''}",
                  file=sys.stderr)
            return 3
        try:
            while (i := claims.next()) is not None:
                print(json.dumps(one(browser, job, a.worker, i, job["timeout_ms"] / 1000)), flush=True)
        except BrowserGone as e:
            print(json.dumps(failure(job, stack, a.worker, i, "browser_crashed", str(e))), flush=True)
            return 2
        finally:
            browser.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0
