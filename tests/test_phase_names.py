"""Every timing client names its phases and milestones as pqbench.sample.TIMELINES does, the one table of
them: each client, run as pqbench runs it, against a loopback port where nothing answers, prints a failed
sample whose t_ns still lists every phase it times (null), so the names and their order come from the
client's own table in C, Go or Rust. No root, no testbed; a few hundred milliseconds per client."""

import json
import re
import socket
import subprocess
from pathlib import Path

import pytest

from pqbench import endpoints
from pqbench.endpoints.base import ClientJob
from pqbench.sample import END_PHASE, PHASES, TIMELINES, timeline

ROOT = Path(__file__).resolve().parents[1]
GROUP = {"tls": "X25519", "ssh": "curve25519-sha256"}

# stack, transport, the program its client runs
CLIENTS = [("openssl", "tcp", "pqtimer"), ("openssl", "quic", "pqtimer"), ("gotls", "tcp", "tlsgo"),
           ("quicgo", "quic", "quicgo"), ("rustls", "tcp", "pqrustls"), ("s2n", "tcp", "pqs2n"),
           ("gossh", "tcp", "sshtimer")]


def unanswered_port(kind: int) -> int:
    """A loopback port nothing listens on (a TCP connect is refused; a UDP datagram finds no socket)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cafile(chains):
    return str(chains("ecdsap256").root_cert)


def failed_sample(stack: str, transport: str, cafile: str) -> dict:
    s = endpoints.get(stack)
    client = s.client()
    kind = socket.SOCK_DGRAM if transport == "quic" else socket.SOCK_STREAM
    job = ClientJob(host="127.0.0.1", port=unanswered_port(kind), groups=[GROUP[s.protocol]], servername="localhost",
                    cafile=None if s.protocol == "ssh" else cafile, timeout_ms=300, transport=transport,
                    target=s.protocol == "ssh")  # sshtimer without an account: key exchange only
    proc = subprocess.run(client.argv(job, 1, 0, claims=None), env=client.env(), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1 and not lines[0]["ok"], (proc.returncode, proc.stdout, proc.stderr)
    return lines[0]


@pytest.mark.parametrize("stack,transport,program", CLIENTS, ids=[f"{p}-{t}" for _, t, p in CLIENTS])
def test_each_client_prints_the_phases_of_the_one_table(built_stack, cafile, stack, transport, program):
    protocol = endpoints.get(stack).protocol
    want = timeline(protocol, transport).phases
    t_ns = failed_sample(stack, transport, cafile)["t_ns"]
    assert t_ns.pop("start", 0) == 0  # their zero (sshtimer leaves it out)
    printed = list(t_ns)
    if program == "pqtimer":
        # one table for both transports: what the transport has not is null
        assert printed == list(PHASES) and all(t_ns[p] is None for p in PHASES if p not in want), t_ns
    elif program == "sshtimer":
        # Go prints a map's keys sorted: the order is its phaseNames table's
        assert sorted(printed) == sorted(want)
        source = (ROOT / "native/sshgo/cmd/sshtimer/main.go").read_text()
        table = re.search(r"var phaseNames = \[\]string\{(.*?)\}", source, re.S).group(1)
        assert tuple(re.findall(r'"(\w+)"', table)) == want
    else:
        assert tuple(printed) == want


@pytest.mark.parametrize("stack,transport,program", CLIENTS, ids=[f"{p}-{t}" for _, t, p in CLIENTS])
def test_each_client_takes_its_milestones_from_the_one_table(stack, transport, program):
    s = endpoints.get(stack)
    modes = s.capabilities().transport_modes.get(transport, s.capabilities().modes)
    table = timeline(s.protocol, transport).milestones
    client = s.client()
    assert {m: client.milestones[m] for m in modes} == {m: table[m] for m in modes}


def test_every_mode_ends_at_a_phase_each_tls_timeline_has():
    assert set(END_PHASE.values()) <= set(timeline("tls", "tcp").phases) & set(timeline("tls", "quic").phases)
    assert set(PHASES) == {p for (protocol, _), t in TIMELINES.items() if protocol == "tls" for p in t.phases}
