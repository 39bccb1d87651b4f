"""The optional stacks are built the first time they are named (issue 31): with a tiny build script
that only records what it was asked to build, so these tests stay fast and the real build is untouched."""

import os
import stat

import pytest

from pqbench import paths
from pqbench.endpoints import ondemand
from pqbench.errors import MissingCapability

RECORDING_SCRIPT = """#!/usr/bin/env bash
echo "$@" >>"$PQBENCH_BUILD/asked"
for step in "$@"; do mkdir -p "$PQBENCH_BUILD/$step" && touch "$PQBENCH_BUILD/$step/.done"; done
"""


@pytest.fixture
def build(tmp_path, monkeypatch):
    """An empty build folder and a build script that records its steps and marks them done."""
    monkeypatch.setattr(paths, "BUILD", tmp_path)
    script = tmp_path / "build.sh"
    script.write_text(RECORDING_SCRIPT)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PQBENCH_BUILD_SCRIPT", str(script))
    yield tmp_path
    monkeypatch.undo()
    ondemand.forget_capabilities()  # what the stacks said of the empty folder must not outlive the test


def asked(build) -> list[str]:
    f = build / "asked"
    return f.read_text().splitlines() if f.exists() else []


def test_a_stack_is_built_once_on_first_use_with_one_progress_line(build):
    said = []
    assert ondemand.status("rustls")[0] == "buildable"
    ondemand.ensure(["openssl", "rustls", "s2n"], said.append)
    assert asked(build) == ["tlsrs"]  # rustls and s2n share one step; openssl is the core's
    assert len([s for s in said if s.startswith("[build] building")]) == 1
    assert "rustls + s2n-tls" in said[0] and "once" in said[0] and "tlsrs.log" in said[0]
    assert ondemand.status("rustls")[0] == ondemand.status("s2n")[0] == "built"
    said.clear()
    ondemand.ensure(["rustls"], said.append)
    assert asked(build) == ["tlsrs"] and said == []  # built: nothing again


def test_openssh_needs_its_packages_and_the_go_ssh_client(build):
    ondemand.ensure(["openssh", "gossh"], lambda msg: None)
    assert asked(build) == ["openssh sshgo"]


def test_a_failed_build_is_a_missing_capability_naming_the_log(build):
    (build / "build.sh").write_text("#!/usr/bin/env bash\necho 'cargo: no network' >&2\nexit 1\n")
    with pytest.raises(MissingCapability) as e:
        ondemand.ensure(["gotls"], lambda msg: None)
    assert "Go 1.27's crypto/tls" in str(e.value) and "cargo: no network" in str(e.value)
    assert str(build / "logs" / "gotls.log") in e.value.fix and "make stacks" in e.value.fix


def test_a_stack_whose_tool_is_missing_is_unavailable_and_says_why(build, monkeypatch):
    monkeypatch.setattr(ondemand.shutil, "which", lambda tool: None if tool == "cargo" else "/usr/bin/" + tool)
    status, why = ondemand.status("s2n")
    assert status == "unavailable" and "cargo is missing" in why
    with pytest.raises(MissingCapability):
        ondemand.ensure(["s2n"], lambda msg: None)
    assert asked(build) == []


def test_doctor_lists_each_stack_as_built_buildable_or_unavailable(build, monkeypatch):
    from pqbench.machine import doctor
    (build / "tlsrs").mkdir()
    (build / "tlsrs" / ".done").touch()
    monkeypatch.setattr(ondemand.shutil, "which", lambda tool: None if tool == "go" else "/usr/bin/" + tool)
    rep = doctor.report()
    got = {name: st["build"]["status"] for name, st in rep["stacks"].items()}
    assert got["rustls"] == got["s2n"] == "built"
    assert got["gotls"] == got["gossh"] == "unavailable"
    assert got["openssh"] == "buildable"
    text = doctor.format_report(rep)
    assert "stack gotls" in text and "UNAVAILABLE" in text and "go is missing" in text


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, TUN devices)")
def test_pqbench_handshake_builds_a_stack_it_names_before_measuring(tmp_path, monkeypatch):
    """The real one-cell path asks for the build: the recording script marks a separate folder, the
    measurement then uses the rustls stack `make test` built."""
    from pqbench.measure import single
    marks = tmp_path / "marks"
    marks.mkdir()
    script = tmp_path / "build.sh"
    script.write_text(RECORDING_SCRIPT.replace("$PQBENCH_BUILD", str(marks)))
    script.chmod(0o755)
    monkeypatch.setenv("PQBENCH_BUILD_SCRIPT", str(script))
    monkeypatch.setattr(ondemand, "_done", lambda step: (marks / step / ".done").exists())
    said = []
    m = single.measure(*single.one_cell("X25519", "ecdsap256", n=2, server="rustls", client="openssl"),
                       tmp_path / "run", said.append)
    assert (marks / "asked").read_text().split() == ["tlsrs"]
    assert any(s.startswith("[build] building rustls + s2n-tls") for s in said)
    assert sum(1 for s in m.samples if s.get("ok")) == 2


def test_liboqs_s_catalog_is_built_the_first_time_something_names_an_algorithm_the_demo_s_lacks(build, monkeypatch):
    """`make` builds liboqs with the demo's algorithms only (its list beside the library); a run, a handshake or a
    command naming another liboqs algorithm, alone or inside a hybrid or an offer, builds the catalog's, once."""
    from conftest import ROOT
    oqs = build / "liboqs"
    oqs.mkdir()
    (oqs / "algorithms.txt").write_text("FrodoKEM-640-AES\n")
    monkeypatch.setattr(paths, "LIBOQS_PREFIX", oqs)
    (build / "build.sh").write_text(RECORDING_SCRIPT + f'python3 {ROOT}/scripts/liboqs_algorithms.py >"{oqs}/algorithms.txt"\n')
    said = []
    ondemand.ensure(["openssl"], said.append, algorithms=ondemand.names_in(["X25519", "p256_frodo640aes", "ecdsap256",
                                                                           "X25519MLKEM768:p256_frodo640aes"]))
    assert asked(build) == [] and said == []  # the demo's: OpenSSL's own and FrodoKEM-640-AES
    ondemand.ensure(["openssl"], said.append, algorithms=ondemand.names_in(["X25519", "X25519MLKEM768:MLKEM1024"]))
    assert asked(build) == ["liboqs-catalog"]
    assert len(said) == 2 and "liboqs with every algorithm of the catalog" in said[0] and "built in" in said[1]
    ondemand.ensure(["openssl"], said.append, algorithms=["MLKEM1024", "falcon512"])
    assert asked(build) == ["liboqs-catalog"] and len(said) == 2  # built: nothing again
