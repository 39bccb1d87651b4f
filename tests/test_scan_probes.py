"""The scan's field probes against a local population pqbench did not configure for post-quantum
cryptography, with each server's expected verdicts written down (POPULATION); and behind the ossified
middlebox (pqlink's middlebox stage) in its reset and drop modes.

Population (one testbed, servers in its server namespace):
- pq-first:  our nginx (OpenSSL 3.5), X25519MLKEM768 ranked above X25519 and secp256r1 (tuples);
- mlkem-only: our nginx, MLKEM768 and MLKEM1024 only (pure ML-KEM);
- secp-only: our nginx, SecP256r1MLKEM768 and SecP384r1MLKEM1024 only;
- debian:    Debian's own nginx on Debian's OpenSSL 3.0 (no post-quantum group), its default groups;
- sshd:      our OpenSSH with OpenSSH 9.2's order (sntrup761x25519 first), ed25519 host key.
"""

import os
import shutil
import subprocess
import time

import pytest

from pqbench import endpoints
from pqbench.algorithms import certs
from pqbench.endpoints import sshkeys
from pqbench.endpoints.base import Place, Serving, Site
from pqbench.measure.rig import place_on
from pqbench.remote import address
from pqbench.scan import ossify, tls
from pqbench.testbed import EmulatorOptions, LinkSpec, RealPath, Testbed

import pqbench.scan as scan_mod

# the groups scanned (a subset of the catalog's, to keep the test short): classical, hybrid, pure ML-KEM
GROUPS = ["X25519", "secp256r1", "secp384r1", "X448", "X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024",
          "MLKEM768", "MLKEM1024"]
DEBIAN_NGINX = "/usr/sbin/nginx"

# name -> (port, nginx groups or None for Debian's nginx, expected verdicts)
POPULATION = {
    "pq-first": (4443, "X25519MLKEM768/X25519/secp256r1", {
        "accepted": ["X25519", "secp256r1", "X25519MLKEM768"], "pq_key_exchange": "by default",
        "hrr_x25519": ("needed", "X25519MLKEM768"), "split": "accepted", "oversized": "accepted",
        "iw": "fits", "quic": "fits"}),
    "mlkem-only": (4444, "MLKEM768:MLKEM1024", {
        "accepted": ["MLKEM768", "MLKEM1024"], "pq_key_exchange": "by default",
        "hrr_x25519": ("needed", "MLKEM768"), "split": "accepted", "oversized": "accepted",
        "iw": "fits", "quic": "fits"}),
    "secp-only": (4445, "SecP256r1MLKEM768:SecP384r1MLKEM1024", {
        "accepted": ["SecP256r1MLKEM768", "SecP384r1MLKEM1024"], "pq_key_exchange": "by default",
        "hrr_x25519": ("needed", "SecP256r1MLKEM768"), "split": "accepted", "oversized": "accepted",
        "iw": "fits", "quic": "fits"}),
    "debian": (4446, None, {
        "accepted": ["X25519", "secp256r1", "secp384r1", "X448"], "pq_key_exchange": "no",
        "hrr_x25519": ("not needed", "X25519"), "split": "accepted", "oversized": "accepted",
        "iw": "fits", "quic": "fits"}),
}
SSH_KEX = ["sntrup761x25519-sha512", "curve25519-sha256", "ecdh-sha2-nistp256"]
SSH_PORT = 2222


def debian_nginx_conf(d, addr: str, port: int, chain) -> str:
    return f"""daemon off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;
    uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
    server {{
        listen {addr}:{port} ssl;
        ssl_certificate {chain.chain_file};
        ssl_certificate_key {chain.leaf_key};
        ssl_protocols TLSv1.3;
        location / {{ return 200 "ok"; }}
    }}
}}
"""


