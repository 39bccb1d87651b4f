"""LinkSpec validation and units, TCP knobs, netem and pqlink parameter generation, calibration
statistics, and the `pqbench net` CLI's bad-input handling. No root needed."""

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pqbench.errors import BadInput
from pqbench.testbed.backend_netem import netem_args, netem_limit, qdisc_commands
from pqbench.testbed.backend_pqlink import direction_params, link_params
from pqbench.testbed.calibrate import binom_cdf, binomial_ci, percentiles
from pqbench.testbed.linkspec import Direction, LinkSpec, Loss, TcpKnobs, parse_gemodel

SRC = Path(__file__).resolve().parents[1] / "src"


# --- parsing and units -----------------------------------------------------------------------------

def test_rtt_splits_into_two_one_way_delays():
    spec = LinkSpec.parse(rtt="31.1ms", loss="1%", rate="10mbit", mtu="9000", seed="7")
    assert spec.client_to_server.delay_ms == pytest.approx(15.55)
    assert spec.server_to_client.delay_ms == pytest.approx(15.55)
    assert spec.rtt_ms == pytest.approx(31.1)
    assert spec.client_to_server.loss == Loss("bernoulli", 0.01)
    assert spec.client_to_server.rate_mbit == 10
    assert (spec.mtu, spec.seed) == (9000, 7)


@pytest.mark.parametrize("text,ms", [("0.2s", 200), ("500us", 0.5), ("78.6", 78.6), ("1500000ns", 1.5)])
def test_duration_units(text, ms):
    assert LinkSpec.parse(rtt=text).rtt_ms == pytest.approx(ms)


def test_rates_and_losses_units():
    assert LinkSpec.parse(rate="500kbit").client_to_server.rate_mbit == pytest.approx(0.5)
    assert LinkSpec.parse(rate="1gbit").client_to_server.rate_mbit == pytest.approx(1000)
    assert LinkSpec.parse(loss="0.015").client_to_server.loss.p == pytest.approx(0.015)
    assert LinkSpec.parse(loss="0%").client_to_server.loss.model == "none"


def test_per_direction_values():
    spec = LinkSpec.parse(rtt="40ms", delay_c2s="10ms", loss_s2c="2%", rate_c2s="5mbit", rate="20mbit")
    assert spec.client_to_server.delay_ms == 10 and spec.server_to_client.delay_ms == 30
    assert spec.server_to_client.loss.p == 0.02 and spec.client_to_server.loss.model == "none"
    assert spec.client_to_server.rate_mbit == 5 and spec.server_to_client.rate_mbit == 20
    one_way = LinkSpec.parse(delay_c2s="3ms", delay_s2c="7ms")
    assert one_way.rtt_ms == 10


@pytest.mark.parametrize("kwargs,field", [
    ({"rtt": "-5ms"}, "rtt"),
    ({"rtt": "5parsecs"}, "rtt"),
    ({"jitter": "-1ms"}, "jitter"),
    ({"delay_c2s": "-1"}, "delay_c2s"),
    ({"loss": "150%"}, "loss"),
    ({"loss": "1.5"}, "loss"),
    ({"loss": "-1%"}, "loss"),
    ({"loss": "1 percent"}, "loss"),
    ({"loss_s2c": "101%"}, "loss_s2c"),
    ({"rate": "0"}, "rate"),
    ({"rate": "0mbit"}, "rate"),
    ({"rate": "-10mbit"}, "rate"),
    ({"rate": "10mbps"}, "rate"),
    ({"queue": "0"}, "queue"),
    ({"queue": "many"}, "queue"),
    ({"queue_bytes": "1.5k5"}, "queue_bytes"),
    ({"mtu": "100"}, "mtu"),
    ({"mtu": "70000"}, "mtu"),
    ({"seed": "-1"}, "seed"),
    ({"gemodel": "1%,2%,3%,4%,5%"}, "gemodel"),
    ({"gemodel": "120%"}, "gemodel"),
    ({"loss": "1%", "gemodel": "1%"}, "gemodel"),
    ({"rtt": "10ms", "delay_c2s": "20ms"}, "delay_c2s"),
    ({"overhead": "-4"}, "overhead"),
])
def test_bad_values_name_their_field(kwargs, field):
    with pytest.raises(BadInput) as e:
        LinkSpec.parse(**kwargs)
    assert e.value.field == field
    assert str(e.value).startswith(field + ":")


