"""The congestion control a cell asks for, and the one both ends' connections really use (issue 31:
the published studies ran cubic, this host's default is bbr)."""

import os
import socket

import pytest

from pqbench.errors import BadInput
from pqbench.experiment import cells, spec
from pqbench.testbed import LinkSpec, TcpKnobs, Testbed

SPEC = """
[axes]
kex = ["X25519"]
sig = ["ecdsap256"]
"""
ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, TUN devices)")


def test_a_spec_pins_the_congestion_control_and_the_cells_carry_it():
    s = spec.parse(SPEC.replace("[axes]", '[axes]\ncongctl = ["cubic", "reno"]'))
    got = sorted((c.congctl, c.tcp().congctl) for c in cells.expand(s))
    assert got == [("cubic", "cubic"), ("reno", "reno")]
    assert len({c.cell_id for c in cells.expand(s)}) == 2


def test_without_the_axis_the_cells_keep_their_ids_and_the_hosts_default():
    (cell,) = cells.expand(spec.parse(SPEC))
    assert cell.congctl is None and cell.tcp() == TcpKnobs()
    params = cell.params()
    assert params["congctl"] is None
    # the id is what it was before the axis existed: congctl is left out of it when unset
    del params["congctl"], params["server"], params["client"], params["protocol"], params["stack"]
    from pqbench import axis
    for a in axis.registered():  # axes whose unset value stays out of the id (Axis.id_omit)
        if a.name in params and params[a.name] in a.id_omit:
            del params[a.name]
    import hashlib, json
    assert cell.cell_id == hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]


def test_a_congestion_control_name_is_checked_with_the_field_named():
    with pytest.raises(BadInput) as e:
        spec.parse(SPEC.replace("[axes]", '[axes]\ncongctl = ["Cubic!"]'))
    assert e.value.field == "axes.congctl[0]"


def test_the_published_studies_presets_pin_cubic():
    from pathlib import Path
    presets = Path(__file__).resolve().parents[1] / "experiments"
    for name in ("paquin2020-kex", "paquin2020-sig", "sosnowski2023-scenarios", "sikeridis2020-ssh",
                 "aws-requests", "chrome-sizes", "initcwnd", "pages"):
        assert spec.read(presets / f"{name}.toml").congctl == ("cubic",), name


def _used(tb) -> dict:
    """The congestion control of a real connection across the testbed, read from both sockets."""
    listener = tb.socket("server")
    listener.bind((tb.server_addr, 0))
    listener.listen(1)
    client = tb.socket("client")
    client.connect((tb.server_addr, listener.getsockname()[1]))
    server, _ = listener.accept()
    try:
        return {side: s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
                for side, s in (("client", client), ("server", server))}
    finally:
        for s in (client, server, listener):
            s.close()


@ROOT
@pytest.mark.root
def test_the_testbed_reports_what_real_connections_use():
    with Testbed(LinkSpec()) as tb:
        default = tb.congestion_control()
        assert default == _used(tb)
        other = "reno" if default["client"] != "reno" else "cubic"
        tb.set_tcp(TcpKnobs(congctl=other))
        assert tb.congestion_control() == {"client": other, "server": other} == _used(tb)


def test_the_report_says_which_congestion_control_each_end_used(tmp_path):
    from pqbench import analysis, store
    from pqbench.report import tables
    from test_analysis import save
    con = store.connect(tmp_path / "r.duckdb")
    store.create_run(con, "cc", name="cc", spec={})
    save(con, "cc", "X25519", [20.0 + i / 10 for i in range(30)])
    row = analysis.analyse(con, "cc", resamples=50)
    assert tables.congestion_control(row) == "not recorded (a run from before pqbench recorded it) in 1 cell " \
                                             "(the host's default)"
    con.execute("UPDATE cells SET cc_client = 'cubic', cc_server = 'cubic', congctl = 'cubic'")
    assert tables.congestion_control(analysis.analyse(con, "cc", resamples=50)) == \
        "cubic at both ends in 1 cell (the spec asked for cubic)"
    summary = dict(tables.summary(analysis.analyse(con, "cc", resamples=50)).rows)
    assert summary["TCP congestion control"].startswith("cubic at both ends")
