"""The endpoint seam: a toy stack (a few lines of server and client, registered here, not shipped)
runs through the rig and through `pqbench run` without a change anywhere else."""

import dataclasses
import sys
import textwrap
from pathlib import Path

import pytest

from pqbench import endpoints, store
from pqbench import protocol as proto
from pqbench.measure import wire
from pqbench.endpoints.base import Capabilities, ClientJob, Place, Serving, Stack, tcp_probe
from pqbench.errors import BadInput, MeasurementFailed
from pqbench.experiment import spec as specmod
from pqbench.measure import runner

pytestmark = pytest.mark.root

SERVER = textwrap.dedent("""
    import socket, sys
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(128)
    while True:
        c, _ = s.accept()
        if c.recv(64).startswith(b"hello"):
            c.sendall(b"hi\\n")
        c.close()
""")

CLIENT = textwrap.dedent("""
    import fcntl, json, socket, sys, time
    host, port, count, worker, claims = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    late_s = float(sys.argv[6]) / 1000  # a client that takes its end time late
    now = lambda: time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
    while True:
        with open(claims, "r+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            i = int.from_bytes(f.read(8), sys.byteorder); f.seek(0); f.write((i + 1).to_bytes(8, sys.byteorder))
        if i >= count:
            break
        t0 = now(); s = socket.create_connection((host, port)); t1 = now()
        s.sendall(b"hello\\n"); reply = s.recv(64); time.sleep(late_s); t2 = now()
        print(json.dumps({"worker": worker, "i": i, "mode": "handshake", "ok": reply == b"hi\\n",
                          "t_ns": {"tcp_connected": t1 - t0, "handshake_done": t2 - t0}, "start_mono_ns": t0,
                          "local_port": s.getsockname()[1]}), flush=True)
        s.close()
""")


class ToyServer:
    def start(self, place: Place, serving: Serving) -> None:
        self.addr, self.ports = place.addr, [site.port for site in serving.sites]
        self.procs = [place.popen([sys.executable, "-c", SERVER, place.addr, str(p)]) for p in self.ports]

    def ready(self, client_place: Place) -> None:
        import time
        for port in self.ports:
            for _ in range(100):
                if tcp_probe(client_place, self.addr, port):
                    break
                time.sleep(0.05)
            s = client_place.socket()
            s.connect((self.addr, port))
            s.sendall(b"hello\n")
            if s.recv(64) != b"hi\n":
                raise MeasurementFailed("the toy server does not answer")
            s.close()

    def stop(self) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


class ToyClient:
    name = "toy"
    milestones = {"handshake": wire.Milestone("s2c", 0, "last")}  # its reply
    late_ms = 0.0

    def argv(self, job: ClientJob, count: int, worker: int, claims: Path) -> list[str]:
        return [sys.executable, "-c", CLIENT, job.host, str(job.port), str(count), str(worker), str(claims),
                str(self.late_ms)]


    def env(self) -> dict:
        return {}


class LateToyClient(ToyClient):
    late_ms = 3.0


class SlowToyClient(ToyClient):
    late_ms = 25.0  # well beyond the toy's own noise on a busy machine


TOY = Stack(name="toy", protocol="tcp-hello", server=ToyServer, client=ToyClient,
            capabilities=lambda: Capabilities("toy", "tcp-hello", ("tcp",), ("handshake",), {"toy": "1"},
                                              lambda kex, sig, role: None))


# The toy's protocol, registered here alone: a hello and its reply over TCP, a chain made for it as for TLS.
HELLO = proto.Protocol("tcp-hello", "HELLO", transports=("tcp",), phases=("tcp_connected", "handshake_done"),
                       catalog_names="names", default_pair=("toy", "toy"), classical=("X25519", "ecdsap256"),
                       chains=True, sig_option="--sig", sig_word="signature algorithm", scheme="hello://",
                       default_port=7, key_shares=False, modelled=False, handshake_end="the server's reply")


@pytest.fixture
def toy():
    proto.register(HELLO)
    endpoints.register(TOY)
    endpoints.register(dataclasses.replace(TOY, name="toylate", client=LateToyClient))
    endpoints.register(dataclasses.replace(TOY, name="toyslow", client=SlowToyClient))
    yield TOY
    for name in ("toy", "toylate", "toyslow"):
        endpoints._STACKS.pop(name, None)
    proto.unregister(HELLO.name)


