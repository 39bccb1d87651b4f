"""The sample's definitions, the wire join and the late-sample detector (no root, no testbed)."""

from pqbench.measure import late, wire
from pqbench.sample import Sample


def test_a_sample_keeps_protocol_specific_fields_apart():
    s = Sample.from_json({"ok": True, "mode": "handshake", "t_ns": {"handshake_done": 5_000_000},
                          "local_port": 40000, "msg_bytes_sent": {"client_hello": 300}, "records_sent": 2})
    assert s.duration_ms() == 5.0 and s.stack == "openssl" and s.protocol == "tls" and s.local_port == 40000
    assert s.specific == {"msg_bytes_sent": {"client_hello": 300}, "records_sent": 2}
    assert Sample.from_json(s.to_json()) == s


def flow(port, open_ns, flights, **dirs):
    return {"proto": "tcp", "client": f"10.9.0.1:{port}", "server": "10.9.0.2:4433", "open_ns": open_ns,
            "syn_ns": open_ns, "flights": [{"dir": d, "first_ns": a, "last_ns": b, "packets": 1, "bytes": 100}
                                           for d, a, b in flights],
            "c2s": {"packets": 5, "bytes": 600, "retrans": 0, "lost": 0, "queue_drops": 0, **dirs.get("c2s", {})},
            "s2c": {"packets": 5, "bytes": 2000, "retrans": 0, "lost": 0, "queue_drops": 0, **dirs.get("s2c", {})}}


def test_samples_join_the_connection_from_their_port_that_opened_closest_to_their_start():
    offset = 7_000_000_000  # CLOCK_MONOTONIC ahead of CLOCK_MONOTONIC_RAW
    tls = [("c2s", 10_000_000, 10_000_000), ("s2c", 20_000_000, 21_000_000), ("c2s", 22_000_000, 22_000_000)]
    shift = lambda fl, t: [(d, a + t, b + t) for d, a, b in fl]  # noqa: E731
    flows = [flow(40000, offset + 1_000_000, shift(tls, offset)),  # port reused later in the cell
             flow(40000, offset + 900_000_000, shift(tls, offset + 899_000_000), s2c={"retrans": 1}),
             flow(40001, offset + 5_000_000, shift(tls, offset + 4_000_000)),
             {**flow(40000, None, []), "open_ns": None}]  # only lost packets: never seen at the client
    samples = [{"local_port": 40000, "start_mono_ns": 900_000_000 - 30_000},
               {"local_port": 40000, "start_mono_ns": 1_000_000 - 30_000},
               {"local_port": 40002, "start_mono_ns": 5_000_000}]
    assert wire.join(samples, flows, offset, wire.TLS_MILESTONES["handshake"]) == 2
    assert samples[1]["wire"]["ms"] == 21.0 and samples[1]["wire"]["retrans_s2c"] == 0  # SYN → client Finished
    assert samples[0]["wire"]["retrans_s2c"] == 1
    assert "wire" not in samples[2]


def test_page_mode_ends_on_the_wire_at_the_last_packet_of_the_last_server_flight():
    f = flow(1, 0, [("c2s", 1, 1), ("s2c", 5, 6), ("c2s", 7, 7), ("s2c", 9, 30)])
    assert wire.end_ns(f, wire.TLS_MILESTONES["page"]) == 30 and wire.end_ns(f, wire.TLS_MILESTONES["handshake"]) == 7
    assert wire.end_ns(f, wire.Milestone("c2s", 2, "first")) is None


def sample(ms, retrans=0, wire_retrans=0, drops=0):
    s = {"ok": True, "t_ns": {"handshake_done": int(ms * 1e6)}, "tcp_end": {"retransmits": retrans}}
    if wire_retrans is not None:
        s["wire"] = {"retrans_c2s": 0, "retrans_s2c": wire_retrans, "drops_c2s": drops, "drops_s2c": 0}
    return s


def test_the_detector_counts_only_untouched_samples_that_came_late():
    clean = [sample(64.0 + 0.01 * k) for k in range(90)]
    cpu_late = [sample(70.0) for _ in range(5)]
    server_retrans = [sample(360.0, wire_retrans=1) for _ in range(20)]  # invisible to the client
    client_retrans = [sample(1064.0, retrans=1) for _ in range(10)]
    # a drop that nobody resent (the client's last ACK, say) did not hold the sample up: still judged
    dropped_ack = [sample(64.0, drops=1) for _ in range(10)] + [sample(67.0, drops=1) for _ in range(3)]
    d = late.detect(clean + cpu_late + server_retrans + client_retrans + dropped_ack, "handshake_done", 0.02)
    assert d["untouched"] == 108 and d["late"] == 8 and d["wire"]
    assert 64.0 <= d["clean_ms"] < 64.1 and d["threshold_ms"] < 70.0
    assert d["late_client_cpu"] is None  # these clients do not say how long they waited for a CPU


def test_the_detector_says_which_late_samples_the_client_spent_waiting_for_a_cpu():
    def waited(ms, wait_ms):
        return {**sample(ms), "cpu_wait_ns": int(wait_ms * 1e6)}
    on_time = [waited(64.0 + 0.01 * k, 0.05) for k in range(90)]
    client_waited = [waited(68.0, 3.8) for _ in range(4)]  # 4 ms late, 3.8 of them on the run queue
    elsewhere = [waited(68.0, 0.2) for _ in range(3)]  # late, but not for the client's CPU (the server's?)
    d = late.detect(on_time + client_waited + elsewhere, "handshake_done", 0.02)
    assert d["late"] == 7 and d["late_client_cpu"] == 4


def test_without_a_wire_record_server_retransmissions_look_late():
    """netem keeps no per-connection record: the detector says so (wire False) and counts them."""
    d = late.detect([sample(64.0, wire_retrans=None) for _ in range(50)]
                    + [sample(360.0, wire_retrans=None) for _ in range(10)], "handshake_done", 0.02)
    assert d["late"] == 10 and not d["wire"]
