"""The ridge state and its Sherman-Morrison update (bandits_jax.mlogb.ridge) against dense numpy
inverses and solves, float64, compiled at XLA's defaults."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import mlogb
from bandits_jax.mlogb import ridge
from bandits_jax.mlogb.linucb import linucb_hyperparams
from tests import xla_defaults


@pytest.mark.parametrize("intercept", [True, False])
def test_rank_one_updates_equal_the_dense_inverse_and_solve(intercept):
    d, T, lam = 6, 80, 0.7
    rng = np.random.default_rng(int(intercept))
    X = rng.normal(size=(T, d)) * np.linspace(0.1, 3.0, d)  # anisotropic: cond(A) far from 1
    r = rng.uniform(size=T)
    D = d + 1 if intercept else d

    @xla_defaults.jit
    def run(X, r):
        def step(state, xr):
            z = ridge.features(xr[0], intercept)
            new, theta, ok = ridge.update(state, z, xr[1])
            return new, (theta, ok)

        return jax.lax.scan(step, ridge.init(D, jnp.asarray(lam), jnp.float64), (X, r))

    final, (thetas, ok) = run(jnp.asarray(X), jnp.asarray(r))
    assert np.all(ok)
    Z = np.concatenate([X, np.ones((T, 1))], axis=1) if intercept else X
    for t in (0, T // 2, T - 1):
        A = lam * np.eye(D) + Z[: t + 1].T @ Z[: t + 1]
        np.testing.assert_allclose(thetas[t], np.linalg.solve(A, Z[: t + 1].T @ r[: t + 1]),
                                   rtol=1e-9, atol=1e-12)  # fmt: skip
    A = lam * np.eye(D) + Z.T @ Z
    np.testing.assert_allclose(final.A_inv, np.linalg.inv(A), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(final.b, Z.T @ r, rtol=1e-12)
    np.testing.assert_array_equal(final.A_inv, np.asarray(final.A_inv).T)  # exactly symmetric


def test_features_reward_and_observe():
    X = jnp.asarray([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(ridge.features(X, True), [[1, 2, 1], [3, 4, 1]])
    np.testing.assert_array_equal(ridge.features(X[0], True), [1, 2, 1])
    assert ridge.features(X, False) is X
    rewards = jnp.asarray([0.5, 1.0])
    assert [float(ridge.reward(rewards, y)) for y in range(3)] == [0.0, 0.5, 1.0]
    # LinUCB's update splits theta = A^{-1} b into the feature weights and the intercept (dense
    # solve).
    learner = mlogb.linucb(num_outcomes=3, dim=2)
    hp = linucb_hyperparams(lam=2.0, alpha=1.0, rewards=[0.5, 1.0, 1.0], dtype=jnp.float64)
    x, z = jnp.asarray([0.5, -1.0]), np.asarray([0.5, -1.0, 1.0])
    state = learner.update(learner.init(hp), x, 2)
    want = np.linalg.solve(2.0 * np.eye(3) + np.outer(z, z), 1.0 * z)
    np.testing.assert_allclose(state.theta, want[:2], rtol=1e-12)
    np.testing.assert_allclose(state.bias, want[2], rtol=1e-12)
    # the (K, d) view: row 0 is theta
    np.testing.assert_array_equal(state.W, np.stack([state.theta, np.zeros(2), np.zeros(2)]))
    plain = mlogb.linucb(num_outcomes=3, dim=2, intercept=False)
    state = plain.update(plain.init(hp), x, 2)
    want = np.linalg.solve(2.0 * np.eye(2) + np.outer(z[:2], z[:2]), 1.0 * z[:2])
    np.testing.assert_allclose(state.theta, want, rtol=1e-12)
    assert float(state.bias) == 0.0
    # a non-finite feature or reward makes the step non-finite (the guard's two numbers)
    start = ridge.init(3, jnp.asarray(2.0), jnp.float64)
    for zz, rr in (([np.nan, 1.0, 1.0], 1.0), ([np.inf, 0.0, 1.0], 1.0), (z, np.nan)):
        assert not bool(ridge.update(start, jnp.asarray(zz), jnp.asarray(rr))[2])


def test_init_and_intercept_validation():
    st = ridge.init(3, jnp.asarray(2.0), jnp.float64)
    np.testing.assert_array_equal(st.A_inv, np.eye(3) / 2.0)
    np.testing.assert_array_equal(st.b, np.zeros(3))
    assert ridge.check_intercept("f", np.bool_(True)) is True
    with pytest.raises(ValueError, match="f: intercept must be a bool"):
        ridge.check_intercept("f", 1)
