"""Firefox's Marionette protocol (its remote agent's WebDriver-classic transport): over TCP on the loopback,
each message `LENGTH:JSON`, commands [0, id, name, params] answered by [1, id, error, result]. Its chrome
context runs privileged script: what a page cannot see (the TLS group a connection negotiated) is read there."""

from __future__ import annotations

import json
import socket
import time


class BrowserGone(Exception):
    """The browser closed its Marionette connection (it crashed or was killed)."""


class CommandFailed(Exception):
    pass


class Marionette:
    def __init__(self, port: int, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"nothing answered on Marionette's port {port}") from None
                time.sleep(0.1)
        self.sock.settimeout(timeout)
        self._buf = b""
        self._next_id = 0
        self._read()  # the greeting: {"applicationType": "gecko", "marionetteProtocol": 3}

    def _read(self) -> object:
        while b":" not in self._buf:
            self._recv()
        length, _, rest = self._buf.partition(b":")
        n = int(length)
        self._buf = rest
        while len(self._buf) < n:
            self._recv()
        msg, self._buf = self._buf[:n], self._buf[n:]
        return json.loads(msg)

    def _recv(self) -> None:
        try:
            chunk = self.sock.recv(1 << 16)
        except socket.timeout:
            raise TimeoutError("the browser did not answer in time") from None
        except OSError as e:
            raise BrowserGone(f"the browser's Marionette connection failed ({e.strerror})") from None
        if not chunk:
            raise BrowserGone("the browser closed its Marionette connection (it crashed or was killed)")
        self._buf += chunk

    def send(self, name: str, params: dict | None = None, timeout: float | None = None) -> object:
        self._next_id += 1
        body = json.dumps([0, self._next_id, name, params or {}]).encode()
        try:
            self.sock.sendall(str(len(body)).encode() + b":" + body)
        except OSError as e:
            raise BrowserGone(f"the browser's Marionette connection failed ({e.strerror})") from None
        if timeout is not None:
            self.sock.settimeout(timeout)
        while True:
            msg = self._read()
            if isinstance(msg, list) and msg[0] == 1 and msg[1] == self._next_id:
                if msg[2]:
                    raise CommandFailed(f"{name}: {msg[2].get('error')}: {msg[2].get('message')}")
                return msg[3]

    def script(self, source: str, args: list | None = None, asynchronous: bool = False, timeout: float = 60.0):
        """Runs script in the current context (chrome or content) and returns its value."""
        r = self.send("WebDriver:ExecuteAsyncScript" if asynchronous else "WebDriver:ExecuteScript",
                      {"script": source, "args": args or [], "scriptTimeout": int(timeout * 1000)}, timeout=timeout + 5)
        return r.get("value") if isinstance(r, dict) else r

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
