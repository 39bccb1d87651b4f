"""What deployed clients and servers do, as spec axes: offers, the server's preference, certificate
compression, full / resumed / 0-RTT connections; and measured in a run, against their baselines."""

import pytest

from pqbench.errors import BadInput
from pqbench.experiment import cells as cellmod
from pqbench.experiment import spec as specmod

BASE = """
parallel = 1
samples = {n}
[axes]
sig = ["ecdsap256"]
rtt = ["31.1ms"]
"""
DEPLOY = """offer = ["X25519MLKEM768", "X25519MLKEM768+X25519", "X25519 / X25519MLKEM768"]
server_groups = ["X25519MLKEM768/X25519"]
compress = ["none", "zlib"]
resumption = ["full", "0rtt"]
"""


def test_offers_name_the_key_exchange_and_every_axis_reaches_the_cell():
    cells = cellmod.expand(specmod.parse(BASE.format(n=5) + DEPLOY))
    assert len(cells) == 3 * 2 * 2
    wrong = next(c for c in cells if c.offer == "X25519 / X25519MLKEM768" and c.mode == "early" and c.compress)
    assert wrong.kex == "X25519"  # an offer's key exchange is its first key share: the client's prediction
    assert wrong.params()["server_groups"] == "X25519MLKEM768/X25519" and wrong.params()["compress"] == "zlib"
    assert {c.mode for c in cells} == {"page", "early"} and {c.page for c in cells} == {"1k"}
    assert all(cellmod.unavailable_reason(c) is None for c in cells)


def test_a_stack_without_offers_skips_its_cells_with_the_reason():
    spec = specmod.parse(BASE.format(n=5) + 'offer = ["X25519MLKEM768+X25519"]\nstack = ["rustls"]\n')
    (cell,) = cellmod.expand(spec)
    reason = cellmod.unavailable_reason(cell) or ""
    if "is not built" in reason:
        pytest.skip("the rustls stack is not built here (make test builds every stack)")
    assert "offer" in reason


@pytest.mark.parametrize("extra,field,words", [
    ('offer = ["X25519MLKEM769"]\n', "axes.offer[0]", "X25519MLKEM768"),  # closest names
    ('offer = ["X25519+X25519"]\n', "axes.offer[0]", "twice"),
    ('offer = ["X25519"]\nkex = ["X25519"]\n', "axes.offer", "leave out kex"),
    ('kex = ["X25519"]\ncompress = ["lzma"]\n', "axes.compress[0]", "zlib"),
    ('kex = ["X25519"]\nresumption = ["full"]\nrequests = [3]\n', "axes.resumption", "requests"),
    ('kex = ["X25519"]\nresumption = ["half"]\n', "axes.resumption[0]", "0rtt"),
])
def test_bad_deployment_axes_name_the_field(extra, field, words):
    with pytest.raises(BadInput) as e:
        specmod.parse(BASE.format(n=5) + extra)
    assert e.value.field == field and words in e.value.detail, (e.value.field, e.value.detail)


@pytest.mark.root
@pytest.mark.slow
def test_a_run_measures_two_shares_a_wrong_prediction_compression_and_0rtt(built_stack, tmp_path):
    from pqbench import analysis, store
    from pqbench.measure import runner
    from pqbench.report import deployment
    db = tmp_path / "r.duckdb"
    run_id = runner.run(specmod.parse(BASE.format(n=8) + DEPLOY, "deploy.toml"), db, quiet=True, keep_files=False)
    con = store.connect(db, read_only=True)
    a = analysis.analyse(con, run_id, resamples=200)
    by = {(c.row["offer"], c.row["mode"], c.row.get("compress")): c for c in a.cells}
    assert len(by) == 12 and all(c.failures == 0 for c in by.values())
    one, two = by["X25519MLKEM768", "page", None], by["X25519MLKEM768+X25519", "page", None]
    wrong = by["X25519 / X25519MLKEM768", "page", None]
    assert one.tls["hrr_share"] == 0 and two.tls["hrr_share"] == 0 and wrong.tls["hrr_share"] == 1
    assert wrong.groups == two.groups == ["X25519MLKEM768"]  # the server's preference decides
    assert 30 < two.tls["client_hello_bytes"] - one.tls["client_hello_bytes"] < 100  # X25519's share and its entry
    assert 25 < wrong.p50 - one.p50 < 40  # one more round trip at 31.1 ms
    compressed = by["X25519MLKEM768", "page", "zlib"].tls
    assert compressed["certificate_compressed_bytes"] < compressed["certificate_bytes"]  # an ECDSA chain shrinks
    early = by["X25519MLKEM768", "early", None]
    assert 25 < one.p50 - early.p50 < 40  # the request rode in the first flight
    fates = store.early_data(con, run_id)
    assert fates[early.row["cell_id"]] == {"accepted": 8}
    assert fates[by["X25519 / X25519MLKEM768", "early", None].row["cell_id"]].get("accepted", 0) == 0  # not after an HRR
    tables = [deployment.offers(a), deployment.compression(a), deployment.zero_rtt(a, fates)]
    assert all(t is not None and t.rows for t in tables)
