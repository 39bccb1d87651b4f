"""A local population of servers pqbench did not configure for post-quantum cryptography, for a user's first
population scan and for the tests: a detached testbed whose server namespace holds `hosts` addresses, each
a machine of the same fleet (KINDS on their ports), one address more with the QUIC server and its large
chain, and one behind the ossified middlebox (pqlink's, `to=` that address only). Its target file lists
every entry; its composition (composition.json) says what each entry is and what each probe must find
there, so a scan's aggregate can be checked against it (`expected_aggregate`).

    pop = local.up(hosts=20, out=Path("population"))   # the testbed stays up: pqbench net down NAME
    pqbench scan --file population/targets.txt --netns NAME-cli --ca population/ca.pem ...

Members: Debian's own nginx on Debian's OpenSSL 3.0 and Debian's sshd (OpenSSH 9.2), unpacked from Debian's
archive (pqbench.scan.debian), each one process listening on every host's address; our nginx (OpenSSL 3.5)
with five group lists; the s2n-tls, rustls and Go servers with their libraries' default groups; a port
nothing listens on.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess
import time
from pathlib import Path

from pqbench import protocol as proto
from pqbench import endpoints
from pqbench.algorithms import certs
from pqbench.endpoints import sshkeys
from pqbench.endpoints.base import Place, Serving, Site
from pqbench.errors import BadInput, MeasurementFailed
from pqbench.scan import debian

# the groups a scan of the population tries (what the expected verdicts assume): classical, hybrid, pure ML-KEM
SCAN_GROUPS = ["X25519", "secp256r1", "secp384r1", "X448", "X25519MLKEM768", "SecP256r1MLKEM768",
               "SecP384r1MLKEM1024", "MLKEM768", "MLKEM1024"]
SERVER_NAME = certs.DEFAULT_SERVER_NAME
MAX_HOSTS = 200
SSHD_LISTEN_MAX = 16  # OpenSSH's MAX_LISTEN_SOCKS


@dataclasses.dataclass(frozen=True)
class Kind:
    """One kind of server of the population: where it listens, what runs there, what a scan must find."""
    port: int
    protocol: str  # pqbench.protocol's name (tls or ssh)
    what: str
    expect: dict  # the verdicts a scan with SCAN_GROUPS must reach (pqbench.scan.local.verdicts' keys)


def _tls(accepted, pq, hrr, *, split="accepted", over="accepted", iw="fits", quic="fits", udp="no answer", **more):
    return {"accepted": sorted(accepted), "pq_key_exchange": pq, "hrr_x25519": list(hrr), "split": split,
            "oversized": over, "iw": iw, "quic": quic, "udp": udp, **more}


# our nginx's group lists (OpenSSL's syntax: '/' ties a tuple, ':' separates tuples in preference order)
NGINX_GROUPS = {
    "nginx-pq-first": "X25519MLKEM768/X25519/secp256r1",
    "nginx-pq-tie": "X25519MLKEM768:X25519",
    "nginx-mlkem-only": "MLKEM768:MLKEM1024",
    "nginx-secp-only": "SecP256r1MLKEM768:SecP384r1MLKEM1024",
    "nginx-classical": "X25519:secp256r1",
}
# the libraries' own default groups (rustls 0.23, Go 1.24's crypto/tls, s2n-tls's default_pq policy)
LIBRARY_GROUPS = {
    "s2n": ["X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024", "secp256r1", "X25519", "secp384r1",
            "secp521r1"],
    "rustls": ["X25519MLKEM768", "X25519", "secp256r1", "secp384r1"],
    "gotls": ["X25519MLKEM768", "X25519", "secp256r1", "secp384r1", "secp521r1"],
}

KINDS = {
    "nginx-pq-first": Kind(443, "tls", "our nginx (OpenSSL 3.5), X25519MLKEM768 tied with X25519 and secp256r1",
                           _tls(["X25519", "secp256r1", "X25519MLKEM768"], "by default", ("needed", "X25519MLKEM768"))),
    # one tuple, the server's order within it: post-quantum first, yet no HelloRetryRequest for an X25519 share
    "nginx-pq-tie": Kind(4431, "tls", "our nginx, X25519MLKEM768 and X25519 in one tuple (the server's order)",
                         _tls(["X25519", "X25519MLKEM768"], "by default", ("not needed", "X25519"))),
    "nginx-mlkem-only": Kind(4432, "tls", "our nginx, pure ML-KEM only (MLKEM768, MLKEM1024)",
                             _tls(["MLKEM768", "MLKEM1024"], "by default", ("needed", "MLKEM768"))),
    "nginx-secp-only": Kind(4433, "tls", "our nginx, the SecP hybrids only",
                            _tls(["SecP256r1MLKEM768", "SecP384r1MLKEM1024"], "by default",
                                 ("needed", "SecP256r1MLKEM768"))),
    "nginx-classical": Kind(4434, "tls", "our nginx, X25519 and secp256r1 (not configured for post-quantum)",
                            _tls(["X25519", "secp256r1"], "no", ("not needed", "X25519"))),
    "debian-nginx": Kind(8443, "tls", "Debian's nginx 1.22 on Debian's OpenSSL 3.0, its default groups",
                         _tls(["X25519", "secp256r1", "secp384r1", "X448"], "no", ("not needed", "X25519"))),
    "s2n": Kind(9443, "tls", "s2n-tls's server, its default_pq policy's groups",
                _tls(["X25519", "secp256r1", "secp384r1", "X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024"],
                     "by default", ("needed", "X25519MLKEM768"))),
    # rustls's server follows the client's order unless told to ignore it (ignore_client_order)
    "rustls": Kind(9444, "tls", "rustls's server, its default groups",
                   _tls(["X25519", "secp256r1", "secp384r1", "X25519MLKEM768"], "when the client lists it first",
                        ("not needed", "X25519"))),
    "gotls": Kind(9445, "tls", "Go's crypto/tls server, its default groups",
                  _tls(["X25519", "secp256r1", "secp384r1", "X25519MLKEM768"], "by default",
                       ("needed", "X25519MLKEM768"))),
    "debian-sshd": Kind(22, "ssh", "Debian's sshd (OpenSSH 9.2), its default key exchanges",
                        {"pq_kex": ["sntrup761x25519-sha512", "sntrup761x25519-sha512@openssh.com"], "pq_first": True, "software": "OpenSSH_9.2"}),
    "closed": Kind(9999, "tls", "nothing listens (the connection is refused)", {"failure": "refused"}),
}
# the extra hosts: the QUIC server with a large chain, and a host behind the ossified middlebox
QUIC_KIND = Kind(443, "tls", "our nginx and nginx-h3 on one port number (TCP and UDP), an ML-DSA-87 chain",
                 _tls(["X25519", "X25519MLKEM768"], "when the client lists it first", ("not needed", "X25519"),
                      iw="costs a round trip", quic="costs a round trip", udp="answered",
                      over_quic=["X25519", "X25519MLKEM768"], quic_measured="costs a round trip"))
BOXED_KIND = Kind(443, "tls", "our nginx, X25519MLKEM768 then X25519, behind the ossified middlebox (reset)",
                  _tls(["X25519"], "unknown: reset or silence on the path", ("not needed", "X25519"),
                       split="reset", over="reset"))
BOXED_GROUPS = "X25519MLKEM768:X25519"


@dataclasses.dataclass
class Population:
    name: str  # the testbed's
    client_ns: str
    directory: Path
    targets_file: Path
    ca_file: Path
    entries: list[dict]  # {"target", "kind", "host"} in target-file order

    def scan_argv(self, db: Path, rate: float = 200) -> list[str]:
        """The scan this population is made for (its expected verdicts assume these groups and -n 1)."""
        return ["pqbench", "scan", "--file", str(self.targets_file), "--netns", self.client_ns, "--ca", str(self.ca_file),
                "--servername", SERVER_NAME, "--groups", ",".join(SCAN_GROUPS), "-n", "1", "--timeout", "8s",
                "--backoff", "0", "--rate", f"{rate:g}", "--db", str(db)]


def layout(hosts: list[str], quic_host: str, boxed_host: str) -> list[dict]:
    """Every entry of the population, host by host, each kind on its port."""
    entries = []
    for h in hosts:
        for kind, k in KINDS.items():
            entries.append({"target": f"{proto.get(k.protocol).scheme}{h}:{k.port}",
                            "kind": kind, "host": h})
    entries.append({"target": f"{quic_host}:{QUIC_KIND.port}", "kind": "quic-big", "host": quic_host})
    entries.append({"target": f"{boxed_host}:{BOXED_KIND.port}", "kind": "boxed-nginx", "host": boxed_host})
    return entries


def kind_of(name: str) -> Kind:
    return {"quic-big": QUIC_KIND, "boxed-nginx": BOXED_KIND}.get(name) or KINDS[name]


def up(hosts: int, out: Path, *, name: str | None = None, progress=lambda msg: None) -> Population:
    """A detached testbed holding the population (reached only from its client namespace); out gets
    targets.txt, ca.pem and composition.json. On any failure or Ctrl-C the testbed is taken down."""
    from pqbench.testbed import LinkSpec, Testbed
    from pqbench.testbed.backend_pqlink import EmulatorOptions
    from pqbench.testbed.middlebox import Middlebox
    if not 1 <= hosts <= MAX_HOSTS:
        raise BadInput("--hosts", f"{hosts} is outside 1..{MAX_HOSTS}")
    debs = {n: debian.unpacked(n) for n in debian.SETS}  # before the testbed: the first fetch takes a while
    # pqlink: only it has the middlebox, set once the boxed host's address is known
    tb = Testbed(LinkSpec.parse(rtt="2ms"), backend="pqlink", emulator=EmulatorOptions(keep_awake=0), name=name,
                 detached=True)
    tb.up()
    try:
        addrs = tb.add_server_addresses(hosts + 2)
        fleet, quic_host, boxed_host = addrs[:hosts], addrs[hosts], addrs[hosts + 1]
        # the middlebox in front of one address only: the others are reached directly
        tb.reconfigure(LinkSpec.parse(rtt="2ms", middlebox=Middlebox("reset", to=boxed_host)))
        run = tb.run_dir / "population"  # keys and configs go with the testbed (net down)
        run.mkdir(parents=True, exist_ok=True)
        out.mkdir(parents=True, exist_ok=True)
        progress(f"{tb.name}: {hosts} hosts ({fleet[0]} .. {fleet[-1]}), QUIC on {quic_host}, "
                 f"{boxed_host} behind the ossified middlebox")
        chain = certs.make_chain("ecdsap256", run / "chain", intermediates=1)
        big = certs.make_chain("mldsa87", run / "big", intermediates=1)
        ca = out / "ca.pem"
        ca.write_text(chain.root_cert.read_text() + big.root_cert.read_text())
        client = _place(tb, "client", tb.client_addr)
        start_members(tb, run, client, fleet, quic_host, boxed_host, chain, big, debs, progress)
        entries = layout(fleet, quic_host, boxed_host)
        pop = Population(tb.name, tb.client_ns, out, out / "targets.txt", ca, entries)
        write(pop, debs)
        return pop
    except BaseException:
        tb.down()
        raise


def _place(tb, side: str, addr: str) -> Place:
    return Place(addr, lambda argv, **kw: tb.popen(side, argv, **kw), lambda: tb.socket(side))


def start_members(tb, run: Path, client: Place, fleet, quic_host, boxed_host, chain, big, debs, progress) -> None:
    """Every server, each in a process group of its own (they outlive this process; `net down` kills what
    runs in the namespace)."""
    progress("Debian's nginx and sshd")
    start_debian_nginx(tb, run / "debian-nginx", debs["nginx"], fleet, chain)
    for i in range(0, len(fleet), SSHD_LISTEN_MAX):  # one sshd per 16 addresses: its most listening sockets
        start_debian_sshd(tb, run / f"debian-sshd-{i // SSHD_LISTEN_MAX}", debs["sshd"], fleet[i:i + SSHD_LISTEN_MAX])
    for i, h in enumerate(fleet, start=1):
        progress(f"host {i}/{len(fleet)} {h}: our nginx, s2n, rustls, Go")
        place = _place(tb, "server", h)
        sites = [Site(KINDS[k].port, chain, server_groups=g) for k, g in NGINX_GROUPS.items()]
        servers = [_start("openssl", place, Serving(run / h / "nginx", sites, ["X25519"], {"1k": 1000}, 1))]
        for stack, groups in LIBRARY_GROUPS.items():
            servers.append(_start(stack, place, Serving(run / h / stack, [Site(KINDS[stack].port, chain)], groups,
                                                        {"1k": 1000}, 1)))
        for s in servers:
            s.ready(client)
    progress(f"{quic_host}: nginx and nginx-h3 with an ML-DSA-87 chain; {boxed_host}: our nginx behind the middlebox")
    quic = _start("openssl", _place(tb, "server", quic_host),
                  Serving(run / "quic-big", [Site(443, big), Site(443, big, transport="quic")],
                          ["X25519MLKEM768:X25519"], {"1k": 1000}, 1))
    quic.ready(client)
    # not ready(): its check's ClientHello (X25519MLKEM768 first) spans two segments and meets the middlebox
    _start("openssl", _place(tb, "server", boxed_host),
           Serving(run / "boxed", [Site(443, chain, server_groups=BOXED_GROUPS)], ["X25519"], {"1k": 1000}, 1))
    for h in fleet:
        wait_listening(client, h, KINDS["debian-nginx"].port, run / "debian-nginx" / "error.log")
    for i, h in enumerate(fleet):
        wait_listening(client, h, KINDS["debian-sshd"].port, run / f"debian-sshd-{i // SSHD_LISTEN_MAX}" / "sshd.log")
    wait_listening(client, boxed_host, BOXED_KIND.port)


def _start(stack: str, place: Place, serving: Serving):
    server = endpoints.get(stack, "stack").server()
    server.start(place, serving)
    return server


def debian_nginx_conf(d: Path, addrs: list[str], port: int, chain) -> str:
    listens = "".join(f"\n        listen {a}:{port} ssl;" for a in addrs)
    return f"""# Debian's nginx for pqbench's local population: Debian's settings but for the paths (pqbench.scan.local)