def test_programmatic_construction_is_validated_too():
    with pytest.raises(BadInput, match="delay"):
        Direction(delay_ms=-1)
    with pytest.raises(BadInput, match="rate"):
        Direction(rate_mbit=0)
    with pytest.raises(BadInput, match="loss"):
        Loss.bernoulli(2)
    with pytest.raises(BadInput, match="rtt"):
        LinkSpec.symmetric(rtt_ms=math.nan)
    with pytest.raises(BadInput, match="mtu"):
        LinkSpec(mtu=10)


def test_gilbert_elliott_defaults_and_mean():
    ge = parse_gemodel("gemodel", "1%")
    assert (ge.p, ge.r, ge.one_minus_h, ge.one_minus_k) == (0.01, 1.0, 1.0, 0.0)  # iproute2's defaults
    ge = parse_gemodel("gemodel", "1%,30%,50%,0.2%")
    bad = 0.01 / 0.31
    assert ge.mean == pytest.approx((1 - bad) * 0.002 + bad * 0.5)
    assert Loss.gemodel(0, 0, 1, 0.25).mean == 0.25  # never leaves the good state


def test_describe_and_round_trip():
    spec = LinkSpec.parse(rtt="31.1ms", loss="1%", rate="10mbit", jitter="1ms")
    line = spec.describe()
    assert "RTT 31.1 ms" in line and "loss 1%" in line and "rate 10 Mbit/s" in line and "jitter" in line
    assert LinkSpec.from_dict(spec.to_dict()) == spec
    asym = LinkSpec.parse(delay_c2s="1ms", delay_s2c="2ms")
    assert "client->server" in asym.describe()


def test_tcp_knobs():
    k = TcpKnobs.parse(initcwnd="40", initrwnd="40", congctl="reno")
    assert k.route_args() == ["initcwnd", "40", "initrwnd", "40", "congctl", "reno"]
    assert TcpKnobs().route_args() == []
    for kwargs, field in (({"initcwnd": "0"}, "initcwnd"), ({"initrwnd": "x"}, "initrwnd"),
                          ({"congctl": "Reno; rm -rf"}, "congctl")):
        with pytest.raises(BadInput) as e:
            TcpKnobs.parse(**kwargs)
        assert e.value.field == field


# --- backend parameter generation --------------------------------------------------------------------

def test_netem_arguments_for_the_paper_grid_point():
    spec = LinkSpec.parse(rtt="31.1ms", loss="1%", rate="1000mbit", queue="1000")
    args = netem_args(spec.client_to_server, spec.mtu)
    # delay in microseconds, Bernoulli loss, rate in bit/s, limit = queue + packets in flight
    in_flight = math.ceil(1e9 * 0.01555 / (8 * 1500))
    assert args == ["netem", "limit", str(1000 + in_flight), "delay", "15550us", "loss", "random", "1%",
                    "rate", "1000000000bit"]


def test_netem_arguments_gemodel_jitter_order_and_seed():
    d = Direction(delay_ms=10, jitter_ms=2, loss=Loss.gemodel(0.01, 0.3, 0.5, 0.002))
    args = netem_args(d, 1500, seed=5)
    assert args[3:6] == ["delay", "10000us", "2000us"]
    assert ["loss", "gemodel", "1%", "30%", "50%", "0.2%"] == args[6:12]
    assert args[12:14] == ["rate", "100gbit"]  # keeps netem from reordering jittered packets
    assert args[-2:] == ["seed", "5"]
    reordering = netem_args(Direction(delay_ms=10, jitter_ms=2, reorder=True), 1500)
    assert "rate" not in reordering
    limited = netem_args(Direction(rate_mbit=10, overhead_bytes=38, queue_packets=50), 1500)
    assert limited[-3:] == ["rate", "10000000bit", "38"] and limited[1:3] == ["limit", "50"]


