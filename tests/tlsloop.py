"""Loopback TLS 1.3 handshakes with our `openssl s_server` / `s_client` (tests and debugging only)."""

import contextlib
import re
import socket
import subprocess
import time

from pqbench import paths
from pqbench.algorithms import openssl_build


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def s_server(chain, groups: list[str]):
    """An s_server on 127.0.0.1 serving `chain` and accepting the given groups."""
    port = free_port()
    proc = subprocess.Popen(
        [str(paths.OPENSSL_BIN), "s_server", "-accept", f"127.0.0.1:{port}", "-tls1_3",
         "-cert", str(chain.leaf_cert), "-key", str(chain.leaf_key),
         *(["-cert_chain", str(chain.intermediates_file)] if chain.intermediates else []),
         "-groups", ":".join(groups), "-quiet"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=openssl_build.openssl_env())
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.05)
        yield port
    finally:
        proc.kill()
        proc.wait()


def negotiated_group(s_client_output: str) -> str | None:
    """The group s_client reports: KEM groups by name, (EC)DH ones as their temporary key."""
    m = re.search(r"Negotiated TLS1.3 group: (\S+)", s_client_output)
    if m:
        return m.group(1)
    m = re.search(r"Peer Temp Key: ([^\n]+)", s_client_output)
    if not m:
        return None
    parts = [p.strip() for p in m.group(1).split(",")]
    if parts[0] == "ECDH":
        return parts[1]  # the curve, e.g. prime256v1
    if parts[0] == "DH":
        return "ffdhe" + parts[1].split()[0]  # "2048 bits"
    return parts[0]  # X25519, X448


def handshake(port: int, chain, group: str, sigalg: str | None = None) -> dict:
    """One s_client handshake; returns the negotiated group and signature type it reports."""
    args = [str(paths.OPENSSL_BIN), "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_3", "-groups", group,
            "-CAfile", str(chain.root_cert), "-verify_return_error", "-servername", chain.server_name, "-brief"]
    if sigalg:
        args += ["-sigalgs", sigalg]
    proc = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
                          env=openssl_build.openssl_env())
    out = proc.stdout + proc.stderr
    sig_m = re.search(r"Signature type: (\S+)", out)
    return {"ok": proc.returncode == 0 and "Verification: OK" in out, "group": negotiated_group(out),
            "sigalg": sig_m.group(1) if sig_m else None, "output": out}