daemon off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;
    uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
    server {{{listens}
        ssl_certificate {chain.chain_file};
        ssl_certificate_key {chain.leaf_key};
        # as Debian's /etc/nginx/nginx.conf sets it (nginx 1.22's own default lacks TLS 1.3)
        ssl_protocols TLSv1 TLSv1.1 TLSv1.2 TLSv1.3;
        ssl_prefer_server_ciphers on;
        location / {{ return 200 "ok"; }}
    }}
}}
"""


def start_debian_nginx(tb, d: Path, root: Path, addrs: list[str], chain,
                       port: int = KINDS["debian-nginx"].port) -> subprocess.Popen:
    d.mkdir(parents=True)
    conf = d / "nginx.conf"
    conf.write_text(debian_nginx_conf(d, addrs, port, chain))
    with open(d / "stderr.log", "wb") as log:
        return tb.popen("server", [str(root / "usr/sbin/nginx"), "-c", str(conf), "-p", str(d), "-e", str(d / "error.log")],
                        env=debian.env(root), stdin=subprocess.DEVNULL, stdout=log, stderr=log, process_group=0)


def debian_sshd_conf(d: Path, addrs: list[str], port: int) -> str:
    listens = "".join(f"ListenAddress {a}:{port}\n" for a in addrs)
    return f"""# Debian's sshd for pqbench's local population: its default key exchanges (pqbench.scan.local)
{listens}HostKey {d / 'host_key'}
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
PidFile {d / 'sshd.pid'}
MaxStartups 1000
"""


def start_debian_sshd(tb, d: Path, root: Path, addrs: list[str]) -> None:
    """In a mount namespace of its own, as pqbench's OpenSSH (pqbench.endpoints.openssh.sshd): the privilege
    separation user and /run/sshd it needs exist there only."""
    from pqbench.endpoints.openssh.sshd import passwd_copy
    d.mkdir(parents=True, mode=0o700)
    keys = sshkeys.make_keys("ssh-ed25519", d / "keys")
    (d / "host_key").write_bytes(Path(keys.leaf_key).read_bytes())
    (d / "host_key").chmod(0o600)
    (d / "passwd").write_text(passwd_copy(d))
    (d / "sshd_config").write_text(debian_sshd_conf(d, addrs, KINDS["debian-sshd"].port))
    sshd, q = root / "usr/sbin/sshd", shlex.quote(str(d))
    # its folder is under /run (the testbed's): reached again through /mnt once the tmpfs hides /run
    script = "; ".join(["set -e", f"mount --bind {shlex.quote(str(d / 'passwd'))} /etc/passwd", f"mount --bind {q} /mnt",
                        "mount -t tmpfs -o mode=755,size=1m pqbench-sshd /run", "mkdir -m 755 /run/sshd",
                        f"mkdir -p {q}", f"mount --bind /mnt {q}",
                        f"exec {shlex.quote(str(sshd))} -D -e -f {shlex.quote(str(d / 'sshd_config'))}"])
    with open(d / "sshd.log", "wb") as log:
        tb.popen("server", ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script],
                 env=debian.env(root), stdin=subprocess.DEVNULL, stdout=log, stderr=log, process_group=0)


def wait_listening(place: Place, ip: str, port: int, log: Path | None = None, timeout_s: float = 60.0) -> None:
    """Until a TCP connect to ip:port succeeds; MeasurementFailed with the server's log's end after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        s = place.socket()
        try:
            s.settimeout(2)
            s.connect((ip, port))
            return
        except OSError as e:
            if time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-600:].strip() if log and log.exists() else ""
                raise MeasurementFailed(f"nothing listens on {ip}:{port} after {timeout_s:g} s ({e})"
                                        + (f"; {log.name}: {tail}" if tail else "")) from None
            time.sleep(0.2)
        finally:
            s.close()


