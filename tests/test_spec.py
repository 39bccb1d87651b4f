"""Experiment specs: good ones load, bad ones fail naming the field; cells expand and order well."""

from pathlib import Path

import pytest

from pqbench.algorithms import catalog
from pqbench.errors import BadInput
from pqbench.experiment import cells as cellmod
from pqbench.experiment import spec as specmod

EXPERIMENTS = sorted((Path(__file__).resolve().parents[1] / "experiments").glob("*.toml"))

GOOD = """
name = "t"
seed = 7
parallel = 2
samples = 20
[axes]
kex = ["X25519", "X25519MLKEM768"]
sig = ["ecdsap256", "mldsa44"]
rtt = ["5.6ms", "31.1ms"]
loss = ["0%", "1%", "2%"]
"""


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda p: p.name)
def test_every_preset_loads(path):
    spec = specmod.read(path)
    assert spec.kex and spec.sig and spec.scenarios
    assert cellmod.expand(spec)


def test_quick_preset_is_small():
    spec = specmod.read(Path(__file__).resolve().parents[1] / "experiments" / "quick.toml")
    assert len(cellmod.expand(spec)) <= 24 and spec.samples.max <= 300


def test_chrome_sizes_adds_rate_limited_access_links():
    """Its header promises 45 cells; access links whose queues never tail-drop a handshake flight
    (two initial windows), measured one worker at a time so no handshake queues behind another."""
    spec = specmod.read(Path(__file__).resolve().parents[1] / "experiments" / "chrome-sizes.toml")
    assert len(cellmod.expand(spec)) == 45
    limited = [s for s in spec.scenarios if s.rate_mbit]
    assert sorted(s.rate_mbit for s in limited) == [1, 10, 50]
    assert all(s.queue >= 20 and s.loss == 0 for s in limited)
    assert spec.parallel == 1 and spec.max_bias is None


def test_parallel_is_a_count_or_auto_with_a_bias_bound():
    axes = '[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]'
    fixed = specmod.parse("parallel = 6\n" + axes)
    assert (fixed.parallel, fixed.max_bias) == (6, None)
    auto = specmod.parse('parallel = "auto"\n' + axes)
    assert (auto.parallel, auto.max_bias) == (128, 0.02)
    tuned = specmod.parse('parallel = "auto"\nmax_parallel = 32\nmax_bias = 0.05\n' + axes)
    assert (tuned.parallel, tuned.max_bias) == (32, 0.05)


def test_good_spec_expands_to_the_product():
    spec = specmod.parse(GOOD)
    cells = cellmod.expand(spec)
    assert len(cells) == 2 * 2 * 2 * 3
    assert len({c.cell_id for c in cells}) == len(cells)
    assert spec.samples.min == spec.samples.max == 20 and spec.samples.ci is None


def test_scenarios_are_named_link_conditions():
    spec = specmod.parse("""
        [axes]
        kex = ["X25519"]
        sig = ["ecdsap256"]
        [[scenario]]
        name = "LTE-M-like"
        rtt = "200ms"
        loss = "10%"
        rate = "1mbit"
        [[scenario]]
        name = "bursty"
        rtt = "50ms"
        gemodel = [0.01, 0.3, 1.0, 0.0]
    """)
    cells = cellmod.expand(spec)
    assert {c.params()["scenario"] for c in cells} == {"LTE-M-like", "bursty"}
    lte = next(c for c in cells if c.scenario.name == "LTE-M-like").link_spec(1)
    assert lte.rtt_ms == 200 and lte.client_to_server.rate_mbit == 1
    bursty = next(c for c in cells if c.scenario.name == "bursty")
    assert bursty.params()["loss_model"].startswith("gemodel")
    assert bursty.params()["loss"] == pytest.approx(0.01 / 0.31)