def wait_listening(place: Place, ip: str, port: int, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        s = place.socket()
        try:
            s.settimeout(1)
            s.connect((ip, port))
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
        finally:
            s.close()


def start_nginx(tb, d, groups: str, port: int, chain):
    server = endpoints.get("openssl", "server").server()
    server.start(Place(tb.addr("server"), lambda argv, **kw: tb.popen("server", argv, **kw),
                       lambda: tb.socket("server")), Serving(d, [Site(port, chain)], [groups], {"1k": 1000}, 1))
    return server


@pytest.fixture(scope="module")
def population(built_stack, tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    if not shutil.which(DEBIAN_NGINX):
        pytest.skip("Debian's nginx is not installed (apt-get install nginx-light)")
    d = tmp_path_factory.mktemp("population")
    chain = certs.make_chain("ecdsap256", d / "chain", intermediates=1)
    started, debian = [], None
    with Testbed(LinkSpec.symmetric(rtt_ms=2), emulator=EmulatorOptions(keep_awake=0)) as tb, \
            RealPath(netns={"client": tb.client_ns}) as path:
        place = place_on(path, "client")
        try:
            for name, (port, groups, _) in POPULATION.items():
                if groups is not None:
                    started.append(start_nginx(tb, d / name, groups, port, chain))
                    started[-1].ready(place)
                else:
                    (d / name).mkdir()
                    conf = d / name / "nginx.conf"
                    conf.write_text(debian_nginx_conf(d / name, tb.server_addr, port, chain))
                    debian = tb.popen("server", [DEBIAN_NGINX, "-c", str(conf), "-p", str(d / name)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    wait_listening(place, tb.server_addr, port)
            yield {"tb": tb, "place": place, "chain": chain}
        finally:
            for s in started:
                s.stop()
            if debian is not None:
                debian.terminate()
                debian.wait(10)


@pytest.fixture(scope="module")
def scanned(population):
    out = {}
    for name, (port, _, _) in POPULATION.items():
        a = address.parse("target", f"{population['tb'].server_addr}:{port}")
        r = tls.scan(a, population["place"], n=1, timeout_s=3, cafile=str(population["chain"].root_cert),
                     servername=population["chain"].server_name, groups=GROUPS)
        r["readiness"] = scan_mod.readiness(r)
        out[name] = r
    return out


def verdicts(r: dict) -> dict:
    by = {p["probe"]: p for p in r["probes"]}
    hrr = by["HelloRetryRequest for a client predicting X25519"]
    return {"accepted": sorted(r["groups"]["accepted"]), "pq_key_exchange": r["readiness"]["pq_key_exchange"],
            "hrr_x25519": (hrr["verdict"], hrr.get("group")), "split": by["split ClientHello"]["verdict"],
            "oversized": by["oversized ClientHello"]["verdict"],
            "iw": by["first flight vs TCP initial window"]["verdict"],
            "quic": by["first flight vs QUIC 3x amplification budget"]["verdict"]}


@pytest.mark.root
@pytest.mark.parametrize("name", list(POPULATION))
def test_each_probe_classifies_each_server(scanned, name):
    want = dict(POPULATION[name][2])
    want["accepted"] = sorted(want["accepted"])
    r = scanned[name]
    assert r["failure"] is None, r["failure"]
    assert verdicts(r) == want
    assert r["readiness"]["pq_authentication"] is False  # an ECDSA chain everywhere
    over = next(p for p in r["probes"] if p["probe"] == "oversized ClientHello")
    split = next(p for p in r["probes"] if p["probe"] == "split ClientHello")
    assert over["client_hello_bytes"] > 3000 and {"X25519MLKEM768", "SecP384r1MLKEM1024"} <= set(over["key_shares"])
    assert len(split["segments"]) == 2 and sum(split["segments"]) == split["client_hello_bytes"]
    assert over["handshake_ok"] and split["handshake_ok"]


@pytest.mark.root
def test_explicit_summary_says_yes_or_no(scanned):
    scan_mod_result = dict(scanned["debian"], protocol="tls")
    assert scan_mod.explicit(scan_mod_result).startswith("post-quantum key exchange: no; post-quantum "
                                                         "authentication: no; HelloRetryRequest for a client "
                                                         "predicting X25519: not needed")
    assert "post-quantum key exchange: yes, by default" in scan_mod.explicit(scanned["mlkem-only"])
    assert "needed (for MLKEM768)" in scan_mod.explicit(scanned["mlkem-only"])


@pytest.mark.root
def test_pq_only_servers_are_scanned_correctly(scanned):
    for name in ("mlkem-only", "secp-only"):
        r = scanned[name]
        assert set(r["groups"]["rejected"]) == set(GROUPS) - set(r["groups"]["accepted"])
        assert r["certificate"]["verify"] == "ok" and r["timing"]  # handshakes completed with PQ groups only
        assert r["preference"]["complete"]


@pytest.fixture(scope="module")
def ssh_server(built_stack, tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network and mount namespaces)")
    d = tmp_path_factory.mktemp("population-ssh")
    keys = sshkeys.make_keys("ssh-ed25519", d / "keys")
    # not through the Rig: its readiness check connects with the first key exchange, which its client
    # (golang.org/x/crypto/ssh) lacks for sntrup761x25519
    with Testbed(LinkSpec(), emulator=EmulatorOptions(keep_awake=0)) as tb, \
            RealPath(netns={"client": tb.client_ns}) as path:
        place = place_on(path, "client")
        server = endpoints.get("openssh", "server").server()
        server.start(Place(tb.addr("server"), lambda argv, **kw: tb.popen("server", argv, **kw),
                           lambda: tb.socket("server")), Serving(d / "sshd", [Site(SSH_PORT, keys)], SSH_KEX, {}, 1))
        try:
            wait_listening(place, tb.server_addr, SSH_PORT)
            yield {"place": place, "target": f"ssh://{tb.server_addr}:{SSH_PORT}"}
        finally:
            server.stop()


@pytest.mark.root
def test_ssh_pq_kex_place_and_software(ssh_server):
    r = scan_mod.scan(address.parse("target", ssh_server["target"]), ssh_server["place"])
    assert r["failure"] is None
    assert r["kex"] == SSH_KEX
    assert r["kex_post_quantum_place"] == {"sntrup761x25519-sha512": 1}
    assert r["software"].startswith("OpenSSH_") and r["identification"].startswith(f"SSH-2.0-{r['software']}")
    assert r["readiness"]["sntrup761x25519_sha512"] and not r["readiness"]["mlkem768x25519_sha256"]


# ---- behind the ossified middlebox -------------------------------------------------------------------

@pytest.fixture(scope="module", params=["reset", "drop"])
def boxed(request, built_stack, tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    d = tmp_path_factory.mktemp(f"boxed-{request.param}")
    chain = certs.make_chain("ecdsap256", d / "chain")
    spec = LinkSpec.parse(rtt="2ms", middlebox=request.param)
    with Testbed(spec, emulator=EmulatorOptions(keep_awake=0)) as tb, RealPath(netns={"client": tb.client_ns}) as path:
        place = place_on(path, "client")
        server = start_nginx(tb, d / "nginx", "X25519:X25519MLKEM768", 4443, chain)
        try:
            server.ready(place)  # its first group, X25519: a ClientHello of one segment passes
            a = address.parse("target", f"{tb.server_addr}:4443")
            yield {"mode": request.param, "prober": tls.TlsProber(a, place, chain.server_name, timeout_ms=2000),
                   "address": a}
        finally:
            server.stop()


@pytest.mark.root
def test_probes_behind_the_ossified_middlebox(boxed):
    want = {"reset": "reset", "drop": "silent"}[boxed["mode"]]
    p, a = boxed["prober"], boxed["address"]
    whole = ossify.probe(p, a, "*X25519:X25519MLKEM768", split=False)
    assert whole["verdict"] == "accepted" and whole["handshake_ok"]  # the same ClientHello in one segment passes
    split = ossify.probe(p, a, "*X25519:X25519MLKEM768", split=True)
    over = ossify.probe(p, a, ossify.oversized_offer(["X25519", "X25519MLKEM768"], "X25519"), split=False)
    assert (split["verdict"], over["verdict"]) == (want, want)
    assert not split["handshake_ok"] and not over["handshake_ok"]
