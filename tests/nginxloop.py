"""Debian's nginx and curl on our libssl (LD_LIBRARY_PATH + OPENSSL_CONF), on 127.0.0.1 only.

Test helper: one nginx serving one certificate chain, TLS 1.3 only, the given groups
(`ssl_ecdh_curve`), config and logs in a temporary directory, stopped by PID. The access log
records the negotiated group as nginx sees it ($ssl_curve: "0x<code point>" for groups OpenSSL
has no NID for), so tests can check the code point that went over the wire.
"""

import contextlib
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from pqbench.algorithms import openssl_build
from tlsloop import free_port

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
CURL = shutil.which("curl") or "/usr/bin/curl"

CONFIG = """\
daemon off;
master_process on;
worker_processes 1;
user root;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 64; }}
http {{
    log_format pq '$ssl_protocol $ssl_curve';
    access_log {dir}/access.log pq;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{port} ssl;
        server_name {server_name};
        ssl_certificate {chain};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.3;
        ssl_ecdh_curve {groups};
        location / {{ return 200 "pqbench ok\\n"; }}
    }}
}}
"""


@contextlib.contextmanager
def nginx(chain, groups: list[str], workdir: Path):
    """Yields (port, access_log path)."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    conf = workdir / "nginx.conf"
    conf.write_text(CONFIG.format(dir=workdir, port=port, server_name=chain.server_name, chain=chain.chain_file,
                                  key=chain.leaf_key, groups=":".join(groups)))
    proc = subprocess.Popen([NGINX, "-c", str(conf), "-e", str(workdir / "error.log")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=openssl_build.openssl_env())
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"nginx did not start: {proc.stderr.read().decode()}"
                                     f"{(workdir / 'error.log').read_text() if (workdir / 'error.log').exists() else ''}")
            time.sleep(0.05)
        yield port, workdir / "access.log"
    finally:
        proc.send_signal(signal.SIGTERM)  # fast shutdown: the master stops its workers
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def curl(port: int, chain, group: str) -> subprocess.CompletedProcess:
    """One HTTPS request with certificate verification, TLS 1.3, offering only `group`."""
    return subprocess.run(
        [CURL, "-sS", "--tlsv1.3", "--curves", group, "--cacert", str(chain.root_cert),
         "--resolve", f"{chain.server_name}:{port}:127.0.0.1", f"https://{chain.server_name}:{port}/"],
        capture_output=True, text=True, timeout=60, env=openssl_build.openssl_env())