def write(pop: Population, debs: dict) -> None:
    """targets.txt (the scan's input) and composition.json (what each entry is, the verdicts to expect)."""
    lines = [f"# pqbench's local population in testbed {pop.name} (pqbench population up); reach it from "
             f"namespace {pop.client_ns}", "# composition: composition.json beside this file"]
    lines += [f"{e['target']}  # {e['kind']}" for e in pop.entries]
    pop.targets_file.write_text("\n".join(lines) + "\n")
    kinds = {k: dataclasses.asdict(kind_of(k)) for k in dict.fromkeys(e["kind"] for e in pop.entries)}
    comp = {"testbed": pop.name, "client_netns": pop.client_ns, "scan_groups": SCAN_GROUPS, "server_name": SERVER_NAME,
            "kinds": kinds, "counts": counts(pop.entries), "entries": pop.entries,
            "debian": {n: debian.provenance(r) for n, r in debs.items()},
            "expected_aggregate": expected_aggregate(pop.entries)}
    (pop.directory / "composition.json").write_text(json.dumps(comp, indent=1) + "\n")


def counts(entries: list[dict]) -> dict:
    out: dict[str, int] = {}
    for e in entries:
        out[e["kind"]] = out.get(e["kind"], 0) + 1
    return out


def expected_aggregate(entries: list[dict]) -> dict:
    """What pqbench.scan.aggregate must report for a scan of these entries, from the kinds' verdicts."""
    expect: dict[str, list[dict]] = {}
    for e in entries:
        expect.setdefault(kind_of(e["kind"]).protocol, []).append(kind_of(e["kind"]).expect)
    tls, ssh = expect.get("tls", []), expect.get("ssh", [])
    answered = [x for x in tls if "failure" not in x]
    pq = lambda x: [g for g in x["accepted"] if "MLKEM" in g]  # noqa: E731 (every post-quantum group here is ML-KEM)
    hybrid = lambda x: [g for g in pq(x) if not g.startswith("MLKEM")]  # noqa: E731
    return {"targets": len(entries), "failures": {"refused": len(tls) - len(answered)} if len(tls) > len(answered) else {},
            "tls_answered": len(answered),
            "hybrid_pq_accepted": sum(1 for x in answered if hybrid(x)),
            "pq_accepted": sum(1 for x in answered if pq(x)),
            "pq_by_default": sum(1 for x in answered if x["pq_key_exchange"] == "by default"),
            "hrr_for_x25519": sum(1 for x in answered if x["hrr_x25519"][0] == "needed"),
            "pq_certificate": sum(1 for e in entries if e["kind"] == "quic-big"),
            "flight_over_initial_window": sum(1 for x in answered if x["iw"] != "fits"),
            "split_intolerant": sum(1 for x in answered if x["split"] in ("reset", "silent", "closed")),
            "oversized_intolerant": sum(1 for x in answered if x["oversized"] in ("reset", "silent", "closed")),
            "ssh_answered": len(ssh), "ssh_pq_offered": sum(1 for x in ssh if x["pq_kex"]),
            "ssh_pq_first": sum(1 for x in ssh if x["pq_first"])}


