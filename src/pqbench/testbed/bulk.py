"""A bulk TCP traffic source and sink, run inside a testbed's namespaces as competing traffic
(pqbench.testbed.cross): `python -m pqbench.testbed.bulk sink --port P` in one namespace, `... send --to ADDR
--port P --flows N --cc cubic` in the other. Each sends or reads until SIGTERM, then prints one JSON line
with the bytes it moved."""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import threading
import time

CHUNK = 256 * 1024
CONNECT_TRIES_S = 10.0


def _stop_on_term(stop: threading.Event) -> None:
    signal.signal(signal.SIGTERM, lambda *_: stop.set())


def sink(port: int) -> int:
    stop, total, lock = threading.Event(), [0], threading.Lock()
    _stop_on_term(stop)
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", port))
    server.listen(64)
    server.settimeout(0.2)

    def drain(conn: socket.socket) -> None:
        with conn:
            while not stop.is_set():
                data = conn.recv(CHUNK)
                if not data:
                    return
                with lock:
                    total[0] += len(data)

    print(json.dumps({"listening": port}), flush=True)
    while not stop.is_set():
        try:
            conn, _ = server.accept()
        except (TimeoutError, socket.timeout):
            continue
        threading.Thread(target=drain, args=(conn,), daemon=True).start()
    print(json.dumps({"bytes": total[0]}), flush=True)
    return 0


def send(to: str, port: int, flows: int, cc: str) -> int:
    stop, sent, started = threading.Event(), [0] * flows, time.monotonic()
    _stop_on_term(stop)
    socks = []
    for _ in range(flows):
        s = socket.socket()
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())  # per flow, whatever the host's default
        deadline = time.monotonic() + CONNECT_TRIES_S
        while True:
            try:
                s.connect((to, port))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        socks.append(s)
    buf = bytes(CHUNK)

    def pump(k: int) -> None:
        s = socks[k]
        s.settimeout(0.2)
        while not stop.is_set():
            try:
                sent[k] += s.send(buf)
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return

    threads = [threading.Thread(target=pump, args=(k,), daemon=True) for k in range(flows)]
    for t in threads:
        t.start()
    print(json.dumps({"flows": flows, "cc": cc}), flush=True)
    stop.wait()
    print(json.dumps({"bytes": sum(sent), "seconds": round(time.monotonic() - started, 3)}), flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="pqbench.testbed.bulk")
    sub = ap.add_subparsers(dest="role", required=True)
    s = sub.add_parser("sink")
    s.add_argument("--port", type=int, required=True)
    t = sub.add_parser("send")
    t.add_argument("--to", required=True)
    t.add_argument("--port", type=int, required=True)
    t.add_argument("--flows", type=int, default=1)
    t.add_argument("--cc", default="cubic")
    args = ap.parse_args(argv)
    return sink(args.port) if args.role == "sink" else send(args.to, args.port, args.flows, args.cc)


if __name__ == "__main__":
    sys.exit(main())