def test_netem_limit_counts_packets_in_flight():
    assert netem_limit(Direction(delay_ms=100, rate_mbit=12, queue_packets=10), 1500) == 10 + 100
    assert netem_limit(Direction(queue_packets=7), 1500) == 7


def test_netem_commands_one_qdisc_per_end_with_its_direction():
    spec = LinkSpec.parse(delay_c2s="1ms", delay_s2c="2ms", seed="9")
    cmds = qdisc_commands(spec, "pqb-x-cli", "pqbx-c", "pqb-x-srv", "pqbx-s", verb="change", with_seed=True)
    assert cmds[0][:8] == ["tc", "-n", "pqb-x-cli", "qdisc", "change", "dev", "pqbx-c", "root"]
    assert "1000us" in cmds[0] and "2000us" in cmds[1]
    assert cmds[0][-2:] == ["seed", "9"] and cmds[1][-2:] == ["seed", "10"]
    assert "seed" not in qdisc_commands(spec, "a", "b", "c", "d")[0]


def test_pqlink_parameters():
    spec = LinkSpec.parse(rtt="31.1ms", loss_c2s="1%", gemodel="1%,30%", rate="10mbit", seed="3")
    params = link_params(spec)
    assert "c2s.delay_ns=15550000" in params and "s2c.delay_ns=15550000" in params
    assert "c2s.loss_model=bernoulli" in params and "c2s.loss=0.01" in params
    assert "s2c.loss_model=gemodel" in params and "s2c.ge_r=0.3" in params and "s2c.ge_1h=1.0" in params
    assert "c2s.rate_bps=10000000" in params and "c2s.seed=3" in params
    assert "c2s.rate_bps=0" in direction_params("c2s", Direction(), 1)


# --- calibration statistics --------------------------------------------------------------------------

def test_clopper_pearson_interval():
    lo, hi = binomial_ci(0, 10, 0.99)
    assert lo == 0 and hi == pytest.approx(1 - 0.005 ** (1 / 10), abs=1e-9)
    lo, hi = binomial_ci(10, 10, 0.99)
    assert hi == 1 and lo == pytest.approx(0.005 ** (1 / 10), abs=1e-9)
    lo, hi = binomial_ci(200, 20000, 0.99)  # 1 % of 20 000
    assert 0.0081 < lo < 0.0085 and 0.0117 < hi < 0.0122  # normal approx.: 0.0082..0.0118
    # the interval's ends are where the tail probabilities are alpha/2
    assert binom_cdf(199, 20000, lo) == pytest.approx(0.995, abs=1e-6)
    assert binom_cdf(200, 20000, hi) == pytest.approx(0.005, abs=1e-6)


def test_percentiles():
    p = percentiles([float(x) for x in range(1, 101)])
    assert p["n"] == 100 and p["p50"] == pytest.approx(50.5) and p["min"] == 1 and p["max"] == 100
    assert p["p99"] == pytest.approx(99.01)


# --- the CLI -------------------------------------------------------------------------------------------

def _cli(*args):
    env = dict(os.environ, PYTHONPATH=str(SRC))
    return subprocess.run([sys.executable, "-m", "pqbench", "net", *args], capture_output=True, text=True,
                          env=env, timeout=60)


@pytest.mark.parametrize("args,field", [
    (["up", "--rtt=-5ms"], "rtt"),
    (["up", "--loss", "101%"], "loss"),
    (["calibrate", "--rtt", "31.1parsecs"], "rtt"),
    (["calibrate", "--rate", "0"], "rate"),
    (["up", "--mtu", "50"], "mtu"),
    (["up", "--backend", "dummynet"], "backend"),
    (["up", "--initcwnd", "0"], "initcwnd"),
    (["calibrate", "--gemodel", "1%,200%"], "gemodel"),
    (["calibrate", "--packets", "5"], "packets"),
    (["down", "not-a-testbed"], "name"),
])
def test_cli_bad_input_exits_2_naming_the_field(args, field):
    cp = _cli(*args)
    assert cp.returncode == 2, cp.stderr
    assert f"{field}:" in cp.stderr, cp.stderr
