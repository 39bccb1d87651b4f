import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pqbench import paths  # noqa: E402

# A run's crypto microbenchmarks (the lower-bound model's input) at 0.03 s per algorithm and round, not 0.3: no test
# judges their figures, and at 0.3 they cost the suite minutes of CPU (pqbench.measure.session.CRYPTO_SECONDS).
os.environ.setdefault("PQBENCH_CRYPTO_SECONDS", "0.03")

# The Ctrl-C tests interrupt the pqbench processes they start. A suite started in the background (a
# non-interactive shell's `&` ignores SIGINT, and what it starts inherits that) would leave those deaf to it,
# and a Python started with SIGINT ignored never raises KeyboardInterrupt: give it back its default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def run_pqbench(*args, check=False, timeout=600):
    """Runs the real CLI in a subprocess, as a user would."""
    return subprocess.run([sys.executable, "-m", "pqbench", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                          check=check)


def go_unit_tests(name: str) -> dict[str, subprocess.CompletedProcess]:
    """Runs the unit tests the build compiled for the Go stack `name` (scripts/build-go.sh, go_build_tests), each
    package's binary in its own directory as `go test` would, offline: import path -> its run."""
    tests = ROOT / "build" / name / "tests"
    runs = {}
    for line in (tests / "PACKAGES").read_text().splitlines():
        path, directory, binary = line.split("\t")
        runs[path] = subprocess.run([str(tests / binary), "-test.count=1"], cwd=ROOT / directory, capture_output=True,
                                    text=True, timeout=600, env={**os.environ, "GOPROXY": "off"})
    return runs


def assert_go_unit_tests_pass(name: str, *packages: str) -> None:
    runs = go_unit_tests(name)
    assert set(packages) <= set(runs), (packages, list(runs))
    failed = {p: r.stdout[-2000:] + r.stderr[-2000:] for p, r in runs.items() if r.returncode != 0}
    assert not failed, failed
    assert all("PASS" in r.stdout for r in runs.values()), {p: r.stdout[-500:] for p, r in runs.items()}


def machine_allowance(tb, priority: str = "measured") -> float:
    """How far a client's clock may stand from the wire's on this machine (pqbench.measure.wire.allowance_ms): from
    the emulator floor measured on the testbed tb by a process at the client's priority (wire.PRIORITIES), as a run
    measures it at its start (its link restored after)."""
    from pqbench.measure.session import floor_figures
    from pqbench.testbed import LinkSpec
    from pqbench.testbed.calibrate import measure_floor
    saved = tb.spec
    tb.reconfigure(LinkSpec())
    try:
        floor = measure_floor(tb, 100, realtime=priority == "measured")
    finally:
        tb.reconfigure(saved)
    return floor_figures(floor)["agreement_allowance_ms"]


def assert_client_leads_the_wire(w: dict, tb=None) -> None:
    """A client's handshake span against the wire's SYN-to-Finished (wire.agreement of 40 samples at 10 ms RTT):
    it starts before its SYN and stops after writing its Finished, so its median lies at or above the wire's, within
    what this machine allows (the agreement tolerance plus the spread of the emulator floor measured on tb: 0.25 ms
    plus tens of µs on an idle machine). A sample may still come out short by as long as the emulator read the
    Finished later than it read the SYN (p5 -16 µs and -97 µs in two CI runs beside three other test workers), so the
    low end is judged by the same allowance. A client that started its clock after its SYN would be a round trip
    (10 ms) short, and the allowance must stay well below that for the test to judge anything."""
    from pqbench.measure import wire
    assert w["n"] == 40, w
    allowed = machine_allowance(tb) if tb is not None else wire.TOLERANCE_MS
    assert allowed < 2.5, f"this machine's emulator floor is too wide ({allowed} ms) to judge a client against the wire"
    assert 0 <= w["median_diff_ms"] < allowed and w["p5_diff_ms"] >= -allowed, (w, allowed)


def processes_mentioning(*needles) -> list[str]:
    """"PID: command line" of the running processes whose command line mentions any of needles, but for those
    another pytest-xdist worker started (its tests' servers are not this test's leftovers)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(str(n) in cmd for n in needles) and not _another_workers(int(pid)):
            out.append(f"{pid}: {cmd[:120]}")
    return out


_WORKER = os.environ.get("PYTEST_XDIST_WORKER")


def _ppid(pid: int) -> int | None:
    try:
        stat = open(f"/proc/{pid}/stat", "rb").read()
    except OSError:
        return None
    return int(stat.rsplit(b")", 1)[1].split()[1])  # the field after the state, past the command's ")"


def _another_workers(pid: int) -> bool:
    """Whether pid descends from another xdist worker: the workers are the children of the process that started
    this one (the controller). A process whose owner died has init as its parent and counts as this test's."""
    if _WORKER is None:
        return False
    controller = os.getppid()
    while pid and pid > 1:
        parent = _ppid(pid)
        if parent == controller:
            return pid != os.getpid()
        pid = parent
    return False


SSH_PROCESS_MARKS = ("build/openssh/", "sshd-session", "sshd-auth", "/sshgo/bin/")  # the SSH stacks' programs


@pytest.fixture(scope="session")
def built_stack():
    """Our OpenSSL and native programs; `make test` builds them first, so missing is a failure."""
    missing = [p for p in (paths.OPENSSL_BIN, paths.native_binary("cryptobench")) if not p.exists()]
    assert not missing, f"not built: {missing} (run `make`)"
    from pqbench.algorithms import openssl_build
    openssl_build.write_config()
    return paths


@pytest.fixture(scope="session")
def chains(built_stack, tmp_path_factory):
    """chains(sig) -> a certificate chain for that signature algorithm, made once per session."""
    from pqbench.algorithms import certs
    made = {}

    def get(sig):
        if sig not in made:
            made[sig] = certs.make_chain(sig, tmp_path_factory.mktemp(sig))
        return made[sig]
    return get


# Tests that act on every testbed of the machine (`net clean` removes the detached ones too) or keep a detached one
# (`net up`) that such a test would remove: on one worker of a parallel suite (pytest-xdist's loadgroup).
MACHINE_WIDE = {"test_testbed.py", "test_runner.py::test_killed_run_resumes_without_duplicates_or_gaps",
                "test_scan_local.py"}  # the local population is a detached testbed


def _uses_a_module_fixture(item) -> bool:
    """A test that uses a module-scoped fixture of its own module: the module's tests share one worker, so the
    fixture (a testbed, served stacks, real runs: up to 30 s) is set up once, not once per worker that received
    one of them (the 20 slowest tests of a parallel pass had the report module's set up three times)."""
    info = getattr(item, "_fixtureinfo", None)
    return bool(info) and any(d.scope == "module" and getattr(d, "baseid", "").split("::")[0] == item.nodeid.split("::")[0]
                              for defs in info.name2fixturedefs.values() for d in defs)


@pytest.fixture
def cluster(tmp_path):
    """A Dask scheduler on loopback; the test adds workers (pqbench.cluster.local). Stopped afterwards, and the
    testbeds of workers that died are reaped."""
    from pqbench.cluster.local import LocalCluster
    from pqbench.testbed import registry
    c = LocalCluster(tmp_path / "logs")
    try:
        yield c
    finally:
        c.stop()
        registry.reap_stale()


def unpacked_store(gz: Path, path: Path) -> Path:
    """A store checked in gzipped (tests/data), unpacked to path."""
    import gzip
    import shutil
    with gzip.open(gz) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


def _group_suffixes(config, items) -> None:
    """pytest-xdist's loadgroup finds a test's group in a suffix of its node id ("...@machine"), which xdist 3.8
    writes into Item._nodeid, where pytest 9.2 no longer reads it (ids come from Item._id): every group was spread
    over all workers (a test printing its worker showed a group of 8 on two). Written here the way pytest reads it,
    on the workers (where xdist sets option.loadgroup)."""
    if not getattr(config.option, "loadgroup", False):
        return
    from _pytest.nodeid import NodeId
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid.rsplit("]", 1)[-1]:
            item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in MACHINE_WIDE or f"{item.path.name}::{item.originalname}" in MACHINE_WIDE:
            item.add_marker(pytest.mark.xdist_group("machine"))
        elif _uses_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.path.name))
    _group_suffixes(config, items)
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (network namespaces, TUN devices)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


# What each test costs the machine: with PQBENCH_TEST_COSTS=FILE, a JSON line per test (setup, call and teardown
# together) with its wall time and the CPU time of this process and of the processes it started and waited for.
# Measured in one run: 6 workers' tests were busy 2,300 s and cost 716 CPU s; they mostly wait (bench/suite_costs.py).
_COSTS = os.environ.get("PQBENCH_TEST_COSTS")
if _COSTS:
    import json
    import resource
    import time

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        def cpu():
            own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime
        began, t0, (own0, kids0) = time.time(), time.monotonic(), cpu()
        try:
            return (yield)
        finally:
            own1, kids1 = cpu()
            with open(_COSTS, "a") as f:
                f.write(json.dumps({"test": item.nodeid, "worker": os.environ.get("PYTEST_XDIST_WORKER"),
                                    "start": round(began, 2), "wall_s": round(time.monotonic() - t0, 2),
                                    "own_cpu_s": round(own1 - own0, 2), "children_cpu_s": round(kids1 - kids0, 2)})
                        + "\n")
