"""The scan's field probes against a local population pqbench did not configure for post-quantum
cryptography, with each server's expected verdicts written down (POPULATION); and behind the ossified
middlebox (pqlink's middlebox stage) in its reset and drop modes.

Population (one testbed, servers in its server namespace):
- pq-first:  our nginx (OpenSSL 3.5), X25519MLKEM768 ranked above X25519 and secp256r1 (tuples);
- mlkem-only: our nginx, MLKEM768 and MLKEM1024 only (pure ML-KEM);
- secp-only: our nginx, SecP256r1MLKEM768 and SecP384r1MLKEM1024 only;
- debian:    Debian's own nginx on Debian's OpenSSL 3.0 (no post-quantum group), its default groups, unpacked
             from Debian's archive (pqbench.scan.debian, never installed);
- quic-big:  our nginx and nginx-h3 on one port number (TCP and UDP), an ML-DSA-87 chain (about 15 kB);
- sshd:      our OpenSSH with OpenSSH 9.2's order (sntrup761x25519 first), ed25519 host key.
"""

import os
import subprocess

import pytest

from pqbench import endpoints
from pqbench.algorithms import certs
from pqbench.endpoints import sshkeys
from pqbench.endpoints.base import Place, Serving, Site
from pqbench.measure.rig import place_on
from pqbench.remote import address
from pqbench.scan import local, ossify, tls
from pqbench.testbed import EmulatorOptions, LinkSpec, RealPath, Testbed

import pqbench.scan as scan_mod

# the groups scanned (a subset of the catalog's, to keep the test short): classical, hybrid, pure ML-KEM
GROUPS = ["X25519", "secp256r1", "secp384r1", "X448", "X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024",
          "MLKEM768", "MLKEM1024"]

# name -> (port, nginx groups or None for Debian's nginx, expected verdicts)
POPULATION = {
    "pq-first": (4443, "X25519MLKEM768/X25519/secp256r1", {
        "accepted": ["X25519", "secp256r1", "X25519MLKEM768"], "pq_key_exchange": "by default",
        "hrr_x25519": ("needed", "X25519MLKEM768"), "split": "accepted", "oversized": "accepted",
        "iw": "fits", "quic": "fits", "udp": "no answer"}),
    "mlkem-only": (4444, "MLKEM768:MLKEM1024", {
        "accepted": ["MLKEM768", "MLKEM1024"], "pq_key_exchange": "by default",
        "hrr_x25519": ("needed", "MLKEM768"), "split": "accepted", "oversized": "accepted",
        "iw": "fits", "quic": "fits", "udp": "no answer"}),
    "secp-only": (4445, "SecP256r1MLKEM768:SecP384r1MLKEM1024", {
        "accepted": ["SecP256r1MLKEM768", "SecP384r1MLKEM1024"], "pq_key_exchange": "by default",
        "hrr_x25519": ("needed", "SecP256r1MLKEM768"), "split": "accepted", "oversized": "accepted",
        "iw": "fits", "quic": "fits", "udp": "no answer"}),
    "debian": (4446, None, {
        "accepted": ["X25519", "secp256r1", "secp384r1", "X448"], "pq_key_exchange": "no",
        "hrr_x25519": ("not needed", "X25519"), "split": "accepted", "oversized": "accepted",
        "iw": "fits", "quic": "fits", "udp": "no answer"}),
    "quic-big": (4447, "X25519MLKEM768:X25519", {
        "accepted": ["X25519", "X25519MLKEM768"], "pq_key_exchange": "when the client lists it first",
        "hrr_x25519": ("not needed", "X25519"), "split": "accepted", "oversized": "accepted",
        "iw": "costs a round trip", "quic": "costs a round trip", "udp": "answered",
        "over_quic": ["X25519", "X25519MLKEM768"], "quic_measured": "costs a round trip"}),
}
SSH_KEX = ["sntrup761x25519-sha512", "curve25519-sha256", "ecdh-sha2-nistp256"]
SSH_PORT = 2222


def start_nginx(tb, d, groups: str, port: int, chain):
    server = endpoints.get("openssl", "server").server()
    server.start(Place(tb.addr("server"), lambda argv, **kw: tb.popen("server", argv, **kw),
                       lambda: tb.socket("server")), Serving(d, [Site(port, chain)], [groups], {"1k": 1000}, 1))
    return server


