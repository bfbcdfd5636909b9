"""Issue 8's BCO cases: bools/floats where ints are expected, NaN hyperparameters, and the (E.1)
step pool; each failed (silently accepted or wrong) before the fix."""

import math

import numpy as np
import pytest

from bandits_jax.bco import domains as dom
from bandits_jax.bco import ensembles as ens
from bandits_jax.bco import one_point as op
from bandits_jax.bco import two_point as tp

BALL = dom.ball(1.0)


@pytest.mark.parametrize(
    "factory",
    [
        tp.two_point_learner,
        tp.sphere_learner,
        op.box_ftrl,
        ens.dynamic_ensemble,
        ens.universal_ensemble,
    ],
)
@pytest.mark.parametrize("bad", [True, 2.0, 2.5, float("nan"), 0])
def test_factories_reject_non_int_dim(factory, bad):
    with pytest.raises(ValueError, match="dim"):
        factory(dim=bad)


def test_static_iteration_caps_reject_bools():
    with pytest.raises(ValueError, match="max_steps"):
        op.box_ftrl(dim=2, max_steps=True)
    with pytest.raises(ValueError, match="fixed_point_steps"):
        ens.universal_ensemble(dim=2, fixed_point_steps=True)


@pytest.mark.parametrize("horizon", [2.5, True, float("nan"), 0])
def test_horizon_must_be_an_int(horizon):
    with pytest.raises(ValueError, match="horizon"):
        tp.two_point_learner(dim=2).hyperparams(BALL, horizon=horizon)
    with pytest.raises(ValueError, match="horizon"):
        ens.dynamic_ensemble(dim=2).hyperparams(BALL, horizon=horizon)
    with pytest.raises(ValueError, match="horizon"):
        ens.universal_ensemble(dim=2).hyperparams(BALL, horizon=horizon, lipschitz=1.0)


NAN = float("nan")


@pytest.mark.parametrize(
    "name",
    ["scale", "lipschitz", "smoothness", "lam", "delta"],
)
def test_two_point_nan_hyperparameters(name):
    kw = {"lam": 1.0, name: NAN}
    with pytest.raises(ValueError, match=name):
        tp.two_point_learner(dim=2, schedule="strongly_convex").hyperparams(BALL, horizon=10, **kw)


def test_two_point_nan_offset():
    with pytest.raises(ValueError, match="offset"):
        tp.two_point_learner(dim=2, schedule="convex").hyperparams(BALL, horizon=10, offset=NAN)


@pytest.mark.parametrize("name", ["gamma", "c0", "smoothness", "delta"])
def test_dynamic_nan_hyperparameters(name):
    with pytest.raises(ValueError, match=name):
        ens.dynamic_ensemble(dim=2).hyperparams(BALL, horizon=10, **{name: NAN})


@pytest.mark.parametrize("name", ["lipschitz", "meta_scale", "lr_cap", "smoothness"])
def test_universal_nan_hyperparameters(name):
    kw = {"lipschitz": 1.0, name: NAN}
    with pytest.raises(ValueError, match=name):
        ens.universal_ensemble(dim=2).hyperparams(BALL, horizon=10, **kw)


@pytest.mark.parametrize("name", ["eta", "optimism_cap"])
def test_box_nan_hyperparameters(name):
    kw = {"eta": 0.1, "optimism_cap": 0.5, name: NAN}
    with pytest.raises(ValueError, match=name):
        op.box_ftrl(dim=2).hyperparams(lower=-np.ones(2), upper=np.ones(2), **kw)


def test_nan_inside_a_grid_is_rejected():
    with pytest.raises(ValueError, match="scale"):
        tp.two_point_learner(dim=2).hyperparams(BALL, horizon=10, scale=np.array([1.0, NAN]))


def _pool_e1(d, T, L, R):
    """(E.1) written out: eta_i = min(cap, base 2^(i-1)), i = 1..N, then distinct values."""
    log_d, log_dT = max(math.log(d), 1.0), max(math.log(d * T), 1.0)
    cap = 1.0 / (20.0 * L * math.sqrt(d**3 * log_dT))
    base = math.sqrt(R**2 / (d**3 * T * log_d))
    n = math.ceil(math.log2(1.0 + math.sqrt(T * log_d) / (16.0 * L * math.sqrt(log_dT)))) + 1
    return sorted({min(cap, base * 2.0**i) for i in range(n)}), cap


@pytest.mark.parametrize("radius", [1e-4, 1e-2, 1.0, 10.0])
def test_theorem_step_pool_matches_e1(radius):
    expected, cap = _pool_e1(4, 1000, 1.0, radius)
    pool = ens.theorem_step_pool(4, 1000, 1.0, radius)
    np.testing.assert_allclose(pool, expected, rtol=1e-15)


def test_small_domain_pool_has_no_cap():
    # Every entry is below the cap: (E.1) never takes the cap, so it is not a pool member.
    expected, cap = _pool_e1(4, 1000, 1.0, 1e-4)
    pool = ens.theorem_step_pool(4, 1000, 1.0, 1e-4)
    assert cap not in expected
    assert not np.any(np.isclose(pool, cap))
    assert len(pool) == len(expected)
