"""The ossified middlebox as a link option: its spec text, what pqlink is told, that only pqlink
emulates it (needs_pqlink); the stage itself is tested in native/pqlink/test_stages.c (under ASan), its effect on the
scan's probes and on clients in tests/test_scan_probes.py."""

import pytest

from conftest import run_pqbench
from pqbench.errors import BadInput
from pqbench.testbed import LinkSpec
from pqbench.testbed.backend_pqlink import link_params
from pqbench.testbed.middlebox import Middlebox


@pytest.mark.parametrize("text,want", [
    ("reset", Middlebox("reset", True, 0)),
    ("drop", Middlebox("drop", True, 0)),
    ("DROP max=1400", Middlebox("drop", True, 1400)),
    ("reset split=off max=1k", Middlebox("reset", False, 1000)),
    ("reset to=10.3.1.7", Middlebox("reset", True, 0, "10.3.1.7")),
    ("drop to=10.3.1.7/32", Middlebox("drop", True, 0, "10.3.1.7")),
    ("drop to=10.3.1.0/24", Middlebox("drop", True, 0, "10.3.1.0/24")),
    ("drop-fragments", Middlebox("drop-fragments", True, 0)),
    ("drop-fragments to=10.3.1.7", Middlebox("drop-fragments", True, 0, "10.3.1.7")),
])
def test_middlebox_spec_text(text, want):
    got = Middlebox.parse(text)
    assert got == want
    assert Middlebox.parse(got.to_text()) == got


@pytest.mark.parametrize("text,why", [
    ("", "start with an action"), ("block", "start with an action"), ("reset split=maybe", "split=on|off"),
    ("reset max=70000", "0..65535"), ("drop split=off", "never act"), ("reset max=x", "middlebox"),
    ("reset to=10.3.1.300", "IPv4 address or network"), ("reset to=10.3.1.1/24", "IPv4 address or network"),
    ("drop-fragments max=1400", "every IP fragment"), ("drop-fragments split=off", "every IP fragment"),
])
def test_middlebox_bad_text_names_the_field(text, why):
    with pytest.raises(BadInput) as e:
        Middlebox.parse(text)
    assert e.value.field == "middlebox" and why in str(e.value), str(e.value)


def test_middlebox_is_client_to_server_and_reaches_pqlink():
    spec = LinkSpec.parse(rtt="10ms", middlebox="drop max=1400")
    assert spec.client_to_server.middlebox == Middlebox("drop", True, 1400)
    assert spec.server_to_client.middlebox is None
    assert spec.needs_pqlink == "client_to_server: an ossified middlebox"
    params = link_params(spec)
    assert {"c2s.middlebox=drop", "c2s.middlebox_split=1", "c2s.middlebox_max=1400", "s2c.middlebox=off"} <= set(params)
    assert "ossified middlebox: drops a ClientHello spanning segments or a ClientHello record over 1400 B" \
        in spec.describe()
    assert LinkSpec.from_dict(spec.to_dict()) == spec  # as stored
    assert "c2s.middlebox=off" in link_params(LinkSpec())  # a live change back to none applies
    assert "c2s.middlebox_to=any" in params
    one = LinkSpec.parse(middlebox="reset to=10.3.1.7")
    assert "c2s.middlebox_to=10.3.1.7" in link_params(one) and "segments to 10.3.1.7;" in one.describe()
    assert LinkSpec.from_dict(one.to_dict()) == one


def test_middlebox_option_is_bad_input_on_the_cli():
    r = run_pqbench("net", "up", "--middlebox", "block", "--name", "pqb-mbxbad")
    assert r.returncode == 2 and "--middlebox" in r.stderr and "reset, drop" in r.stderr, r.stderr