@pytest.fixture(scope="module")
def population(built_stack, tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    from pqbench.scan import debian as archive
    root = archive.unpacked("nginx")  # Debian's nginx and OpenSSL 3.0, unpacked from Debian's archive (not installed)
    d = tmp_path_factory.mktemp("population")
    chain = certs.make_chain("ecdsap256", d / "chain", intermediates=1)
    started, debian, big = [], None, None
    with Testbed(LinkSpec.symmetric(rtt_ms=2), emulator=EmulatorOptions(keep_awake=0)) as tb, \
            RealPath(netns={"client": tb.client_ns}) as path:
        place = place_on(path, "client")
        try:
            for name, (port, groups, _) in POPULATION.items():
                if name == "quic-big":  # TCP and QUIC on one port number, a large post-quantum chain
                    big = certs.make_chain("mldsa87", d / "big", intermediates=1)
                    server = endpoints.get("openssl", "server").server()
                    started.append(server)
                    server.start(Place(tb.addr("server"), lambda argv, **kw: tb.popen("server", argv, **kw),
                                       lambda: tb.socket("server")),
                                 Serving(d / name, [Site(port, big), Site(port, big, transport="quic")], [groups],
                                         {"1k": 1000}, 1))
                    server.ready(place)
                elif groups is not None:
                    started.append(start_nginx(tb, d / name, groups, port, chain))
                    started[-1].ready(place)
                else:
                    debian = local.start_debian_nginx(tb, d / name, root, [tb.server_addr], chain, port)
                    local.wait_listening(place, tb.server_addr, port)
            yield {"tb": tb, "place": place, "chain": chain, "big": big}
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
        chain = population["big" if name == "quic-big" else "chain"]
        r = tls.scan(a, population["place"], n=1, timeout_s=3, cafile=str(chain.root_cert),
                     servername=chain.server_name, groups=GROUPS)
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
            "quic": by["first flight vs QUIC 3x amplification budget"]["verdict"],
            "udp": by["QUIC on the UDP port"]["verdict"],
            **({"over_quic": sorted(by["QUIC on the UDP port"]["groups"]),
                "quic_measured": by["QUIC first flight vs 3x amplification budget (measured)"]["verdict"]}
               if by["QUIC on the UDP port"]["verdict"] == "answered" else {})}


@pytest.mark.root
@pytest.mark.parametrize("name", list(POPULATION))
def test_each_probe_classifies_each_server(scanned, name):
    want = dict(POPULATION[name][2])
    want["accepted"] = sorted(want["accepted"])
    r = scanned[name]
    assert r["failure"] is None, r["failure"]
    assert verdicts(r) == want
    assert r["readiness"]["pq_authentication"] is (name == "quic-big")  # ECDSA chains elsewhere
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
            local.wait_listening(place, tb.server_addr, SSH_PORT)
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
    # the whole scan from behind it: the post-quantum group's ClientHello spans two segments and never gets the
    # server's answer, so the scan does not call the server classical
    r = scan_mod.scan(a, p.place, n=1, timeout_s=2, servername=p.servername, groups=["X25519", "X25519MLKEM768"])
    assert r["groups"]["accepted"] == ["X25519"]
    assert r["readiness"]["pq_blocked"] == ["X25519MLKEM768"]
    assert r["readiness"]["pq_key_exchange"] == "unknown: reset or silence on the path"
    assert "X25519MLKEM768 met a reset or silence" in r["pq"]


# ---- a population scan of the local population ----------------------------------------------------------

CLOSED_PORTS = range(5000, 5120)  # nothing listens there: refused at once
RATE = 40  # connections per second


def target_file(path, server_addr: str) -> list[str]:
    """The population's four servers and 120 closed ports, with bad lines and a duplicate among them."""
    good = [f"{server_addr}:{port}" for port, _, _ in POPULATION.values()] + \
        [f"{server_addr}:{p}" for p in CLOSED_PORTS]
    lines = ["# the local population", *good[:2], "10.0.0.1:notaport", good[0] + "   # listed twice", *good[2:60],
             "https://example.org:443", *good[60:], "10.0.0.1:99999"]
    path.write_text("\n".join(lines) + "\n")
    return good, {text: k for k, text in enumerate(lines, start=1)}


def stored(lines) -> list[str]:
    """The targets a population scan's progress lines say it stored."""
    return [line.split()[2] for line in lines if line.startswith("[scan] ") and " (line " in line]


