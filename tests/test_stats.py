"""pqbench.stats against distributions whose percentiles are known exactly (no root, no testbed)."""

import math
from statistics import NormalDist

import numpy as np
import pytest

from pqbench import stats

NORMAL = NormalDist(10, 2)
LOG_MU, LOG_SIGMA = math.log(20), 0.5  # a lognormal: right-skewed like handshake times


def lognormal_quantile(q: float) -> float:
    return math.exp(LOG_MU + LOG_SIGMA * NormalDist().inv_cdf(q / 100))


@pytest.mark.parametrize("dist", ["normal", "lognormal"])
@pytest.mark.parametrize("q", [50, 95])
def test_bootstrap_ci_covers_the_true_percentile(dist, q):
    """Over many independent samples the 95 % CI contains the true percentile most of the time."""
    true = NORMAL.inv_cdf(q / 100) if dist == "normal" else lognormal_quantile(q)
    reps, hits = 60, 0
    for rep in range(reps):
        rng = np.random.default_rng(1000 + rep)
        x = rng.normal(10, 2, 400) if dist == "normal" else rng.lognormal(LOG_MU, LOG_SIGMA, 400)
        est, lo, hi = stats.bootstrap_percentiles(x, (q,), resamples=400, seed=rep)[q]
        assert lo <= est <= hi
        hits += lo <= true <= hi
    assert hits / reps >= 0.85, f"coverage {hits}/{reps}"


def test_bootstrap_ci_narrows_with_more_samples():
    rng = np.random.default_rng(7)
    widths = []
    for n in (100, 2500):
        est, lo, hi = stats.bootstrap_percentiles(rng.normal(10, 2, n), (50,), resamples=500)[50]
        widths.append(hi - lo)
    assert 3 < widths[0] / widths[1] < 8  # about sqrt(25) = 5


def test_bootstrap_percentiles_agree_with_numpy_and_the_old_single_ci():
    x = np.random.default_rng(3).lognormal(LOG_MU, LOG_SIGMA, 300)
    res = stats.bootstrap_percentiles(x, stats.PERCENTILES)
    for q in stats.PERCENTILES:
        assert res[q][0] == pytest.approx(np.percentile(x, q))
        assert res[q][0] == pytest.approx(stats.percentile(sorted(x.tolist()), q))
    lo, hi = stats.bootstrap_ci(x, 95)
    assert lo == pytest.approx(res[95][1], rel=0.05) and hi == pytest.approx(res[95][2], rel=0.05)


def test_bootstrap_of_nothing_is_nan_and_of_one_value_is_that_value():
    assert all(math.isnan(v) for v in stats.bootstrap_percentiles([], (50,))[50])
    assert stats.bootstrap_percentiles([4.0], (50, 99))[99] == (4.0, 4.0, 4.0)
    assert stats.bootstrap_percentiles([None, 2.0, None, 2.0], (50,))[50] == (2.0, 2.0, 2.0)


def test_paired_difference_of_identical_data_is_zero_within_the_ci():
    x = np.random.default_rng(11).lognormal(LOG_MU, LOG_SIGMA, 500)
    est, lo, hi = stats.bootstrap_diff(x, x.copy())
    assert est == 0 and lo <= 0 <= hi


def test_paired_difference_finds_a_shift():
    rng = np.random.default_rng(12)
    a = rng.normal(30, 1, 500)
    b = rng.normal(33, 1, 500)
    est, lo, hi = stats.bootstrap_diff(a, b)
    assert lo <= 3 <= hi and lo > 0
    assert est == pytest.approx(3, abs=0.3)
    est_rev, lo_rev, hi_rev = stats.bootstrap_diff(b, a)
    assert est_rev == pytest.approx(-est) and hi_rev < 0


@pytest.mark.parametrize("k,n,lo,hi", [(0, 30, 0.0, 0.11351), (5, 10, 0.23659, 0.76341), (10, 10, 0.72246, 1.0),
                                       (1, 1000, 0.000177, 0.005640)])
def test_binomial_ci_is_wilsons(k, n, lo, hi):
    p, a, b = stats.binomial_ci(k, n)
    assert p == k / n
    assert a == pytest.approx(lo, abs=2e-5) and b == pytest.approx(hi, abs=2e-5)


def test_binomial_ci_covers_the_true_rate():
    rng = np.random.default_rng(5)
    p_true, n, reps = 0.03, 200, 400
    ks = rng.binomial(n, p_true, reps)
    hits = sum(stats.binomial_ci(int(k), n)[1] <= p_true <= stats.binomial_ci(int(k), n)[2] for k in ks)
    assert hits / reps >= 0.90


def test_binomial_ci_rejects_nonsense():
    assert all(math.isnan(v) for v in stats.binomial_ci(0, 0))
    with pytest.raises(ValueError):
        stats.binomial_ci(3, 2)


@pytest.mark.parametrize("n", [1, 2, 7, 1000])
def test_resampled_percentiles_equal_numpy_on_the_same_resamples(n):
    """The sort-once shortcut gives exactly np.percentile of each resample."""
    x = np.random.default_rng(1).lognormal(0, 1, n)
    qs = (0, 5, 50, 95, 99, 100)
    idx = np.random.default_rng(5).integers(0, n, size=(3, n))
    want = np.percentile(x[idx], qs, axis=1).T
    got = stats._resampled_percentiles(x, qs, 3, np.random.default_rng(5), chunk_cells=2 * n)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
