"""nginx-h3, the openssl stack's QUIC server: nginx 1.26 (Debian trixie's source) with HTTP/3 on our
OpenSSL, built on first use; its QUIC sites served inside the server namespace beside Debian's nginx for
the TCP ones, with the same chains and groups, Retry per site."""

import json
import os
import re
import select
import subprocess
import time

import pytest

from conftest import ROOT, processes_mentioning
from pqbench import endpoints, paths
from pqbench.algorithms import catalog, openssl_build
from pqbench.endpoints import ondemand
from pqbench.endpoints.base import ClientJob, Place, Serving, Site
from pqbench.endpoints import openssl as openssl_stack
from pqbench.endpoints.openssl import nginx_h3
from pqbench.endpoints.openssl.nginx import NginxConfig, NginxServer
from pqbench.endpoints.openssl.pqtimer import Pqtimer
from pqbench.errors import BadInput, MissingCapability
from pqbench.testbed import LinkSpec, Testbed

GROUPS = ["X25519MLKEM768", "X25519"]
# Ports unlikely to be bound elsewhere on the machine, so "not bound outside the namespace" means something.
TCP_PORT, QUIC_ECDSA, QUIC_MLDSA, QUIC_RETRY, QUIC_X25519_ONLY = 24433, 24443, 24444, 24445, 24446


@pytest.fixture(scope="module")
def h3_binary(built_stack):
    """nginx-h3 as pqbench builds it on first use (a no-op once built)."""
    if not nginx_h3.built():
        steps = ondemand.QUIC_BUILDS["openssl"].steps
        proc = subprocess.run(["bash", str(ROOT / "scripts" / "build.sh"), *steps], capture_output=True, text=True,
                              env={**os.environ, "PQBENCH_BUILD": str(paths.BUILD), "JOBS": "2"})
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert nginx_h3.built()
    return nginx_h3.binary()


