import pytest

from pqbench import units
from pqbench.errors import BadInput


@pytest.mark.parametrize("value,ms", [("31.1ms", 31.1), ("0.2s", 200.0), ("500us", 0.5), ("10", 10.0), (5, 5.0),
                                      ("10m", 600_000), ("10min", 600_000), ("1h", 3_600_000), ("1.5h", 5_400_000),
                                      ("1h30m", 5_400_000), ("1m30s", 90_000), ("1h 30m", 5_400_000),
                                      ("2s500ms", 2500), ("1h0m0.5s", 3_600_500), ("1MS", 1.0), ("+1m", 60_000)])
def test_durations(value, ms):
    assert units.duration_ms("--rtt", value) == pytest.approx(ms)


def test_minutes_are_m_and_milliseconds_ms():
    # a unit is every letter after its number: "1ms" is never a minute followed by "s"
    assert units.duration_ms("--x", "1ms") == 1 and units.duration_ms("--x", "1m") == 60_000
    assert units.duration_ms("--x", "1m1s") == 61_000 and units.duration_ms("--x", "1m1ms") == 60_001


def test_bare_numbers_take_the_fields_unit():
    assert units.duration_ms("--seconds", "0.5", bare="s") == 500
    assert units.duration_ms("--seconds", 2, bare="s") == 2000
    assert units.duration_ms("--seconds", "1m", bare="s") == 60_000  # a unit wins


@pytest.mark.parametrize("value,needle", [
    ("1m30", "'30' has no unit"),  # 1m30s? 1m30ms? say so rather than guess
    ("30s1m", "largest unit down"), ("1s1s", "each once"), ("1ms1s", "largest unit down"),
    ("1h-30m", "not a number with a unit"), ("h", "not a number with a unit"), ("", "not a number with a unit"),
    ("1d", "unknown unit 'd'"), ("1h30x", "unknown unit 'x'"), ("-1m", ">= 0"), ("1e400h", "not a finite number"),
])
def test_bad_durations_name_the_field_and_the_units(value, needle):
    with pytest.raises(BadInput) as e:
        units.duration_ms("--duration", value)
    assert e.value.field == "--duration" and needle in str(e.value), str(e.value)
    if "unit" in needle:
        assert "ns, us, ms, s, m (minutes) or h" in str(e.value), str(e.value)


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