def verdicts(result: dict) -> dict:
    """A scan result's verdicts in the keys of Kind.expect (what composition.json lists per kind)."""
    return {"tls": _tls_verdicts, "ssh": _ssh_verdicts}[result.get("protocol")](result)


def _ssh_verdicts(result: dict) -> dict:
    if "kex" not in result:
        return {"failure": (result.get("failure") or {}).get("class")}
    return {"pq_kex": result.get("kex_post_quantum", []),
            "pq_first": bool((result.get("readiness") or {}).get("kex_first_post_quantum")),
            "software": (result.get("software") or "")[:len("OpenSSH_9.2")]}


def _tls_verdicts(result: dict) -> dict:
    if not (result.get("groups") or {}).get("accepted"):
        return {"failure": (result.get("failure") or {}).get("class")}
    by = {p["probe"]: p for p in result.get("probes") or []}
    hrr = by.get("HelloRetryRequest for a client predicting X25519", {})
    udp = by.get("QUIC on the UDP port", {})
    out = {"accepted": sorted(result["groups"]["accepted"]), "pq_key_exchange": result["readiness"]["pq_key_exchange"],
           "hrr_x25519": [hrr.get("verdict"), hrr.get("group")], "split": by.get("split ClientHello", {}).get("verdict"),
           "oversized": by.get("oversized ClientHello", {}).get("verdict"),
           "iw": by.get("first flight vs TCP initial window", {}).get("verdict"),
           "quic": by.get("first flight vs QUIC 3x amplification budget", {}).get("verdict"), "udp": udp.get("verdict")}
    if udp.get("verdict") == "answered":
        out["over_quic"] = sorted(udp.get("groups") or [])
        out["quic_measured"] = by.get("QUIC first flight vs 3x amplification budget (measured)", {}).get("verdict")
    return out


def compare(agg: dict, expected: dict) -> dict:
    """pqbench.scan.aggregate's figures in expected_aggregate's keys, each {"got", "want"}, for those that differ."""
    tls, ssh = agg["tls"], agg["ssh"]
    got = {"targets": agg["targets"], "failures": dict(agg["failures"]), "tls_answered": tls["answered"],
           "ssh_answered": ssh["answered"], "ssh_pq_offered": ssh["pq_offered"]["n"], "ssh_pq_first": ssh["pq_first"]["n"],
           **{k: tls[k]["n"] for k in ("hybrid_pq_accepted", "pq_accepted", "pq_by_default", "hrr_for_x25519",
                                      "pq_certificate", "flight_over_initial_window", "split_intolerant",
                                      "oversized_intolerant")}}
    return {k: {"got": got.get(k), "want": v} for k, v in expected.items() if got.get(k) != v}
