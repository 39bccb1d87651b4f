"""TLS and SSH in one `pqbench run`: each cell names its algorithms as its protocol does, is measured by
its protocol's stacks on the same link, is stored with its protocol, and the report puts the two
protocols side by side. A size-only host key is labelled as such in the store and the report."""

import stat
import textwrap

import pytest

from conftest import SSH_PROCESS_MARKS, processes_mentioning, run_pqbench
from pqbench import analysis, report, store
from pqbench import protocol as proto

pytestmark = pytest.mark.root

SPEC = """
name = "tls-ssh"
seed = 5
parallel = 2
samples = 12
warmup = 1
calibration_samples = 20
lanes = 2
[axes]
protocol = ["tls", "ssh"]
kex = ["X25519", "X25519MLKEM768", "frodo640aes"]
sig = ["ed25519", "sphincssha2128fsimple"]
rtt = ["10ms"]
"""


@pytest.fixture(scope="module")
def mixed(built_stack, tmp_path_factory):
    d = tmp_path_factory.mktemp("protocols")
    spec, db = d / "tls-ssh.toml", d / "results.duckdb"
    spec.write_text(textwrap.dedent(SPEC))
    before = set(processes_mentioning(*SSH_PROCESS_MARKS))
    r = run_pqbench("run", spec, "--db", db, "--quiet", "--keep", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    left = [p for p in processes_mentioning(*SSH_PROCESS_MARKS) if p not in before]
    assert not left, f"SSH processes left after the run: {left}"
    run_id = r.stdout.strip().splitlines()[-1]
    con = store.connect(db, read_only=True)
    try:
        rows = store.cell_rows(con, run_id)
        a = analysis.analyse(con, run_id, resamples=200)
        built = report.build(con, run_id, d / "report", resamples=200)
    finally:
        con.close()
    return {"rows": rows, "analysis": a, "report": built, "dir": d, "run": run_id}


def test_each_cell_names_its_algorithms_as_its_protocol_does(mixed):
    got = {(r["protocol"], r["kex"], r["sig"]): r for r in mixed["rows"]}
    assert len(got) == 2 * 3 * 2
    tls, ssh = got["tls", "X25519MLKEM768", "ed25519"], got["ssh", "mlkem768x25519-sha256", "ssh-ed25519"]
    assert (tls["server"], tls["client"], tls["status"]) == ("openssl", "openssl", "done")
    assert (ssh["server"], ssh["client"], ssh["status"]) == ("openssh", "gossh", "done")
    # A size-only host key says so in its name wherever the cell appears.
    assert got["ssh", "curve25519-sha256", "sizeonly-sphincssha2128fsimple"]["status"] == "done"
    # FrodoKEM has no SSH name: the SSH stacks skip it with the reason, TLS measures it.
    frodo = got["ssh", "frodo640aes", "ssh-ed25519"]
    assert frodo["status"] == "skipped" and "frodo640aes" in frodo["reason"]
    assert got["tls", "frodo640aes", "ed25519"]["status"] == "done"


def test_ssh_samples_negotiated_the_ssh_names(mixed):
    for c in mixed["analysis"].cells:
        if c.row["protocol"] == "ssh":
            assert c.groups == [c.row["kex"]], (c.row["kex"], c.groups)
            assert c.bound is None and "SSH" in c.bound_note  # no TLS flight model for SSH
            # SSH's own phases are stored: one after another from the client's start to its NEWKEYS, so each
            # sample's add up to its handshake time (their medians need not: on a busy machine different
            # samples are late in different phases, and the sum of the medians fell 19 % short of the median)
            assert set(c.phases) == {"TCP handshake", "server identification", "KEXINIT exchange",
                                     "key exchange init→reply", "reply→client NEWKEYS"}
            split = proto.get("ssh").splits
            assert split[0][1] == "start" and split[-1][2] == "newkeys_sent"  # sshtimer's handshake_done
            assert all(a[2] == b[1] for a, b in zip(split, split[1:])), split
            assert all(0 < v <= c.p50 for v in c.phases.values()), (c.phases, c.p50)


def test_the_report_puts_tls_and_ssh_side_by_side(mixed):
    page = (mixed["dir"] / "report" / "summary.md").read_text()
    assert "## TLS vs SSH" in page
    section = page.split("## TLS vs SSH")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| RTT")]
    # X25519 and X25519MLKEM768 with ed25519 and with SPHINCS+ (size-only in SSH): four pairs.
    assert len(rows) == 4, section
    assert any("X25519MLKEM768" in r and "mlkem768x25519-sha256 + ssh-ed25519" in r for r in rows)
    assert any("sizeonly-sphincssha2128fsimple" in r for r in rows)
    assert "Size-only: an SSH host key named sizeonly-ALG" in page
    # every time is named with the stacks that measured it: openssl/openssl for TLS, and for SSH the
    # default pair, OpenSSH's sshd measured by sshtimer, whose extra round trip the note explains
    assert all("| openssl/openssl |" in r and "| openssh/gossh |" in r for r in rows), rows
    assert "sends its KEXINIT only after the client's has arrived" in section


def test_keys_of_the_run_are_private(mixed):
    from pqbench import paths
    keys = paths.BUILD / "runs" / mixed["run"] / "keys"
    private = [p for p in keys.rglob("*") if p.is_file() and p.name in ("host_key", "user_key", "ca_key")]
    assert private and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in private), private
