"""The Chrome DevTools protocol over a pipe (--remote-debugging-pipe): the browser reads commands from its
fd 3 and writes answers and events to its fd 4, each a JSON text ended by a NUL byte. No port is opened, and
the browser exits when its pipe closes, so it cannot outlive the worker that drives it."""

from __future__ import annotations

import json
import os
import queue
import threading
import time


class BrowserGone(Exception):
    """The browser closed its pipe (it crashed or was killed)."""


class CommandFailed(Exception):
    def __init__(self, method: str, error: dict):
        super().__init__(f"{method}: {error.get('message')} ({error.get('code')})")
        self.method, self.error = method, error


class Pipe:
    """One connection to a browser: commands, their answers, and the events that came meanwhile."""

    def __init__(self, to_browser: int, from_browser: int):
        self._out, self._in = to_browser, from_browser
        self._messages: queue.Queue = queue.Queue()
        self._next_id = 0
        self.events: list[dict] = []  # events not yet taken, in arrival order
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._in, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self._messages.put(None)  # the pipe closed
                return
            *whole, buf = (buf + chunk).split(b"\0")
            for text in whole:
                self._messages.put(json.loads(text))

    def _take(self, deadline: float) -> dict:
        try:
            msg = self._messages.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError("the browser did not answer in time") from None
        if msg is None:
            self._messages.put(None)  # every later read sees it too
            raise BrowserGone("the browser closed its DevTools pipe (it crashed or was killed)")
        return msg

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30.0) -> dict:
        """Runs one command and returns its result; events that arrive meanwhile are kept in self.events."""
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        try:
            os.write(self._out, json.dumps(msg).encode() + b"\0")
        except OSError as e:
            raise BrowserGone(f"the browser's DevTools pipe is closed ({e.strerror})") from None
        deadline = time.monotonic() + timeout
        while True:
            answer = self._take(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise CommandFailed(method, answer["error"])
                return answer.get("result", {})
            if "method" in answer:
                self.events.append(answer)

    def wait_for(self, done, timeout: float) -> bool:
        """Keeps events until done(events) is true (True) or timeout seconds pass (False)."""
        deadline = time.monotonic() + timeout
        while not done(self.events):
            try:
                msg = self._take(deadline)
            except TimeoutError:
                return False
            if "method" in msg:
                self.events.append(msg)
        return True

    def take_events(self) -> list[dict]:
        out, self.events = self.events, []
        return out
