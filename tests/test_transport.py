"""Transport as one part of the seam: the spec's transport / quic_retry / initial_size axes, the cells they
make (TCP's keep their ids), what a stack without the transport does, and what lateness means per transport."""

import pytest

from pqbench import transport
from pqbench.errors import BadInput
from pqbench.experiment import cells as cellmod
from pqbench.experiment import spec as specmod
from pqbench.measure import late
from pqbench.sample import Milestone

BASE = """
parallel = 1
samples = 5
[axes]
kex = ["X25519MLKEM768"]
sig = ["ecdsap256", "mldsa44"]
rtt = ["31.1ms"]
"""


def test_naming_tcp_keeps_every_cell_id_and_quic_crosses_only_its_own_axes():
    before = {c.cell_id for c in cellmod.expand(specmod.parse(BASE))}
    cells = cellmod.expand(specmod.parse(BASE + 'transport = ["tcp", "quic"]\nquic_retry = [false, true]\n'
                                                 "initial_size = [1200, 1400]\n"))
    tcp = [c for c in cells if c.transport is None]
    quic = [c for c in cells if c.transport == "quic"]
    assert {c.cell_id for c in tcp} == before  # stores from before the axis resume
    assert len(tcp) == 2 and len(quic) == 2 * 2 * 2
    assert {(c.quic_retry, c.initial_size) for c in quic} == {(r, i) for r in (False, True) for i in (1200, 1400)}
    one = next(c for c in quic if c.quic_retry and c.initial_size == 1400)
    assert one.params()["transport"] == "quic" and "QUIC, Retry, Initial 1400" in one.label()
    # the link (loss pattern, trace offsets) is the same for TCP and QUIC: their comparison is paired
    assert {c.link_spec(7).seed for c in cells if c.sig == "mldsa44"} == {c.link_spec(7).seed for c in tcp}


@pytest.mark.parametrize("extra,field,words", [
    ('transport = ["sctp"]\n', "axes.transport[0]", "tcp, quic"),
    ('quic_retry = [true]\n', "axes.quic_retry", '"quic"'),
    ('transport = ["quic"]\nquic_retry = ["yes"]\n', "axes.quic_retry[0]", "true or false"),
    ('transport = ["quic"]\ninitial_size = [1000]\n', "axes.initial_size[0]", "1200"),
    ('transport = ["quic"]\ninitial_size = [1500]\n', "axes.initial_size[0]", "1472"),
    ('transport = ["quic"]\nprotocol = "ssh"\n', "axes.transport[0]", "SSH does not run over QUIC"),
])
def test_bad_transport_axes_name_the_field(extra, field, words):
    with pytest.raises(BadInput) as e:
        specmod.parse(BASE + extra)
    assert e.value.field == field and words in e.value.detail, (e.value.field, e.value.detail)


def test_a_stack_without_quic_skips_the_cell_with_the_reason():
    (cell, _) = cellmod.expand(specmod.parse(BASE + 'transport = ["quic"]\nstack = ["gotls"]\n'))
    reason = cellmod.unavailable_reason(cell) or ""
    if "is not built" in reason:
        pytest.skip("the gotls stack is not built here (make test builds every stack)")
    assert reason == "the gotls server has no QUIC (it speaks TCP)"


def test_what_touches_a_sample_depends_on_its_transport():
    # TCP: a retransmission, not a drop alone (a lost pure ACK did not hold the sample up)
    assert not late.touched({"wire": {"drops_s2c": 1, "retrans_s2c": 0}})
    assert late.touched({"tcp_end": {"retransmits": 1}})
    # QUIC: retransmissions are encrypted; any dropped datagram counts
    assert late.touched({"transport": "quic", "wire": {"drops_s2c": 1}})
    assert not late.touched({"transport": "quic", "wire": {"drops_c2s": 0, "drops_s2c": 0}})
    assert transport.of_sample({"transport": "quic"}).kernel_tcp is False
    assert transport.of_sample({}).name == "tcp"


def test_a_quic_sample_joins_its_udp_flow_ends_at_its_named_datagram_and_carries_the_stall():
    """A TCP flow from the same port number is not the QUIC sample's; the wire time ends at the datagram
    that carried the client's Finished (the sample's wire_milestone), and the record's stall comes along."""
    from pqbench.measure import wire
    from test_quic_wire import OPEN, RTT, simulate
    flow, finished = simulate(8000)
    tcp = {"proto": "tcp", "client": flow["client"], "server": flow["server"], "open_ns": OPEN, "syn_ns": OPEN,
           "flights": [], "c2s": {}, "s2c": {}}
    c2s_before = sum(n for d, t, n, _ in flow["datagrams"] if d == "c2s" and t < finished)
    sample = {"ok": True, "transport": "quic", "local_port": 40000, "start_mono_ns": OPEN,
              "t_ns": {"handshake_done": finished - OPEN},
              "wire_milestone": {"dir": "c2s", "offset": c2s_before, "edge": "first"}}
    assert wire.join([sample], [tcp, flow], 0, Milestone("c2s", 1, "first"), RTT) == 1
    w = sample["wire"]
    assert w["ms"] == pytest.approx((finished - flow["open_ns"]) / 1e6)
    assert w["stalls"] == 1 and w["stall_ms"] == pytest.approx(RTT / 1e6, rel=0.05)
    assert w["datagrams_c2s"] == flow["c2s"]["packets"] and w["datagrams_s2c"] == flow["s2c"]["packets"]
    fits, finished = simulate(3000)
    sample2 = {**sample, "wire_milestone": {"dir": "c2s", "edge": "first", "offset": sum(
        n for d, t, n, _ in fits["datagrams"] if d == "c2s" and t < finished)}}
    wire.join([sample2], [fits], 0, Milestone("c2s", 1, "first"), RTT)
    assert sample2["wire"]["stalls"] == 0 and sample2["wire"]["stall_ms"] is None


def test_an_initial_size_a_client_cannot_send_skips_the_cell_with_the_reason():
    cells = cellmod.expand(specmod.parse(BASE + 'transport = ["quic"]\ninitial_size = [1400, 1472]\n'
                                                'server = ["openssl"]\nclient = ["openssl", "quicgo"]\n'))
    reasons = {(c.client, c.initial_size): cellmod.unavailable_reason(c) or "" for c in cells if c.sig == "ecdsap256"}
    if any("is not built" in r for r in reasons.values()):
        pytest.skip("the quicgo stack is not built here (make test builds every stack)")
    assert "1200-byte datagrams" in reasons["openssl", 1400]  # OpenSSL's QUIC client: 1200, always
    assert reasons["quicgo", 1400] == ""
    assert reasons["quicgo", 1472] == "quicgo client: sends Initial datagrams of 1200..1452 bytes, not 1472"


def test_the_record_says_what_differs_per_transport():
    """What the model, the wire join, `handshake --json` and the report read of a transport (not its name)."""
    tcp, quic = transport.get(None), transport.get("quic")
    assert tcp.is_default and not quic.is_default
    assert (tcp.datagram, tcp.amplification_factor, tcp.kernel_tcp) == (False, None, True)
    assert (quic.datagram, quic.amplification_factor, quic.kernel_tcp) == (True, transport.AMPLIFICATION_FACTOR, False)
    assert {t.ip_proto for t in transport.TRANSPORTS.values() if t.datagram} == {"udp"}