@pytest.mark.parametrize("text,field", [
    ('[axes]\nsig = ["ecdsap256"]', "axes.kex"),
    ('[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]\nrtt = ["5 parsecs"]', "axes.rtt[0]"),
    ('[axes]\nkex = ["X25519", "kyber9000"]\nsig = ["ecdsap256"]', "axes.kex[1]"),
    ('[axes]\nkex = []\nsig = ["ecdsap256"]', "axes.kex"),
    ('[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]\nloss = ["150%"]', "axes.loss[0]"),
    ('[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]\ncolour = ["red"]', "axes.colour"),
    ('speed = 3\n[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]', "speed"),
    ('[samples]\nmin = 10\nmax = 5\n[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]', "samples.max"),
    ('[samples]\nci = 2\n[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]', "samples.ci"),
    ('[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]\nrtt = ["5ms"]\n[[scenario]]\nname = "x"', "axes.rtt"),
    ('[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]\nresume = true\npage = ["1k"]', "axes.resume"),
    ('[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]\nrate = ["0mbit"]', "axes.rate[0]"),
    ('parallel = 0\n[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]', "parallel"),
    ('parallel = "fast"\n[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]', "parallel"),
    ('parallel = "auto"\nmax_bias = 2\n[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]', "max_bias"),
    ('parallel = "auto"\nmax_parallel = 0\n[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]', "max_parallel"),
    ('parallel = 4\nmax_bias = 0.1\n[axes]\nkex = ["X25519"]\nsig = ["ecdsap256"]', "max_bias"),
    ('[axes\nkex = 1', "spec"),
])
def test_bad_specs_name_the_field(text, field):
    with pytest.raises(BadInput) as e:
        specmod.parse(text)
    assert e.value.field == field, str(e.value)


def test_order_is_seeded_and_interleaved():
    spec = specmod.parse(GOOD)
    cells = cellmod.expand(spec)
    a = [c.cell_id for c in cellmod.order(cells, 7)]
    assert a == [c.cell_id for c in cellmod.order(list(reversed(cells)), 7)]  # same seed, same order
    assert a != [c.cell_id for c in cellmod.order(cells, 8)]
    kex_sequence = [c.kex for c in cellmod.order(cells, 7)]
    runs = sum(1 for x, y in zip(kex_sequence, kex_sequence[1:]) if x != y)
    assert runs >= len(cells) // 4  # algorithms alternate: not one block per algorithm


def test_same_link_condition_means_same_loss_seed_for_every_algorithm():
    cells = cellmod.expand(specmod.parse(GOOD))
    by_link = {}
    for c in cells:
        by_link.setdefault(c.link_key(), set()).add(c.link_spec(7).seed)
    assert all(len(seeds) == 1 for seeds in by_link.values())
    assert len({next(iter(s)) for s in by_link.values()}) == len(by_link)  # different links, different seeds


def test_unavailable_algorithms_give_a_reason(monkeypatch):
    cells = cellmod.expand(specmod.parse(GOOD))
    monkeypatch.setattr(catalog, "availability",
                        lambda alg: catalog.Availability(False, False, "not built here"))
    reasons = {cellmod.unavailable_reason(c) for c in cells}
    assert all(r and "not built here" in r for r in reasons)


SSH = """
[axes]
protocol = "ssh"
kex = ["curve25519-sha256", "mlkem768x25519-sha256"]
sig = ["ssh-ed25519", "ssh-mldsa-44", "sizeonly-sphincssha2128fsimple", "rsa-sha2-512-4096"]
rtt = ["10ms"]
initcwnd = [10, 40]
"""


def test_an_ssh_spec_keeps_ssh_names_and_measures_openssh_or_go_for_ml_dsa():
    spec = specmod.parse(SSH)
    assert spec.protocols == ("ssh",) and spec.kex == ("curve25519-sha256", "mlkem768x25519-sha256")
    cells = cellmod.expand(spec)
    assert len(cells) == 2 * 4 * 2 and {c.protocol for c in cells} == {"ssh"}
    pairs = {c.sig: (c.server, c.client) for c in cells}
    assert pairs == {"ssh-ed25519": ("openssh", "gossh"), "ssh-mldsa-44": ("gossh", "gossh"),
                     "sizeonly-sphincssha2128fsimple": ("openssh", "gossh"), "rsa-sha2-512-4096": ("openssh", "gossh")}
    assert cells[0].params()["protocol"] == "ssh"
    # A TLS cell keeps the id it had before protocols existed; an SSH one differs from its TLS twin.
    link = (("mtu", 1500), ("initcwnd", 10), ("pad", 0))
    tls = cellmod.Cell("X25519", "ed25519", cells[0].scenario, axes=link)
    assert "protocol" not in str(tls.cell_id) and tls.cell_id != cellmod.Cell(
        "X25519", "ed25519", cells[0].scenario, server="gossh", client="gossh", protocol="ssh", axes=link).cell_id


def test_tls_and_ssh_in_one_spec_name_each_algorithm_as_its_protocol_does():
    spec = specmod.parse("""
[axes]
protocol = ["tls", "ssh"]
kex = ["X25519", "mlkem768x25519-sha256", "frodo640aes"]
sig = ["ed25519", "sphincssha2128fsimple"]
""")
    got = {(c.protocol, c.kex, c.sig) for c in cellmod.expand(spec)}
    assert ("tls", "X25519MLKEM768", "ed25519") in got and ("ssh", "mlkem768x25519-sha256", "ssh-ed25519") in got
    assert ("ssh", "curve25519-sha256", "sizeonly-sphincssha2128fsimple") in got  # labelled size-only by name
    assert ("tls", "X25519", "sphincssha2128fsimple") in got
    assert ("ssh", "frodo640aes", "ssh-ed25519") in got  # no SSH name: a cell the SSH stacks skip with a reason