TOY_SPEC = """
name = "toy"
samples = 12
parallel = 2
lanes = 1
calibration_samples = 10
[axes]
kex = ["X25519"]
sig = ["ecdsap256"]
rtt = ["20ms"]
stack = ["{stack}"]
"""


def test_a_toy_stack_runs_through_pqbench_run_and_lands_in_the_store(toy, built_stack, tmp_path):
    spec = specmod.parse(TOY_SPEC.format(stack="toy"), "toy.toml")
    db = tmp_path / "toy.duckdb"
    run_id = runner.run(spec, db, quiet=True)
    con = store.connect(db, read_only=True)
    (cell,) = store.cell_rows(con, run_id)
    prov = store.provenance(con, run_id)
    con.close()
    assert cell["stack"] == "toy" and cell["status"] == "done" and cell["ok"] == 12
    assert prov["stacks"]["toy"]["versions"] == {"toy": "1"}
    wire = __import__("json").loads(cell["wire"])
    # the toy's own timing against the emulator's: every sample joined, close on the median
    assert wire["n"] == 12 and abs(wire["median_diff_ms"]) < 1.0, wire


def test_a_toy_protocol_reaches_the_spec_the_cells_the_store_and_the_report_from_its_record_alone(
        toy, built_stack, tmp_path):
    """HELLO is registered in this module alone: a spec names it beside TLS, each protocol's cell goes to its
    record's default pair, a target's address takes its scheme, the store keeps the protocol, and the report
    sets the two protocols side by side with the record's words; the model says it does not know its flights."""
    from pqbench import analysis
    from pqbench.experiment import cells as cellmod
    from pqbench.remote import address
    from pqbench.report import tables
    spec = specmod.parse(TOY_SPEC.replace('stack = ["{stack}"]\n', "").replace("[axes]", 'protocol = ["tls", "tcp-hello"]\n[axes]'),
                         "toy.toml")
    assert spec.protocols == ("tls", "tcp-hello") and spec.stacks == (("openssl", "openssl"), ("toy", "toy"))
    with pytest.raises(BadInput, match=r"is not one of tls, ssh, .*tcp-hello") as e:
        specmod.parse(TOY_SPEC.format(stack="toy").replace("[axes]", 'protocol = "hello"\n[axes]'), "toy.toml")
    assert e.value.field == "protocol"
    target = address.parse("--target", "hello://127.0.0.1")
    assert (target.protocol, target.port, str(target)) == ("tcp-hello", 7, "hello://127.0.0.1:7")
    # the command line: `handshake --protocol tcp-hello` makes the cell the spec makes, on the record's default pair
    from pqbench.cli import build_parser
    from pqbench.commands import handshake
    cell, _ = handshake.config_from_args(build_parser().parse_args(
        ["handshake", "--protocol", "tcp-hello", "--kex", "x25519", "--sig", "ecdsap256", "--rtt", "20ms"]))
    (spec_cell,) = [c for c in cellmod.expand(spec) if c.protocol == "tcp-hello"]
    assert (cell.protocol, cell.server, cell.client, cell.kex) == ("tcp-hello", "toy", "toy", "X25519")
    assert cell.cell_id == spec_cell.cell_id

    db = tmp_path / "protocols.duckdb"
    run_id = runner.run(spec, db, quiet=True)
    con = store.connect(db, read_only=True)
    cells = {c["protocol"]: c for c in store.cell_rows(con, run_id)}
    a = analysis.analyse(con, run_id, resamples=50)
    con.close()
    assert set(cells) == {"tls", "tcp-hello"} and all(c["status"] == "done" for c in cells.values())
    assert (cells["tcp-hello"]["server"] or "toy", cells["tcp-hello"]["ok"]) == ("toy", 12)
    table = tables.protocols(a)
    assert table.title.startswith("TLS vs HELLO") and "HELLO p50" in table.headers, table.headers
    assert len(table.rows) == 1 and "HELLO's at the server's reply" in table.note
    (hello,) = [c for c in a.cells if c.row["protocol"] == "tcp-hello"]
    assert hello.bound is None and hello.bound_note == "the model knows TLS's flights, not HELLO's"


def test_a_stack_name_nobody_registered_is_bad_input_naming_the_allowed_ones():
    with pytest.raises(Exception) as e:
        specmod.parse('[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]\nstack = ["wolfssl"]\n', "x.toml")
    assert e.value.field == "axes.stack[0]" and "openssl" in str(e.value)