def test_the_build_has_http3_on_our_openssl(h3_binary):
    # no LD_LIBRARY_PATH: the binary finds our libssl by its own rpath, never Debian's
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    out = subprocess.run([str(h3_binary), "-V"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "--with-http_v3_module" in out.stderr and "nginx/1.26." in out.stderr
    assert f"built with OpenSSL {openssl_build.openssl_version()} " in out.stderr
    assert "running with" not in out.stderr  # nginx says so when the loaded libssl is another one
    ldd = subprocess.run(["ldd", str(h3_binary)], capture_output=True, text=True, env=env).stdout
    libssl = re.search(r"libssl\.so\.3 => (\S+)", ldd).group(1)
    assert os.path.realpath(libssl) == os.path.realpath(paths.OPENSSL_LIB / "libssl.so.3"), ldd
    caps = openssl_stack.capabilities()
    assert "quic" in caps.transports and caps.versions["nginx_h3"] == out.stderr.split("nginx/")[1].split()[0]


def sites(chains) -> list[Site]:
    return [Site(TCP_PORT, chains("ecdsap256")),
            Site(QUIC_ECDSA, chains("ecdsap256"), transport="quic"),
            Site(QUIC_MLDSA, chains("mldsa44"), transport="quic"),
            Site(QUIC_RETRY, chains("mldsa44"), transport="quic", retry=True),
            Site(QUIC_X25519_ONLY, chains("mldsa44"), transport="quic", server_groups="X25519")]


def test_each_nginx_gets_only_its_own_transports_sites(h3_binary, chains, tmp_path):
    all_sites = sites(chains)
    tcp = NginxConfig(tmp_path, "10.9.0.2", all_sites, GROUPS).render()
    assert f":{TCP_PORT} ssl reuseport;" in tcp and f":{QUIC_ECDSA}" not in tcp
    h3 = nginx_h3.H3Config(tmp_path, "10.9.0.2", nginx_h3.quic_sites(all_sites), GROUPS, workers=2)
    text = h3.render()
    assert f":{TCP_PORT}" not in text
    for port in (QUIC_ECDSA, QUIC_MLDSA, QUIC_RETRY, QUIC_X25519_ONLY):
        assert f"listen 10.9.0.2:{port} quic reuseport;" in text
    blocks = {int(m.group(1)): m.group(0) for m in re.finditer(r":(\d+) quic reuseport;.*?\n    }", text, re.S)}
    assert "quic_retry on;" in blocks[QUIC_RETRY] and "quic_retry off;" in blocks[QUIC_MLDSA]
    assert "ssl_ecdh_curve X25519;" in blocks[QUIC_X25519_ONLY]
    assert "quic_gso off;" in text and "ssl_protocols TLSv1.3;" in text
    assert "ssl_ecdh_curve X25519MLKEM768:X25519;" in text
    # the real binary accepts the config it is given (nginx -t loads the chains and keys, and binds its
    # QUIC sockets for a moment: on loopback here)
    (tmp_path / "nginx-h3-tmp").mkdir()
    (tmp_path / "h3.conf").write_text(text.replace("10.9.0.2:", "127.0.0.1:"))
    t = subprocess.run([str(h3_binary), "-t", "-q", "-c", str(tmp_path / "h3.conf"), "-p", str(tmp_path),
                        "-e", str(tmp_path / "t.log")], capture_output=True, text=True, env=openssl_build.openssl_env())
    assert t.returncode == 0, t.stderr + (tmp_path / "t.log").read_text()


def test_a_quic_site_with_early_data_is_refused_naming_it(h3_binary, chains, tmp_path):
    site = Site(QUIC_MLDSA, chains("mldsa44"), transport="quic", early_data=True)
    with pytest.raises(MissingCapability, match=f"site {QUIC_MLDSA}: 0-RTT over QUIC"):
        nginx_h3.H3Server(nginx_h3.H3Config(tmp_path, "10.9.0.2", [site], GROUPS))
    assert "early" not in openssl_stack.capabilities().transport_modes["quic"]
    assert "early" in openssl_stack.capabilities().modes  # over TCP, Debian's nginx has it


def place_of(tb: Testbed, side: str) -> Place:
    return Place(tb.addr(side), lambda argv, **kw: tb.popen(side, argv, **kw), lambda: tb.socket(side))


@pytest.fixture(scope="module")
def bed(h3_binary, chains, tmp_path_factory):
    """Debian's nginx (one TCP site) and nginx-h3 (the QUIC sites) as the openssl stack's server, at 10 ms RTT."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    d = tmp_path_factory.mktemp("nginx-h3")
    serving = Serving(d, sites(chains), GROUPS, {"1k": 1000}, 2)
    with Testbed(LinkSpec.symmetric(rtt_ms=10)) as tb:
        server = NginxServer()  # the openssl stack's server
        try:
            server.start(place_of(tb, "server"), serving)
            server.ready(place_of(tb, "client"))  # a QUIC handshake per QUIC site
            yield {"tb": tb, "server": server, "dir": d, "chains": chains}
        finally:
            server.stop()
    left = processes_mentioning(d)
    assert not left, f"processes left after stop: {left}"


def bound(argv_prefix: list[str], proto: str) -> set[int]:
    out = subprocess.run([*argv_prefix, "ss", "-Hln" + proto], capture_output=True, text=True, check=True).stdout
    return {int(line.split()[3].rpartition(":")[2]) for line in out.splitlines() if line.split()}


@pytest.mark.root
def test_quic_sites_are_bound_only_inside_the_server_namespace(bed):
    tb = bed["tb"]
    quic = {QUIC_ECDSA, QUIC_MLDSA, QUIC_RETRY, QUIC_X25519_ONLY}
    in_server = tb.exec_argv("server", [])
    assert quic <= bound(in_server, "u")
    assert TCP_PORT in bound(in_server, "t")  # Debian's nginx beside it
    assert not quic & bound([], "u"), "a QUIC port is bound in the machine's own namespace"
    assert not quic & bound(tb.exec_argv("client", []), "u")
    # both masters run in the server namespace
    h3, tcp = bed["server"].h3.proc, bed["server"].proc
    assert h3.poll() is None and tcp.poll() is None
    server_ns = os.stat(f"/run/netns/{tb.server_ns}").st_ino
    for proc in (h3, tcp):  # `ip netns exec` executes nginx in its own process: same pid
        assert os.stat(f"/proc/{proc.pid}/ns/net").st_ino == server_ns
    assert os.readlink(f"/proc/{h3.pid}/exe") == str(nginx_h3.binary())
    # the leaf keys nginx-h3 loads are private
    for chain in (bed["chains"]("ecdsap256"), bed["chains"]("mldsa44")):
        assert chain.leaf_key.stat().st_mode & 0o777 == 0o600


def s_client(tb: Testbed, port: int, chain, group: str) -> subprocess.CompletedProcess:
    return tb.run("client", [str(paths.OPENSSL_BIN), "s_client", "-quic", "-alpn", "h3", "-connect",
                             f"{tb.server_addr}:{port}", "-groups", group, "-CAfile", str(chain.root_cert),
                             "-servername", chain.server_name, "-verify_return_error", "-brief"],
                  env=openssl_build.openssl_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)


@pytest.mark.root
def test_an_mldsa44_chain_with_x25519mlkem768_over_quic(bed):
    """OpenSSL's own QUIC client offers X25519MLKEM768 alone: the handshake completes over QUICv1 with the
    ML-DSA-44 chain verified and signed with ML-DSA-44; a site whose groups are X25519 alone refuses it."""
    tb, chain = bed["tb"], bed["chains"]("mldsa44")
    r = s_client(tb, QUIC_MLDSA, chain, "X25519MLKEM768")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "Protocol version: QUICv1" in out and "Verification: OK" in out
    assert "Signature type: mldsa44" in out
    assert f"CN={chain.server_name}" in out
    refused = s_client(tb, QUIC_X25519_ONLY, chain, "X25519MLKEM768")
    assert refused.returncode != 0 and "CONNECTION ESTABLISHED" not in refused.stdout + refused.stderr
    assert s_client(tb, QUIC_X25519_ONLY, chain, "X25519").returncode == 0


def first_server_packet(tb: Testbed, port: int, chain) -> bytes:
    """The UDP payload of the first datagram the server sends one new QUIC client (OpenSSL's), captured in
    the client namespace: the answer to that client's port, not a late packet to an earlier client."""
    # at normal priority (tb.popen would make it a measured, real-time process)
    cap = subprocess.Popen(tb.exec_argv("client", ["tcpdump", "-i", "any", "-n", "-l", "-x", f"udp and port {port}"]),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        said, deadline = b"", time.monotonic() + 15
        while b"listening on" not in said:  # tcpdump says so once its capture is open
            assert time.monotonic() < deadline and cap.poll() is None, f"tcpdump did not start: {said!r}"
            if select.select([cap.stderr], [], [], 0.5)[0]:
                said += os.read(cap.stderr.fileno(), 4096)  # unbuffered: select sees all that is unread
        r = s_client(tb, port, chain, "X25519MLKEM768")
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        cap.terminate()
        out, _ = cap.communicate(timeout=15)
    packets = udp_packets(out.decode())
    client = next(sport for sport, dport, p in packets if dport == port and p[0] & 0xF0 == 0xC0)  # its Initial
    return next(p for sport, dport, p in packets if sport == port and dport == client)


def udp_packets(tcpdump_x: str) -> list[tuple[int, int, bytes]]:
    """(source port, destination port, UDP payload) of each IPv4 packet in tcpdump -x's text."""
    hexes, out = [], []
    for line in tcpdump_x.splitlines() + [""]:
        if line.strip().startswith("0x"):
            hexes[-1] += "".join(line.split(":", 1)[1].split())
        elif line.strip():
            hexes.append("")
    for h in filter(None, hexes):
        ip = bytes.fromhex(h)
        udp = ip[(ip[0] & 0x0F) * 4:]
        out.append((int.from_bytes(udp[0:2], "big"), int.from_bytes(udp[2:4], "big"), udp[8:]))
    return out


RETRY, INITIAL = 3, 0  # QUIC v1 long-header packet types (RFC 9000 §17.2)


@pytest.mark.root
@pytest.mark.parametrize("port,retry", [(QUIC_RETRY, True), (QUIC_MLDSA, False)])
def test_retry_is_sent_only_where_the_site_asks(bed, port, retry):
    payload = first_server_packet(bed["tb"], port, bed["chains"]("mldsa44"))
    assert payload[0] & 0xC0 == 0xC0 and payload[1:5] == b"\x00\x00\x00\x01", payload[:8].hex()  # long header, v1
    assert (payload[0] & 0x30) >> 4 == (RETRY if retry else INITIAL), payload[:8].hex()


@pytest.mark.root
@pytest.mark.parametrize("client", ["openssl", "quicgo"])  # pqtimer, and quic-go's client once it is a stack
@pytest.mark.parametrize("port,retry", [(QUIC_MLDSA, False), (QUIC_RETRY, True)])
def test_a_timing_client_negotiates_both_and_sees_the_retry(bed, client, port, retry):
    tb, chain = bed["tb"], bed["chains"]("mldsa44")
    c = Pqtimer() if client == "openssl" else quic_go_client()
    job = ClientJob(host=tb.server_addr, port=port, groups=["X25519MLKEM768"], cafile=str(chain.root_cert),
                    servername=chain.server_name, transport="quic", timeout_ms=5000)
    r = tb.run("client", c.argv(job, 2, 0, None), env=c.env(), stdin=subprocess.DEVNULL, capture_output=True,
               text=True, timeout=60)
    if r.returncode == 2 and "--transport" in r.stderr:
        pytest.skip(f"the {client} client has no --transport quic yet: {r.stderr.strip()[-200:]}")
    samples = [s for s in map(parse_json, r.stdout.splitlines()) if s]
    assert len(samples) == 2, r.stdout + r.stderr
    for s in samples:
        assert s["ok"], s.get("error")
        assert s["group"] == "X25519MLKEM768" and s["sigalg"] == catalog.find("mldsa44", "sig").sigalg
        assert s["transport"] == "quic" and s["quic"]["retry"] is retry


@pytest.mark.root
@pytest.mark.parametrize("client", ["openssl", "quicgo"])
def test_a_timing_client_fetches_the_runs_page_over_http3(bed, client):
    """The page comes from the run's pages over HTTP/3, and nginx-h3 logs it with the group's code point."""
    tb, chain = bed["tb"], bed["chains"]("mldsa44")
    c = Pqtimer() if client == "openssl" else quic_go_client()
    job = ClientJob(host=tb.server_addr, port=QUIC_MLDSA, groups=["X25519MLKEM768"], cafile=str(chain.root_cert),
                    servername=chain.server_name, transport="quic", mode="page", path="/1k", timeout_ms=5000)
    r = tb.run("client", c.argv(job, 1, 0, None), env=c.env(), stdin=subprocess.DEVNULL, capture_output=True,
               text=True, timeout=60)
    if r.returncode == 2 and "--transport" in r.stderr:
        pytest.skip(f"the {client} client has no --transport quic yet: {r.stderr.strip()[-200:]}")
    samples = [s for s in map(parse_json, r.stdout.splitlines()) if s]
    assert len(samples) == 1 and samples[0]["ok"], r.stdout + r.stderr
    assert (samples[0]["http_status"], samples[0]["body_bytes"]) == (200, 1000)
    port = samples[0]["local_port"]
    log = (bed["dir"] / "nginx-h3-access.log").read_text().splitlines()
    mine = [line for line in log if line.startswith(f"{tb.client_addr}:{port} ")]
    assert len(mine) == 1 and '"GET /1k HTTP/3.0" 200 1000' in mine[0], log[-5:]
    assert " TLSv1.3 0x11ec " in mine[0]  # X25519MLKEM768's code point: nginx has no name for it


def quic_go_client():
    """quic-go's client through its stack, or a skip while that stack is not there yet (another part of the
    QUIC work)."""
    try:
        return endpoints.get("quicgo", "client").client()
    except (BadInput, ImportError, AttributeError) as e:
        pytest.skip(f"no quicgo stack yet: {e}")


def parse_json(line: str):
    try:
        return json.loads(line)
    except ValueError:
        return None


def test_an_unbuilt_nginx_h3_is_a_missing_capability_with_the_fix(chains, tmp_path, monkeypatch):
    monkeypatch.setattr(nginx_h3, "home", lambda: tmp_path / "nowhere")
    site = Site(QUIC_MLDSA, chains("mldsa44"), transport="quic")
    with pytest.raises(MissingCapability) as e:
        nginx_h3.H3Server(nginx_h3.H3Config(tmp_path, "10.9.0.2", [site], GROUPS))
    assert "scripts/build.sh nginx-h3" in e.value.fix
    assert nginx_h3.version() is None
