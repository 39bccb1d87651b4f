"""Targets: servers pqbench did not start, measured over a path that is measured instead of emulated.

In the testbed: `pqbench serve` runs in the server namespace (as it would on a user's server), a spec
names its manifest's two chains as targets plus an unreachable one and one with a wrong server name,
and the run's clients work from the client namespace (the "real" path there is the emulated link at
RTT_MS). Each target's cells are stored with the path's round trip; failures keep their class; the
report shows the targets figure; `handshake --target` measures one cell; Ctrl-C stops `serve` and
leaves nothing running. The rest checks the inputs without root."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import processes_mentioning, run_pqbench

from pqbench import store
from pqbench.endpoints.remote import UNKNOWN_SIG
from pqbench.errors import BadInput
from pqbench.experiment import cells as cellmod
from pqbench.experiment import spec as specmod
from pqbench.measure import serve
from pqbench.remote import address
from pqbench.testbed import LinkSpec, RealPath, Testbed
from pqbench.testbed.path import Path as NetPath

RTT_MS = 10


def _manifest(tmp_path: Path, sigs=("ecdsap256", "mldsa44")) -> Path:
    for s in sigs:
        (tmp_path / "certs" / s).mkdir(parents=True)
        (tmp_path / "certs" / s / "root.crt").write_text("not read by the parser\n")
    m = {"pqbench_serve": 1, "address": "192.0.2.10",
         "tls": [{"port": 4433 + i, "sig": s, "server_name": "server.pqbench.test", "ca": f"certs/{s}/root.crt",
                  "bytes_sent": 100} for i, s in enumerate(sigs)], "ssh": []}
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    return tmp_path / "manifest.json"


def _spec(tmp_path: Path, body: str) -> specmod.Spec:
    path = tmp_path / "t.toml"
    path.write_text(body)
    return specmod.read(path)


def test_a_manifest_target_is_one_target_per_chain_and_the_cells_cross_it_with_the_algorithms(tmp_path):
    _manifest(tmp_path)
    s = _spec(tmp_path, '[axes]\nkex = ["X25519", "X25519MLKEM768"]\nsig = ["ecdsap256", "mldsa44"]\n'
                        '[[target]]\nname = "lab"\nmanifest = "manifest.json"\n'
                        '[[target]]\nname = "other"\naddress = "192.0.2.20:443"\n')
    assert [(t.name, t.address.ip, t.address.port, t.credentials.sig) for t in s.targets] == [
        ("lab/ecdsap256", "192.0.2.10", 4433, "ecdsap256"), ("lab/mldsa44", "192.0.2.10", 4434, "mldsa44"),
        ("other", "192.0.2.20", 443, UNKNOWN_SIG)]
    assert s.targets[0].credentials.root_cert == tmp_path / "certs" / "ecdsap256" / "root.crt"  # relative to the spec
    assert s.parallel == 1 and s.lanes == 1
    cells = cellmod.expand(s)
    assert len(cells) == 2 * 3
    assert {(c.server, c.client, c.target) for c in cells} == {("remote", "openssl", t.name) for t in s.targets}
    params = cells[0].params()
    assert params["rtt_ms"] is None and params["loss"] is None and params["target"] == cells[0].target
    assert cells[0].link_spec(1) == LinkSpec()
    assert len({c.cell_id for c in cells}) == 6


def test_a_client_that_always_verifies_skips_a_target_without_its_ca(tmp_path):
    s = _spec(tmp_path, '[axes]\nkex = ["X25519"]\nclient = ["openssl", "gotls"]\n'
                        '[[target]]\nname = "t"\naddress = "192.0.2.20:443"\n')
    reasons = {c.client: cellmod.unavailable_reason(c, s) for c in cellmod.expand(s)}
    assert reasons["openssl"] is None
    assert "cannot record a verification result" in reasons["gotls"] and "CA" in reasons["gotls"]
    from pqbench.measure import single  # the one-cell command refuses the same pair before it starts
    with pytest.raises(BadInput) as e:
        single.one_cell("X25519", "", client="gotls", target=s.targets[0])
    assert e.value.field == "--client"


def test_an_ssh_target_is_measured_by_sshtimer_and_skipped_by_a_client_that_authenticates(tmp_path):
    s = _spec(tmp_path, '[axes]\nkex = ["mlkem768x25519-sha256"]\nclient = ["gossh", "openssh"]\n'
                        '[[target]]\naddress = "ssh://192.0.2.20:22"\n')
    cells = {c.client: c for c in cellmod.expand(s)}
    assert {(c.server, c.kex) for c in cells.values()} == {("remote-ssh", "mlkem768x25519-sha256")}
    assert cellmod.unavailable_reason(cells["gossh"], s) is None
    assert "NEWKEYS" in cellmod.unavailable_reason(cells["openssh"], s)


@pytest.mark.parametrize("body, field", [
    ('[axes]\nkex = ["X25519"]\nrtt = ["10ms"]\n[[target]]\naddress = "192.0.2.1:443"\n', "axes.rtt"),
    ('parallel = 4\n[axes]\nkex = ["X25519"]\n[[target]]\naddress = "192.0.2.1:443"\n', "parallel"),
    ('[axes]\nkex = ["X25519"]\nserver = ["rustls"]\n[[target]]\naddress = "192.0.2.1:443"\n', "axes.server"),
    ('[axes]\nkex = ["X25519"]\n[[target]]\naddress = "192.0.2.1:99999"\n', "target[0].address"),
    ('[axes]\nkex = ["X25519"]\n[[target]]\naddress = "https://192.0.2.1"\n', "target[0].address"),
    ('[axes]\nkex = ["X25519"]\n[[target]]\naddress = "192.0.2.1:443"\nca = "missing.pem"\n', "target[0].ca"),
    ('[axes]\nkex = ["X25519"]\n[[target]]\nname = "a"\n', "target[0].address"),
    ('[axes]\nkex = ["X25519"]\n[[target]]\nmanifest = "manifest.json"\nsig = "falcon512"\n', "target[0].sig"),
    ('rate = 0\n[axes]\nkex = ["X25519"]\n[[target]]\naddress = "192.0.2.1:443"\n', "rate"),
    ('rate = 5\n[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]\n', "rate"),
])
def test_bad_target_specs_name_the_field(tmp_path, body, field):
    _manifest(tmp_path)
    with pytest.raises(BadInput) as e:
        _spec(tmp_path, body)
    assert e.value.field == field


def test_addresses_parse_and_a_real_path_refuses_emulation():
    a = address.parse("x", "ssh://127.0.0.1")
    assert (a.protocol, a.ip, a.port) == ("ssh", "127.0.0.1", 22)
    assert address.parse("x", "localhost:4433").ip == "127.0.0.1"
    with pytest.raises(BadInput):
        address.parse("--target", "ssh://127.0.0.1:22", protocol="tls")
    with pytest.raises(BadInput) as e:
        RealPath().reconfigure(LinkSpec.symmetric(10))
    assert e.value.field == "link"
    RealPath().reconfigure(LinkSpec())  # nothing asked, nothing refused


def test_the_real_path_is_a_path_beside_the_testbed_that_says_it_is_not_emulated():
    """The rig and the runner ask the path (emulated) instead of comparing its backend's name; provenance
    still names it "real"."""
    real, tb = RealPath(netns={"client": "pqb-x-cli"}), Testbed()
    assert isinstance(real, NetPath) and isinstance(tb, NetPath)
    assert (real.emulated, tb.emulated) == (False, True)
    assert real.backend_name == real.info()["backend"] == "real"
    assert (real.ns("client"), real.ns("server")) == ("pqb-x-cli", None)
    assert real.run("server", ["true"]).returncode == 0  # in the host's own network: no namespace

    class Half(NetPath):  # a path that forgot what a rig needs cannot be made
        emulated = False
    with pytest.raises(TypeError):
        Half()


def test_serve_binds_a_wildcard_only_when_asked():
    with pytest.raises(BadInput) as e:
        serve.check_address("0.0.0.0", False)
    assert e.value.field == "--address"
    assert serve.check_address("0.0.0.0", True) == "0.0.0.0"
    r = run_pqbench("serve", "--address", "0.0.0.0")
    assert r.returncode == 2 and "--any-address" in r.stderr


# --- in the testbed ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lab(built_stack, tmp_path_factory):
    """A testbed with `pqbench serve` in its server namespace: (testbed, serve process, its folder)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces)")
    from pqbench.testbed import Testbed
    d = tmp_path_factory.mktemp("serve")
    with Testbed(LinkSpec.symmetric(RTT_MS)) as tb:
        proc = subprocess.Popen([sys.executable, "-m", "pqbench", "serve", "--address", tb.server_addr, "--netns",
                                 tb.server_ns, "--dir", str(d), "--sig", "ecdsap256,mldsa44", "--workers", "2",
                                 "--ssh-hostkey", "ssh-ed25519"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not (d / "manifest.json").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (d / "manifest.json").exists(), proc.communicate(timeout=30)
        yield tb, proc, d
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_runs_its_servers_at_the_priority_of_measured_processes(lab):
    """A remote client measures what `pqbench serve` runs, as one in a testbed does: its nginx and sshd at
    real-time priority (sched). At normal priority an sshd forks each connection into a session of its own,
    which beside busy pqbench sessions (nice -20) did not finish a key exchange in 5 s."""
    from pqbench.testbed import sched
    _, proc, _ = lab
    pids = [int(p.split(":")[0]) for p in processes_mentioning("nginx", "sshd")]
    servers = {p: Path(f"/proc/{p}/comm").read_text().strip() for p in pids if str(proc.pid) in _ancestors(p)}
    assert {"nginx", "sshd"} <= set(servers.values()), servers
    for pid in servers:
        assert (os.sched_getscheduler(pid), os.sched_getparam(pid).sched_priority) == (os.SCHED_FIFO,
                                                                                        sched.MEASURED_FIFO), servers


def _ancestors(pid: int) -> list[str]:
    out = []
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
        out.append(str(pid))
    return out


def test_serve_writes_a_manifest_with_ports_chains_and_keys_kept_private(lab):
    tb, _, d = lab
    m = json.loads((d / "manifest.json").read_text())
    assert m["address"] == tb.server_addr
    assert [(p["port"], p["sig"]) for p in m["tls"]] == [(4433, "ecdsap256"), (4434, "mldsa44")]
    assert all((d / p["ca"]).is_file() and "X25519MLKEM768" in p["groups"] for p in m["tls"])
    assert m["tls"][1]["bytes_sent"] > m["tls"][0]["bytes_sent"]  # an ML-DSA chain is larger
    (ssh,) = m["ssh"]
    assert (ssh["port"], ssh["sig"]) == (2222, "ssh-ed25519") and ssh["fingerprint"].startswith("SHA256:")
    assert "mlkem768x25519-sha256" in ssh["kex"]
    keys = list(d.rglob("*.key"))
    assert keys and all(k.stat().st_mode & 0o077 == 0 for k in keys)


def test_a_target_spec_stores_cells_per_target_with_the_measured_path(lab, tmp_path):
    tb, _, d = lab
    (tmp_path / "t.toml").write_text(f'''name = "targets"
samples = 8
rate = 50
netns = "{tb.client_ns}"
timeout = "30s"  # beside six test workers serve's sshd once sent no identification within 10 s
[axes]
kex = ["X25519", "X25519MLKEM768"]
sig = ["ecdsap256", "mldsa44"]
[[target]]
name = "lab"
manifest = "{d / 'manifest.json'}"
[[target]]
name = "lab-ssh"
manifest = "{d / 'manifest.json'}"
sig = "ssh-ed25519"
[[target]]
name = "closed"
address = "{tb.server_addr}:9"
[[target]]
name = "misnamed"
address = "{tb.server_addr}:4433"
ca = "{d / 'certs' / 'ecdsap256' / 'root.crt'}"
server_name = "wrong.example"
''')
    db = tmp_path / "r.duckdb"
    r = run_pqbench("run", tmp_path / "t.toml", "--db", db)
    assert r.returncode == 0, r.stderr[-3000:]
    con = store.connect(db, read_only=True)
    rows = {(c["target"], c["kex"]): c for c in store.cell_rows(con, store.resolve_run(con, None))}
    assert {t for t, _ in rows} == {"lab/ecdsap256", "lab/mldsa44", "lab-ssh", "closed", "misnamed"}
    ssh = rows["lab-ssh", "mlkem768x25519-sha256"]  # the catalog's X25519MLKEM768, as SSH names it
    assert ssh["status"] == "done" and ssh["ok"] == 8 and ssh["client"] == "gossh", ssh
    assert json.loads(ssh["path"])["before"]["p50_ms"] >= RTT_MS
    for kex in ("X25519", "X25519MLKEM768"):
        for target in ("lab/ecdsap256", "lab/mldsa44"):
            c = rows[target, kex]
            assert c["status"] == "done" and c["ok"] == 8, c
            path = json.loads(c["path"])
            for when in ("before", "after"):  # the emulated delay is a floor the connects cannot beat
                assert path[when]["ok"] == 10 and path[when]["p50_ms"] >= RTT_MS, path
        closed = rows["closed", kex]
        assert closed["ok"] == 0 and json.loads(closed["failure_classes"]) == {"connect_refused": 8}
        assert json.loads(closed["path"])["before"]["ok"] == 0
        assert json.loads(rows["misnamed", kex]["failure_classes"]) == {"cert_verify": 8}
    groups = con.execute("SELECT DISTINCT c.kex, s.\"group\", s.sigalg FROM samples s JOIN cells c USING (run_id, "
                         "cell_id) WHERE c.target = 'lab/mldsa44' AND s.ok").fetchall()
    assert sorted((k, g.lower(), s) for k, g, s in groups) == [("X25519", "x25519", "mldsa44"),
                                                               ("X25519MLKEM768", "x25519mlkem768", "mldsa44")]
    con.close()

    out = tmp_path / "report"
    r = run_pqbench("report", "--db", db, "--out", out)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (out / "figures" / "targets.png").exists()
    md = (out / "summary.md").read_text()
    section = md[md.index("## Targets"):]
    assert f"{tb.server_addr}:4434" in section and "| X25519MLKEM768 + mldsa44 |" in section
    assert "| mlkem768x25519-sha256 + ssh-ed25519 |" in section  # the stacks vary only with the protocol


def test_handshake_target_measures_one_cell_from_the_command_line(lab):
    tb, _, d = lab
    r = run_pqbench("handshake", "--target", f"{tb.server_addr}:4434", "--kex", "X25519MLKEM768", "-n", "5",
                    "--rate", "50", "--netns", tb.client_ns, "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout)
    assert result["summary"]["ok"] == 5
    assert result["negotiated"] == {"group": "X25519MLKEM768", "sigalg": "mldsa44"}
    assert result["path"]["before"]["p50_ms"] >= RTT_MS
    assert result["summary"]["p50_ms"] >= 2 * RTT_MS  # TCP, then TLS: two round trips at least
    r = run_pqbench("handshake", "--target", f"{tb.server_addr}:4434", "--kex", "X25519", "--rtt", "10ms")
    assert r.returncode == 2 and "--target" in r.stderr


def test_ssh_target_measures_the_key_exchange_without_an_account(lab):
    """sshtimer --kex-only: to NEWKEYS, host key recorded (not known) or verified (known)."""
    tb, _, d = lab
    m = json.loads((d / "manifest.json").read_text())
    for known in (None, d / m["ssh"][0]["host_key"]):
        # beside six test workers serve's sshd sent its identification 6.6 s after the connect: 30 s per sample
        r = run_pqbench("ssh", "--target", f"ssh://{tb.server_addr}:2222", "--kex", "mlkem768x25519-sha256", "-n", "4",
                        "--rate", "50", "--timeout", "30s", "--netns", tb.client_ns, "--json", "--keep",
                        *(["--ca", known] if known else []))
        assert r.returncode == 0, r.stderr[-2000:]
        result = json.loads(r.stdout)
        assert result["summary"]["ok"] == 4
        assert result["negotiated"] == {"group": "mlkem768x25519-sha256", "sigalg": "ssh-ed25519"}
        assert result["summary"]["p50_ms"] >= 2 * RTT_MS  # TCP, identification/KEXINIT, the exchange: 2 RTT at least
        samples = [json.loads(l) for l in (Path(result["run_dir"]) / "samples.jsonl").read_text().splitlines()]
        assert {s["host_key_fingerprint"] for s in samples} == {m["ssh"][0]["fingerprint"]}
        assert all(s["t_ns"]["userauth_done"] is None for s in samples)  # never authenticated


def test_ctrl_c_stops_serve_and_leaves_nothing_running(lab):
    _, proc, d = lab
    assert processes_mentioning(str(d))  # its servers run until asked to stop
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert processes_mentioning(str(d)) == []


def test_serve_takes_the_axes_that_make_a_port_and_serves_them(lab):
    """`serve --server-groups … --chain webpki`: the server's registered axes as options (from their records); its
    port serves that preference (a client sharing X25519 but listing the hybrid gets a HelloRetryRequest) and
    that chain (more bytes than the plain chain of the same signature)."""
    tb, _, d = lab
    d2 = d.parent / (d.name + "-axes")
    proc = subprocess.Popen([sys.executable, "-m", "pqbench", "serve", "--address", tb.server_addr, "--netns",
                             tb.server_ns, "--dir", str(d2), "--sig", "ecdsap256", "--port", "5433", "--workers", "1",
                             "--server-groups", "X25519MLKEM768/X25519", "--chain", "webpki"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (d2 / "manifest.json").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (d2 / "manifest.json").exists(), proc.communicate(timeout=30)
        m, plain = json.loads((d2 / "manifest.json").read_text()), json.loads((d / "manifest.json").read_text())
        assert m["axes"] == {"server_groups": "X25519MLKEM768/X25519", "chain": "webpki"} and "axes" not in plain
        assert m["tls"][0]["bytes_sent"] > plain["tls"][0]["bytes_sent"]
        r = run_pqbench("handshake", "--target", f"{tb.server_addr}:5433", "--kex", "X25519", "--offer",
                        "X25519 / X25519MLKEM768", "-n", "3", "--rate", "50", "--netns", tb.client_ns, "--json")
        assert r.returncode == 0, r.stderr[-2000:]
        result = json.loads(r.stdout)
        assert result["summary"]["ok"] == 3 and result["negotiated"]["group"] == "X25519MLKEM768"
        assert result["tls"]["hrr"] == 3
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


@pytest.mark.parametrize("argv,field,code", [
    (["--sig", "ecdsap256", "--chain", "bogus"], "--chain", 2),
    (["--sig", "", "--ssh-hostkey", "ssh-ed25519", "--server-groups", "X25519"], "--server-groups", 2),
    (["--sig", "ecdsap256", "--stack", "rustls", "--server-groups", "X25519MLKEM768/X25519"], "--server-groups", 3)])
def test_serve_refuses_an_axis_it_cannot_serve_naming_the_option(argv, field, code, built_stack):
    r = run_pqbench("serve", "--address", "127.0.0.1", *argv, "--duration", "1s")
    assert r.returncode == code and field in r.stderr, r.stderr[-1000:]
