import pytest

from pqbench import units
from pqbench.errors import BadInput


@pytest.mark.parametrize("value,ms", [("31.1ms", 31.1), ("0.2s", 200.0), ("500us", 0.5), ("10", 10.0), (5, 5.0)])
def test_durations(value, ms):
    assert units.duration_ms("--rtt", value) == pytest.approx(ms)


@pytest.mark.parametrize("value,mbit", [("10mbit", 10), ("500kbit", 0.5), ("1gbit", 1000), ("2", 2)])
def test_rates(value, mbit):
    assert units.rate_mbit("--rate", value) == pytest.approx(mbit)


@pytest.mark.parametrize("value,p", [("1%", 0.01), ("0.02", 0.02), ("100%", 1.0), (0, 0.0)])
def test_loss(value, p):
    assert units.probability("--loss", value) == pytest.approx(p)


@pytest.mark.parametrize("value,n", [("10k", 10000), ("1M", 1000000), ("1500", 1500), ("4Ki", 4096)])
def test_sizes(value, n):
    assert units.size_bytes("--page", value) == n


@pytest.mark.parametrize("parse,value,needle", [
    (units.duration_ms, "-5ms", ">= 0"),
    (units.duration_ms, "5parsecs", "unknown unit"),
    (units.rate_mbit, "0mbit", "> 0"),
    (units.rate_mbit, "10furlongs", "unknown unit"),
    (units.probability, "101%", "outside"),
    (units.probability, "-0.1", "outside"),
    (units.size_bytes, "1.5", "whole number"),
    (units.duration_ms, "fast", "not a number"),
])
def test_bad_values_name_the_field(parse, value, needle):
    with pytest.raises(BadInput) as e:
        parse("--field", value)
    assert e.value.field == "--field"
    assert str(e.value).startswith("--field:")
    assert needle in str(e.value)