def syn_times(tb, tmp_path) -> list[int]:
    return sorted(f["syn_ns"] for f in tb.backend.flows(tmp_path / "flows.jsonl") if f.get("syn_ns"))


@pytest.mark.root
def test_population_scan_is_polite_resumable_and_summed_up(population, tmp_path):
    import signal
    import sys

    from conftest import ROOT, run_pqbench
    from pqbench import store
    from pqbench.store import scan_population as sp
    tb, chain = population["tb"], population["chain"]
    f, db = tmp_path / "targets.txt", tmp_path / "population.duckdb"
    good, line_of = target_file(f, tb.server_addr)
    argv = ["scan", "--file", f, "--netns", tb.client_ns, "--rate", str(RATE), "-n", "1", "--timeout", "2s",
            "--groups", ",".join(GROUPS),
            "--backoff", "0", "--ca", chain.root_cert, "--servername", chain.server_name, "--db", db]
    tb.reset_counters()  # empties the wire recorder: every connection from here is the scan's
    proc = subprocess.Popen([sys.executable, "-m", "pqbench", *map(str, argv)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    seen = []
    for line in proc.stderr:  # interrupted once 20 targets are stored
        seen.append(line)
        if len(stored(seen)) == 20:
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.stderr.read()  # through the same reader: communicate() would skip the lines it has buffered
    proc.wait(timeout=60)
    err = "".join(seen) + rest
    first = stored(err.splitlines())
    assert proc.returncode == 130, err
    assert "continue with: pqbench scan --file" in err and "--resume" in err
    assert line_of["10.0.0.1:notaport"] == 4
    for bad in ("10.0.0.1:notaport", "https://example.org:443", "10.0.0.1:99999"):
        assert f"{f}:{line_of[bad]}: skipped {bad!r}" in err, err
    assert "'https://example.org:443': only ssh:// or" in err and "may prefix an address" in err  # the registry's schemes
    syns_first = syn_times(tb, tmp_path)

    r = run_pqbench(*argv, "--resume", "--json", timeout=600)
    assert r.returncode == 0, r.stderr
    resumed = stored(r.stderr.splitlines())
    assert not set(resumed) & set(first)  # nothing stored in the first part is scanned again
    assert sorted(set(first) | set(resumed)) == sorted(good) and len(first) + len(resumed) == len(good)
    con = store.connect(db, read_only=True)
    pid = sp.latest(con)
    done = sp.done_targets(con, pid)
    con.close()
    assert sorted(done) == sorted(good)

    # the rate: a slot every 1/RATE s (a pqtimer run's samples spaced by at least that too), taken as
    # pqtimer starts; its SYN follows the process's launch, which a busy machine delays by a varying few ms,
    # so the wire is held to RATE x (the span + 1 s of launch delay), over the scan and any ten seconds
    syns = syn_times(tb, tmp_path)
    assert len(syns) >= len(good) * 2  # the connect probes and the handshakes
    assert len(syns) - 1 <= RATE * ((syns[-1] - syns[0]) / 1e9 + 1)
    j = 0
    for i in range(len(syns)):
        while j < len(syns) and syns[j] - syns[i] < 10e9:
            j += 1
        assert j - i <= RATE * 11, f"{j - i} connections within ten seconds"
    assert syns_first and len(syns) > len(syns_first)

    # the aggregate matches the population's composition
    agg = __import__("json").loads(r.stdout)["aggregate"]
    tls = agg["tls"]
    assert agg["targets"] == len(good) and tls["answered"] == 5 and agg["failures"] == {"refused": len(CLOSED_PORTS)}
    assert tls["hybrid_pq_accepted"] == {"n": 3, "of": 5, "percent": 60.0}  # pq-first, secp-only, quic-big
    assert tls["pq_accepted"]["n"] == 4 and tls["pq_by_default"]["n"] == 3  # quic-big: when the client lists it first
    assert tls["hrr_for_x25519"]["n"] == 3 and tls["pq_certificate"]["n"] == 1  # quic-big's ML-DSA-87 chain
    con = store.connect(db, read_only=True)
    split = {r["address"]: next(({k: p.get(k) for k in ("verdict", "detail")} for p in r["result"].get("probes") or []
                                 if p.get("probe") == "split ClientHello"), None) for r in store.scan_rows(con)}
    con.close()
    # (a slower machine's run once counted one target intolerant; the verdicts say which and why)
    assert tls["split_intolerant"]["n"] == 0, split
    assert tls["flight_over_initial_window"]["n"] == 1

