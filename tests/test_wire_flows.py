"""pqlink's wire recorder through a real testbed and kernel TCP (root only): plain TCP sockets, no TLS.

A client connects, sends a request, reads a multi-segment response and sends again: the recorder
must show three flights (c2s, s2c, c2s) carrying exactly what was sent, the SYN before the SYN-ACK,
and agree with the link's own counters.
"""

import os
import socket
import time

import pytest

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, TUN devices)"),
]

from pqbench.errors import MeasurementFailed  # noqa: E402
from pqbench.testbed import Direction, EmulatorOptions, LinkSpec, Loss, Testbed  # noqa: E402

RTT_MS = 4
REQUEST, RESPONSE, SECOND = 300, 30_000, 120  # the response is about 21 segments at MTU 1500


@pytest.fixture(scope="module")
def tb():
    with Testbed(LinkSpec.symmetric(RTT_MS), backend="pqlink") as t:
        yield t


def _recv_exact(sock: socket.socket, n: int) -> None:
    got = 0
    while got < n:
        chunk = sock.recv(min(65536, n - got))
        assert chunk, f"connection closed after {got} of {n} bytes"
        got += len(chunk)


def exchange(tb, response: int = RESPONSE, timeout: float = 60) -> tuple[int, int]:
    """Request, response, second request over one connection, then both sides close; returns the
    client's port and the server's (the kernel gives a client port again to a connection to another server
    port: a slower machine's run met two flows from one client port)."""
    listener = tb.socket("server")
    client = tb.socket("client")
    with listener, client:
        listener.bind((tb.server_addr, 0))
        listener.listen(1)
        listener.settimeout(timeout)
        client.settimeout(timeout)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client.connect(listener.getsockname())
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(timeout)
            client.sendall(b"q" * REQUEST)
            _recv_exact(conn, REQUEST)
            conn.sendall(b"r" * response)
            _recv_exact(client, response)
            client.sendall(b"s" * SECOND)
            _recv_exact(conn, SECOND)
        return client.getsockname()[1], listener.getsockname()[1]


def flow_of(flows: list[dict], tb, ports: tuple[int, int]) -> dict:
    mine = [f for f in flows if (f["client"], f["server"]) == (f"{tb.client_addr}:{ports[0]}",
                                                                f"{tb.server_addr}:{ports[1]}")]
    assert len(mine) == 1, flows
    return mine[0]


def test_flights_milestones_and_counts_of_one_connection(tb, tmp_path):
    tb.reconfigure(LinkSpec.symmetric(RTT_MS))
    tb.reset_counters()
    before = time.monotonic_ns()  # CLOCK_MONOTONIC, pqlink's clock
    ports = exchange(tb)
    time.sleep(0.3)  # the closing packets cross the link
    path = tmp_path / "flows.jsonl"
    flows = tb.backend.flows(path)
    counters = tb.counters()
    assert os.stat(path).st_mode & 0o777 == 0o600

    f = flow_of(flows, tb, ports)
    assert f["proto"] == "tcp" and f["server"].startswith(f"{tb.server_addr}:")
    assert [(x["dir"], x["bytes"]) for x in f["flights"]] == [("c2s", REQUEST), ("s2c", RESPONSE), ("c2s", SECOND)]
    assert f["flights_overflow"] == 0 and f["flights"][1]["packets"] >= RESPONSE // 1500
    assert before <= f["open_ns"] == f["syn_ns"] < f["synack_ns"]
    assert f["synack_ns"] - f["syn_ns"] >= RTT_MS * 1e6  # the SYN-ACK reaches the client a round trip later
    assert f["open_ns"] <= f["flights"][0]["first_ns"] and f["synack_ns"] <= f["flights"][0]["first_ns"]
    starts = [x["first_ns"] for x in f["flights"]]
    assert starts == sorted(starts) and all(x["first_ns"] <= x["last_ns"] for x in f["flights"])
    assert f["fin_ns"] is not None and f["fin_ns"] >= f["flights"][-1]["last_ns"]
    c2s, s2c = f["c2s"], f["s2c"]
    assert c2s["payload_bytes"] == REQUEST + SECOND and s2c["payload_bytes"] == RESPONSE
    assert c2s["retrans"] == s2c["retrans"] == c2s["lost"] == s2c["lost"] == 0
    assert c2s["first_ns"] == f["syn_ns"] and s2c["first_ns"] == f["synack_ns"]

    # every packet of the link belongs to a recorded connection: the recorder and the counters agree
    assert sum(x["c2s"]["packets"] for x in flows) == counters["client_to_server"]["offered_packets"]
    assert sum(x["s2c"]["packets"] for x in flows) == counters["server_to_client"]["packets"]
    assert sum(x["s2c"]["bytes"] for x in flows) == counters["server_to_client"]["bytes"]


def test_reset_empties_the_table(tb, tmp_path):
    tb.reconfigure(LinkSpec.symmetric(RTT_MS))
    exchange(tb, response=2000)
    time.sleep(0.2)
    assert tb.backend.flows(tmp_path / "before.jsonl")
    tb.reset_counters()
    assert tb.backend.flows(tmp_path / "after.jsonl") == []


def test_loss_shows_as_drops_and_retransmissions(tb, tmp_path):
    lossy = LinkSpec(Direction(RTT_MS / 2), Direction(RTT_MS / 2, loss=Loss.bernoulli(0.3)), seed=7)
    tb.reconfigure(lossy)
    tb.reset_counters()  # the loss pattern starts from the seed
    ports = [exchange(tb, response=20_000) for _ in range(3)]
    tb.reconfigure(LinkSpec.symmetric(RTT_MS))  # no more drops while the closing packets finish
    time.sleep(0.5)
    flows = tb.backend.flows(tmp_path / "flows.jsonl")
    mine = [flow_of(flows, tb, p) for p in ports]
    assert any(f["s2c"]["lost"] > 0 and f["s2c"]["retrans"] > 0 for f in mine), mine
    assert all(f["c2s"]["lost"] == 0 for f in mine)
    # the response arrived whole, so every lost payload segment was sent again
    assert all(f["s2c"]["payload_bytes"] >= 20_000 for f in mine)
    assert sum(f["s2c"]["lost"] for f in flows) == tb.counters()["server_to_client"]["lost"]


def test_recorder_off():
    with Testbed(LinkSpec(), backend="pqlink", emulator=EmulatorOptions(flows=0)) as t:
        with pytest.raises(MeasurementFailed, match="recorder is off"):
            t.backend.flows(t.run_dir / "flows.jsonl")
