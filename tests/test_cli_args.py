"""Command-line values that start with a minus reach pqbench's validators (no root needed: the
link options are checked before any testbed is made)."""

import pytest

from conftest import run_pqbench
from pqbench.cli import build_parser

HANDSHAKE = ["handshake", "--kex", "X25519", "--sig", "ecdsap256"]


@pytest.mark.parametrize("command", [HANDSHAKE, ["net", "up"]], ids=["handshake", "net up"])
@pytest.mark.parametrize("option,value", [("--rtt", "-5ms"), ("--jitter", "-1ms"), ("--delay-c2s", "-2ms")])
def test_negative_durations_exit_2_naming_the_option(command, option, value):
    proc = run_pqbench(*command, option, value, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert f"{option}: '{value}' must be >= 0" in proc.stderr, proc.stderr
    assert "expected one argument" not in proc.stderr


@pytest.mark.parametrize("args,option", [
    (["net", "up", "--rate", "-10mbit"], "--rate"),
    (["net", "up", "--queue", "-3"], "--queue"),
    (["net", "calibrate", "--goodput-time", "-1s"], "--goodput-time"),
    (HANDSHAKE + ["--pad", "-100"], "--pad"),
])
def test_other_negative_values_reach_the_validator_too(args, option):
    proc = run_pqbench(*args, timeout=60)
    assert proc.returncode == 2 and f"{option}: " in proc.stderr, proc.stderr


def test_only_options_that_take_a_value_get_it_attached():
    args = build_parser().parse_args(HANDSHAKE + ["--rtt", "-5ms", "-n", "-.5", "--loss=-1%"])
    assert (args.rtt, args.n, args.loss) == ("-5ms", "-.5", "-1%")
    with pytest.raises(SystemExit) as e:  # a flag takes no value: "-5ms" stays an unknown argument
        build_parser().parse_args(HANDSHAKE + ["--json", "-5ms"])
    assert e.value.code == 2
    with pytest.raises(SystemExit):  # a missing value is still argparse's error
        build_parser().parse_args(HANDSHAKE + ["--rtt", "--loss", "1%"])
