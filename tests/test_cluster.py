"""`pqbench run --cluster`: a real Dask scheduler and pqbench workers on this machine, each worker in its own UTS
namespace (its own host name, so its own node), measuring a real spec over real testbeds."""

import signal
import subprocess
import time
from pathlib import Path

import pytest

from pqbench import paths, store
from pqbench.cluster import node as nodemod
from pqbench.cluster.driver import CONNECT_TIMEOUT_S
from pqbench.cluster.local import BIN, LocalCluster
from pqbench.testbed import registry

pytestmark = [pytest.mark.root, pytest.mark.slow]

SPEC = """
name = "clustered"
seed = 5
parallel = 1
timeout = "5s"
warmup = 1

[samples]
min = {n}
max = {n}
ci = 0.5

[axes]
kex = ["X25519", "X25519MLKEM768"]
sig = ["ecdsap256"]
rtt = ["5.6ms", "31.1ms"]
loss = ["0%"]
"""


def spec_file(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "clustered.toml"
    path.write_text(SPEC.format(n=n))
    return path


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def leftover_namespaces(before: set[str], cluster, *procs) -> set[str]:
    """Namespaces of the cluster's processes still there, and new ones of nobody's testbed (other tests'
    testbeds aside: the suite runs several tests at once)."""
    pids = {p.pid for p in cluster.workers.values()} | {p.pid for p in procs}
    records = registry.all_records().values()
    owned = {ns for r in records if (r.get("owner") or {}).get("pid") in pids for ns in r.get("namespaces", [])}
    recorded = {ns for r in records for ns in r.get("namespaces", [])}
    return (owned & namespaces()) | {ns for ns in namespaces() - before if ns not in recorded}


def test_a_spec_runs_across_two_nodes_into_one_store(cluster, tmp_path):
    cluster.worker("node-a"), cluster.worker("node-b")
    cluster.wait_for(2)
    db = tmp_path / "r.duckdb"
    proc = cluster.run(spec_file(tmp_path, 30), db)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    assert "on node-a" in err and "on node-b" in err  # progress names the node of each cell
    con = store.connect(db, read_only=True)
    run_id = out.strip()
    cells = store.cell_rows(con, run_id)
    assert len(cells) == 4 and {c["status"] for c in cells} == {"done"}
    assert len({c["cell_id"] for c in cells}) == 4
    assert {c["node"] for c in cells} == {"node-a", "node-b"}
    for c in cells:  # every sample of a cell stored once
        assert con.execute("SELECT count(*), count(DISTINCT seq) FROM samples WHERE run_id = ? AND cell_id = ?",
                           [run_id, c["cell_id"]]).fetchone() == (30, 30)
    for name in ("node-a", "node-b"):  # one slot: a node never measures two cells at once
        spans = sorted((c["started"], c["finished"]) for c in cells if c["node"] == name)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans
    nodes = {r["node"]: r for r in store.node_rows(con, run_id)}
    assert set(nodes) == {"node-a", "node-b"}
    assert sum(row["cells"] for row in nodes.values()) == 4
    for name, row in nodes.items():
        assert row["status"] == "done"
        assert row["provenance"]["host"]["hostname"] == name and row["provenance"]["slots"] == 1
        assert row["calibration_start"]["p50_ms"] > 0 and row["calibration_end"]["p50_ms"] > 0
        assert row["provenance"]["engine_idle_cpu"] is not None
        assert row["provenance"]["engine_idle_cpu_end"] is not None  # measured again when the node closed the run
    crypto_nodes = {r[0] for r in con.execute("SELECT DISTINCT node FROM crypto WHERE run_id = ?", [run_id]).fetchall()}
    assert crypto_nodes == {"node-a", "node-b"}  # each node's own crypto rounds, for its own cells' model
    assert not (paths.BUILD / "runs" / run_id).exists()  # nodes and driver removed their files


def test_a_killed_worker_s_cell_is_measured_again_elsewhere_and_stored_once(cluster, tmp_path):
    survivor = cluster.worker("node-a")
    victim = cluster.worker("node-b")
    cluster.wait_for(2)
    before = namespaces()
    db = tmp_path / "r.duckdb"
    proc = cluster.run(spec_file(tmp_path, 80), db)  # ~80 handshakes at 31.1 ms: several seconds per cell
    lines = []
    for line in proc.stderr:  # wait until node-b measures a cell, then kill its worker outright
        lines.append(line)
        if "node node-b joined" in line:
            break
    time.sleep(1.5)
    victim.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=600)
    err = "".join(lines) + err
    assert proc.returncode == 0, err
    assert "node node-b left during the run" in err
    con = store.connect(db, read_only=True)
    run_id = out.strip()
    cells = store.cell_rows(con, run_id)
    assert len(cells) == 4 and {c["status"] for c in cells} == {"done"}
    assert con.execute("SELECT count(*) FROM samples WHERE run_id = ?", [run_id]).fetchone()[0] == 4 * 80
    statuses = {r["node"]: r["status"] for r in store.node_rows(con, run_id)}
    assert statuses == {"node-a": "done", "node-b": "lost"}
    # node-a reaped node-b's testbeds when it closed the run: nothing of the dead worker is left (the workers' own:
    # another test's killed run may leave one for the moment its guardian takes)
    ours = {victim.pid, survivor.pid}
    assert not [n for n, rec in registry.all_records().items() if registry.stale(rec) and rec["owner"]["pid"] in ours]
    assert leftover_namespaces(before, cluster, proc) == set()