def test_stacks_give_the_protocol_and_must_agree_with_it():
    spec = specmod.parse(GOOD + 'server = ["gossh"]\n')
    assert spec.stacks == (("gossh", "gossh"),) and spec.protocols == ("ssh",)
    crossed = specmod.parse(GOOD + 'server = ["openssl", "openssh"]\nclient = ["openssl", "gossh"]\n')
    assert crossed.stacks == (("openssl", "openssl"), ("openssh", "gossh"))  # pairs across protocols drop out
    with pytest.raises(BadInput) as e:
        specmod.parse(GOOD + 'protocol = "tls"\nstack = ["gossh"]\n')
    assert e.value.field == "axes.stack" and "speaks ssh" in str(e.value)
    # a pair named across protocols is kept: the stacks skip its cells with the reason
    mixed = specmod.parse(GOOD + 'stack = ["openssl/gossh"]\n')
    cell = cellmod.expand(mixed)[0]
    assert (cell.server, cell.client, cell.protocol) == ("openssl", "gossh", "tls")
    assert cellmod.unavailable_reason(cell) == "the openssl server and the gossh client speak different protocols"


@pytest.mark.parametrize("text,field,words", [
    (SSH.replace('"curve25519-sha256"', '"curve25519-sha512"'), "axes.kex[0]", "curve25519-sha256"),
    (SSH.replace('"ssh-mldsa-44"', '"ssh-mldsa44"'), "axes.sig[1]", "ssh-mldsa-44"),
    (SSH.replace('"sizeonly-sphincssha2128fsimple"', '"sizeonly-sphincs128f"'), "axes.sig[2]", "sizeonly-"),
    (SSH.replace('protocol = "ssh"', 'protocol = "quic"'), "axes.protocol", "tls, ssh"),
    ('protocol = "ssh"\n' + SSH, "protocol", "once"),
])
def test_bad_ssh_specs_name_the_field_and_the_closest_names(text, field, words):
    with pytest.raises(BadInput) as e:
        specmod.parse(text)
    assert e.value.field == field and words in str(e.value)


def test_an_unknown_key_gets_the_closest_allowed_one():
    from pqbench.experiment.spec import parse
    with pytest.raises(BadInput) as e:
        parse('lnaes = 2\n[axes]\nkex = ["X25519"]\nsig = ["ed25519"]\n')
    assert e.value.field == "lnaes" and "did you mean 'lanes'?" in str(e.value)
    with pytest.raises(BadInput) as e:
        parse('[axes]\nkex = ["X25519"]\nsig = ["ed25519"]\nintcwnd = [10]\n')
    assert e.value.field == "axes.intcwnd" and "did you mean 'initcwnd'?" in str(e.value)


def test_a_value_that_makes_no_cell_is_reported_not_dropped():
    from pqbench.experiment.spec import parse
    base = '[axes]\nkex = ["X25519"]\nsig = ["ed25519"]\n'
    with pytest.raises(BadInput) as e:
        parse(base + 'stack = ["rustls/openssl"]\nprotocol = ["tls", "ssh"]\n')
    assert e.value.field == "axes.protocol[1]" and "'ssh' makes no cell" in str(e.value)
    with pytest.raises(BadInput) as e:
        parse(base + 'server = ["openssh", "rustls"]\nclient = ["openssl"]\n')
    assert e.value.field == "axes.server[0]" and "openssh makes no cell" in str(e.value)


def test_a_top_level_queue_applies_to_every_grid_point():
    from pqbench.experiment.spec import parse
    s = parse('queue = 40\n[axes]\nkex = ["X25519"]\nsig = ["ed25519"]\nrtt = ["10ms", "20ms"]\nrate = ["10mbit"]\n')
    assert {sc.queue for sc in s.scenarios} == {40}


def test_every_key_and_axis_the_parser_takes_is_documented():
    from pathlib import Path
    from pqbench.experiment import spec
    doc = (Path(__file__).resolve().parents[1] / "docs" / "spec.md").read_text()
    for key in (*spec.TOP_KEYS, *spec.axes_allowed(), "resume", *spec.SCENARIO_KEYS, "min", "max", "ci"):
        assert f"`{key}`" in doc or f"`[{key}]`" in doc or f"`[[{key}]]`" in doc, key
