"""``bandits_jax.sim.paired`` against independent computations: the mean paired difference and
the ratio of means by hand, the bootstrap interval against a normal-approximation interval on a
large sample and against ``scipy.stats.bootstrap`` (paired, percentile), the rule on constructed
cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bandits_jax.sim import paired


def test_difference_and_ratio_by_hand():
    regrets = {"ref": [10.0, 20.0, 30.0, 40.0], "a": [12.0, 18.0, 33.0, 45.0], "b": [5.0] * 4}
    out = paired.compare(regrets, "ref", resamples=500, seed=1)
    assert set(out) == {"a", "b"}
    a = out["a"]
    # differences 2, -2, 3, 5: mean 2; means 27 and 25
    assert a.n == 4 and a.diff == pytest.approx(2.0) and a.mean == pytest.approx(27.0)
    assert a.reference_mean == pytest.approx(25.0) and a.ratio == pytest.approx(27.0 / 25.0)
    assert -2.0 <= a.low <= a.diff <= a.high <= 5.0  # within the range of the pair differences
    assert out["b"].diff == pytest.approx(-20.0) and out["b"].ratio == pytest.approx(0.2)


def test_interval_is_reproducible_and_seeded():
    d = np.random.default_rng(3).normal(size=30)
    assert paired.bootstrap_interval(d, seed=7) == paired.bootstrap_interval(d, seed=7)
    assert paired.bootstrap_interval(d, seed=7) != paired.bootstrap_interval(d, seed=8)


def test_interval_matches_normal_approximation_on_a_large_sample():
    d = np.random.default_rng(0).exponential(2.0, size=2000) - 1.0
    low, high = paired.bootstrap_interval(d, resamples=10_000, seed=0)
    se = d.std(ddof=1) / math.sqrt(d.size)
    z = 1.959963984540054
    # the bootstrap's endpoints' Monte-Carlo error is about 0.02 se here, the skew ~0.02 se
    assert low == pytest.approx(d.mean() - z * se, abs=0.1 * se)
    assert high == pytest.approx(d.mean() + z * se, abs=0.1 * se)


def test_interval_matches_scipy_paired_percentile_bootstrap():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(5)
    ref = rng.gamma(2.0, 20.0, size=40)
    learner = ref * rng.uniform(0.7, 1.2, size=40) + rng.normal(0, 5, size=40)
    c = paired.compare({"ref": ref, "x": learner}, "ref", resamples=10_000, seed=0)["x"]
    res = stats.bootstrap(
        (learner, ref), lambda x, y, axis=-1: np.mean(x - y, axis=axis), paired=True,
        vectorized=True, n_resamples=10_000, method="percentile", confidence_level=0.95,
        random_state=np.random.default_rng(1),
    )  # fmt: skip
    se = np.std(learner - ref, ddof=1) / math.sqrt(40)
    # two independent Monte-Carlo estimates of the same percentiles: a few hundredths of an se
    assert c.low == pytest.approx(res.confidence_interval.low, abs=0.1 * se)
    assert c.high == pytest.approx(res.confidence_interval.high, abs=0.1 * se)


def test_shapes_must_match_and_input_checked():
    with pytest.raises(ValueError, match="pairs"):
        paired.compare({"ref": [1.0, 2.0], "x": [1.0, 2.0, 3.0]}, "ref")
    with pytest.raises(ValueError, match="at least 2"):
        paired.bootstrap_interval([1.0])
    with pytest.raises(ValueError, match="finite"):
        paired.bootstrap_interval([1.0, float("nan")])


@pytest.mark.parametrize(
    ("intervals", "expected"),
    [
        ([(-5.0, -1.0), (-3.0, -0.5)], "wins"),  # below zero on both draws
        ([(1.0, 5.0), (0.5, 3.0)], "loses"),  # above zero on both
        ([(-5.0, -1.0), (-3.0, 0.5)], "level"),  # the second draw holds zero
        ([(-5.0, -1.0), (0.5, 3.0)], "level"),  # the draws disagree
        ([(-5.0, 1.0), (-1.0, 2.0)], "level"),  # both hold zero
        ([(-5.0, -1.0)], "level"),  # one draw never decides
        ([], "level"),
        ([(-5.0, -1.0), (-4.0, -2.0), (-3.0, -1.0)], "wins"),  # more draws: each must agree
        ([(-5.0, -1.0), (-4.0, -2.0), (-3.0, 1.0)], "level"),
        ([(-1.0, 0.0), (-2.0, -1.0)], "level"),  # an endpoint at zero does not exclude it
    ],
)
def test_rule_on_constructed_cases(intervals, expected):
    assert paired.verdict(intervals) == expected


def test_rule_through_compare_on_two_draws():
    """A clear winner on two disjoint draws wins; a learner equal to the reference is level."""
    rng = np.random.default_rng(11)
    verdicts = {"better": [], "same": []}
    for _ in range(2):
        ref = rng.gamma(3.0, 10.0, size=20)
        out = paired.compare({"ref": ref, "better": ref - 10.0 + rng.normal(0, 2, 20),
                              "same": ref.copy()}, "ref", resamples=2000)  # fmt: skip
        for k in verdicts:
            verdicts[k].append((out[k].low, out[k].high))
    assert paired.verdict(verdicts["better"]) == "wins"
    assert paired.verdict(verdicts["same"]) == "level"  # interval [0, 0] holds zero