def test_ctrl_c_stops_the_cluster_s_cells_and_leaves_no_testbed(cluster, tmp_path):
    cluster.worker("node-a")
    cluster.wait_for(1)
    before = namespaces()
    db = tmp_path / "r.duckdb"
    proc = cluster.run(spec_file(tmp_path, 150), db)
    for line in proc.stderr:
        if "node node-a joined" in line:
            break
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "--resume" in err
    deadline = time.monotonic() + 60
    while leftover_namespaces(before, cluster, proc) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert leftover_namespaces(before, cluster, proc) == set()  # the worker (still running) closed its lanes
    assert cluster.workers["node-a"].poll() is None
    con = store.connect(db, read_only=True)
    run_id = store.resolve_run(con, "latest")
    (row,) = store.node_rows(con, run_id)
    assert row["status"] == "interrupted"
    con.close()
    # --resume continues on the cluster with the cells not yet done
    proc = cluster.run(spec_file(tmp_path, 150), db, "--resume", run_id)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and out.strip() == run_id, err
    con = store.connect(db, read_only=True)
    assert {c["status"] for c in store.cell_rows(con, run_id)} == {"done"}
    assert [r["status"] for r in store.node_rows(con, run_id)] == ["interrupted", "done"]  # one segment per start


def test_a_run_whose_scheduler_dies_ends_with_an_error_and_keeps_its_finished_cells(cluster, tmp_path):
    """The scheduler killed after the first cell: the driver waits out the engine's reconnection, then ends
    (it waited for ever before), the node's worker stops and takes its testbeds along, and a local --resume
    measures only the cells left."""
    cluster.worker("node-a")
    cluster.wait_for(1)
    before = namespaces()
    db = tmp_path / "r.duckdb"
    spec = spec_file(tmp_path, 40)
    proc = cluster.run(spec, db)
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if " 1/4 " in line:
            break
    cluster.scheduler.send_signal(signal.SIGKILL)
    t0 = time.monotonic()
    out, err = proc.communicate(timeout=CONNECT_TIMEOUT_S + 60)
    err = "".join(lines) + err
    assert time.monotonic() - t0 < CONNECT_TIMEOUT_S + 30, err
    assert proc.returncode == 1 and "the cluster's scheduler went away" in err and "--resume" in err, err
    deadline = time.monotonic() + 30
    while leftover_namespaces(before, cluster, proc) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert leftover_namespaces(before, cluster, proc) == set()
    con = store.connect(db, read_only=True)
    run_id = store.resolve_run(con, "latest")
    done = [c for c in store.cell_rows(con, run_id) if c["status"] == "done"]
    assert 1 <= len(done) < 4
    con.close()
    resumed = subprocess.run([BIN / "pqbench", "run", str(spec), "--db", str(db), "--resume", "--quiet"],
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0 and resumed.stdout.strip() == run_id, resumed.stderr[-2000:]
    con = store.connect(db, read_only=True)
    assert {c["status"] for c in store.cell_rows(con, run_id)} == {"done"}
    assert con.execute("SELECT count(*) FROM samples WHERE run_id = ?", [run_id]).fetchone()[0] == 4 * 40


def test_a_node_with_another_openssl_is_refused(cluster, tmp_path):
    """The odd node's build is this one's with Debian's OpenSSL in place of ours (PQBENCH_BUILD)."""
    system_openssl = Path("/usr/bin/openssl")
    if not system_openssl.exists():
        pytest.skip("Debian's openssl is not installed")
    other = tmp_path / "other-build"
    other.mkdir()
    for entry in paths.BUILD.iterdir():
        if entry.name != "openssl":
            (other / entry.name).symlink_to(entry)
    (other / "openssl" / "bin").mkdir(parents=True)
    (other / "openssl" / "bin" / "openssl").symlink_to(system_openssl)
    cluster.worker("odd-node", env={"PQBENCH_BUILD": str(other)})
    cluster.wait_for(1)
    proc = cluster.run(spec_file(tmp_path, 10), tmp_path / "r.duckdb")
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, err
    assert "odd-node" in err and "OpenSSL" in err


def test_credentials_cross_to_a_node_byte_for_byte_with_their_modes(tmp_path):
    from pqbench.algorithms import certs
    driver, node = tmp_path / "driver", tmp_path / "node"
    chains = {("tls", "ecdsap256"): certs.make_chain("ecdsap256", driver / "certs" / "ecdsap256")}
    nodemod.unpack_files(nodemod.pack_files(chains, driver), node)
    moved = nodemod.relocate(chains, driver, node)[("tls", "ecdsap256")]
    assert moved.leaf_key == node / "certs" / "ecdsap256" / chains[("tls", "ecdsap256")].leaf_key.name
    for f in (driver / "certs" / "ecdsap256").iterdir():
        twin = node / "certs" / "ecdsap256" / f.name
        assert twin.read_bytes() == f.read_bytes()
        assert twin.stat().st_mode & 0o777 == f.stat().st_mode & 0o777
    assert moved.leaf_key.stat().st_mode & 0o777 == 0o600


def cluster_certs(d: Path) -> dict:
    """A CA and one certificate for every party (scheduler, workers, driver), as the README makes them."""
    from pqbench.algorithms.openssl_build import run_openssl
    d.mkdir()
    ext = d / "ext.cnf"
    ext.write_text("basicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth, clientAuth\n")
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run_openssl(["req", "-x509", *key, "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"), "-days", "2",
                 "-subj", "/CN=pqbench cluster CA", "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign"])
    run_openssl(["req", *key, "-keyout", str(d / "node.key"), "-out", str(d / "node.csr"), "-subj", "/CN=node"])
    run_openssl(["x509", "-req", "-in", str(d / "node.csr"), "-CA", str(d / "ca.pem"), "-CAkey", str(d / "ca.key"),
                 "-CAcreateserial", "-out", str(d / "node.pem"), "-days", "2", "-extfile", str(ext)])
    return {"--tls-ca-file": d / "ca.pem", "--tls-cert": d / "node.pem", "--tls-key": d / "node.key"}


def test_a_cluster_over_tls(tmp_path):
    """Dask's TLS options: the scheduler, the worker and the driver each present a certificate of the CA."""
    tls = [str(x) for kv in cluster_certs(tmp_path / "tls").items() for x in kv]
    with LocalCluster(tmp_path / "logs", tls=tls) as cluster:
        assert cluster.address.startswith("tls://")
        cluster.worker("tls-node", *tls)
        cluster.wait_for(1)
        spec = spec_file(tmp_path, 10)
        plain = subprocess.run([str(BIN / "pqbench"), "run", str(spec), "--db", str(tmp_path / "no.duckdb"),
                                "--cluster", cluster.address], capture_output=True, text=True, timeout=120)
        assert plain.returncode == 2 and "--tls-cert" in plain.stderr, plain.stderr  # no certificate, no entry
        proc = cluster.run(spec, tmp_path / "r.duckdb", *tls)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        con = store.connect(tmp_path / "r.duckdb", read_only=True)
        assert {c["node"] for c in store.cell_rows(con, out.strip())} == {"tls-node"}