def test_a_client_that_records_late_is_caught_by_the_wire(toy, built_stack, tmp_path):
    """The same toy, but its client takes the end time 3 ms after the reply arrived: every sample
    disagrees with the wire, beyond what the machine allows, and the report says so and gives the wire's figures."""
    from pqbench import analysis
    db = tmp_path / "late.duckdb"
    run_id = runner.run(specmod.parse(TOY_SPEC.format(stack="toylate"), "toy.toml"), db, quiet=True)
    con = store.connect(db, read_only=True)
    (cell,) = store.cell_rows(con, run_id)
    warned = [w for _, w in analysis.analyse(con, run_id, resamples=50).cell_warnings()]
    con.close()
    w = __import__("json").loads(cell["wire"])
    assert w["disagree"] == w["n"] == 12 and w["median_diff_ms"] > 2.5, w
    (late,) = [x.message for x in warned if x.check == "wire_clock"]
    assert "ms this machine allows" in late and "reported on the wire's clock" in late


def test_server_and_client_stacks_pair_up_on_one_link_and_the_report_compares_them(toy, built_stack, tmp_path):
    """A toy server measured by two clients (toy, and one that takes its end time 25 ms late) on the
    same lane, and by the openssl client, which speaks another protocol: that cell is skipped with the
    reason. The late one is flagged as beyond what the machine allows and reported on the wire's clock, so the
    two clients are compared on the wire's: its 25 ms are its clock's, not the handshake's (on their own clocks
    they would differ by 25 ms); the stacks table lists the pairs."""
    from pqbench import analysis
    from pqbench.report import tables
    spec = specmod.parse(TOY_SPEC.format(stack='toy", "toy/toyslow", "toy/openssl'), "toy.toml")
    assert spec.stacks == (("toy", "toy"), ("toy", "toyslow"), ("toy", "openssl"))
    db = tmp_path / "pairs.duckdb"
    run_id = runner.run(spec, db, quiet=True)
    con = store.connect(db, read_only=True)
    cells = {(c["server"], c["client"]): c for c in store.cell_rows(con, run_id)}
    a = analysis.analyse(con, run_id, resamples=200)
    con.close()
    assert cells["toy", "toy"]["status"] == cells["toy", "toyslow"]["status"] == "done"
    assert cells["toy", "toyslow"]["stack"] == "toy/toyslow"
    skipped = cells["toy", "openssl"]
    assert skipped["status"] == "skipped" and "different protocols" in skipped["reason"]
    (diff,) = [p for p in a.paired if p.axis == "client"]
    assert diff.baseline.row["client"] == "toy" and diff.other.row["client"] == "toyslow"
    assert diff.clock == "wire" and abs(diff.diff[0]) < 5, diff.diff
    assert diff.other.clock == "wire" and "+2" in diff.other.wire_clock  # its clock stands 25 ms from the wire's
    assert 20 < diff.other.row["wire"]["median_diff_ms"] < 35
    (row,) = [r for r in tables.paired(a).rows if r[0] == "client"]
    assert row[1].endswith("(on the wire's clock)"), row
    assert "both are compared on the wire's" in tables.paired(a).note
    table = tables.stacks(a)
    assert sorted((r[0], r[1]) for r in table.rows) == [("toy", "toy"), ("toy", "toyslow")]


def test_stack_axes_cross_or_pair_and_keep_old_cell_ids():
    from pqbench.experiment import cells as cellmod
    base = '[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]\n'
    crossed = specmod.parse(base + 'server = ["openssl"]\nclient = ["openssl"]\n', "x.toml")
    assert crossed.stacks == (("openssl", "openssl"),)
    plain = specmod.parse(base, "x.toml")
    # the default pair keeps the cell id of stores from before stacks existed
    (a,), (b,) = cellmod.expand(plain), cellmod.expand(crossed)
    assert a.cell_id == b.cell_id and a.stack == "openssl"
    with pytest.raises(Exception) as e:
        specmod.parse(base + 'stack = ["openssl"]\nclient = ["openssl"]\n', "x.toml")
    assert e.value.field == "axes.client"
    with pytest.raises(Exception) as e:
        specmod.parse(base + 'stack = ["openssl/a/b"]\n', "x.toml")
    assert e.value.field == "axes.stack[0]"
