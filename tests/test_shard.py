"""Shards (`run --shard K/N`) and merging their stores (`pqbench merge`)."""

import random

import pytest

from pqbench.errors import BadInput
from pqbench.experiment import cells as cellmod
from pqbench.experiment import shard
from pqbench.experiment import spec as specmod

GRID = """
name = "grid"
seed = 7
samples = 5
[axes]
kex = ["X25519", "X25519MLKEM768", "p256_frodo640aes"]
sig = ["ecdsap256", "mldsa44"]
rtt = ["5ms", "30ms", "80ms"]
loss = ["0%", "1%"]
page = ["1k", "100k"]
"""


def grid_cells():
    spec = specmod.parse(GRID, "grid.toml")
    return cellmod.order(cellmod.expand(spec), spec.seed)


def condition(cell):
    """A link condition and workload, written out here rather than taken from the module under test."""
    return (cell.scenario.rtt_ms, cell.scenario.loss, cell.mtu, cell.initcwnd, cell.mode, cell.page)


@pytest.mark.parametrize("text", ["", "1", "0/2", "3/2", "1/0", "-1/2", "a/b", "1/2/3", "1.5/2"])
def test_parse_refuses_what_is_not_k_of_n(text):
    with pytest.raises(BadInput) as e:
        shard.parse(text)
    assert e.value.field == "--shard"


def test_parse_reads_k_of_n():
    assert shard.parse("1/1") == (1, 1)
    assert shard.parse("3/8") == (3, 8)
    assert shard.parse(" 2 / 2 ") == (2, 2)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 12, 20])
def test_every_cell_is_in_one_shard_and_conditions_stay_together(n):
    cells = grid_cells()
    parts = [shard.part(cells, k, n) for k in range(1, n + 1)]
    ids = [c.cell_id for p in parts for c in p]
    assert sorted(ids) == sorted(c.cell_id for c in cells)  # all of them, none twice
    home = {}
    for k, p in enumerate(parts):
        for c in p:
            assert home.setdefault(condition(c), k) == k, f"{condition(c)} split over shards {home[condition(c)]} and {k}"
    # all algorithms of a condition: 3 kex x 2 sig
    assert all(sum(condition(c) == cond for c in cells) == 6 for cond in home)


def test_shards_keep_the_given_order_and_do_not_depend_on_it():
    cells = grid_cells()
    shuffled = cells[:]
    random.Random(1).shuffle(shuffled)
    for k in (1, 2, 3):
        mine = shard.part(cells, k, 3)
        assert mine == [c for c in cells if c in mine]  # a subsequence of the run's order
        assert {c.cell_id for c in shard.part(shuffled, k, 3)} == {c.cell_id for c in mine}
        assert shard.part(cells, k, 3) == mine


def test_shards_are_balanced_by_cells():
    cells = grid_cells()  # 12 conditions of 6 cells
    assert [len(shard.part(cells, k, 4)) for k in range(1, 5)] == [18, 18, 18, 18]
    sizes = [len(shard.part(cells, k, 5)) for k in range(1, 6)]
    assert sum(sizes) == 72 and max(sizes) - min(sizes) <= 6  # at most one condition apart
    # unequal groups: 11 conditions of 6 cells and one of 2 over 2 shards; the small one fills the lighter shard
    small = [c for c in cells if (c.scenario.rtt_ms, c.scenario.loss, c.page) == (5, 0, "1k")]
    cells = [c for c in cells if c not in small] + small[:2]
    parts = [shard.part(cells, k, 2) for k in (1, 2)]
    assert sorted(map(len, parts)) == [32, 36]
    lighter = min(parts, key=len)
    assert all(c in lighter for c in small[:2])


def test_more_shards_than_conditions_leaves_some_empty():
    cells = grid_cells()
    parts = [shard.part(cells, k, 20) for k in range(1, 21)]
    assert sum(1 for p in parts if p) == 12 and sum(len(p) for p in parts) == len(cells)
    assert all(len(p) in (0, 6) for p in parts)
