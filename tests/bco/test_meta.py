"""Tests of the meta-learners (Optimistic-Hedge E.3, Optimistic-Adapt-ML-Prod E.7-E.9)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.bco import meta

N = 4
RNG = np.random.default_rng(0)
LOSSES = RNG.uniform(-1, 1, size=(3, N))
HINTS = RNG.uniform(-1, 1, size=(4, N))  # m_1 .. m_4 (m_1 is replaced by 0 below)
HINTS[0] = 0.0

_hedge_update = jax.jit(
    lambda state, losses, hint: meta.optimistic_hedge_predict(
        meta.optimistic_hedge_observe(state, losses), hint
    )
)
_prod_update = jax.jit(
    lambda state, regrets, hint: meta.adapt_ml_prod_predict(
        meta.adapt_ml_prod_observe(state, regrets), hint
    )
)


def _hedge_numpy(c0):
    """E.3 with Lemma 15's learning rate, written out with plain numpy."""
    cum = np.zeros(N)
    err = 0.0
    out = []
    for t in range(3):
        err += np.max(np.abs(LOSSES[t] - HINTS[t])) ** 2
        cum += LOSSES[t]
        lr = math.sqrt(math.log(N) / (c0**2 + err))
        logits = -lr * (cum + HINTS[t + 1])
        p = np.exp(logits - logits.max())
        out.append(p / p.sum())
    return out


def test_optimistic_hedge_matches_numpy_and_is_a_distribution():
    c0 = 0.7
    state = meta.optimistic_hedge_init(N, c0)
    np.testing.assert_allclose(state.weights, np.full(N, 0.25))
    expected = _hedge_numpy(c0)
    for t in range(3):
        state = _hedge_update(state, jnp.asarray(LOSSES[t]), jnp.asarray(HINTS[t + 1]))
        p = np.asarray(state.weights)
        assert np.all(p >= 0) and np.isclose(p.sum(), 1.0, atol=1e-14)
        np.testing.assert_allclose(p, expected[t], rtol=1e-12)
    np.testing.assert_allclose(state.optimism, HINTS[3])


def _prod_numpy(regrets):
    """E.7-E.9 with W (not log W); eps_0 = 1/8 (the t = 0 fix)."""
    W = np.full(N, 1.0 / N)
    lr_prev = np.full(N, 0.125)
    err_sum = np.zeros(N)
    out = []
    for t in range(len(regrets)):
        r, m = regrets[t], HINTS[t]
        err_sum += (r - m) ** 2
        with np.errstate(divide="ignore"):
            lr = np.minimum(0.125, np.sqrt(math.log(N) / err_sum))
        W = (W * np.exp(lr_prev * r - lr_prev**2 * (r - m) ** 2)) ** (lr / lr_prev)
        q = lr * np.exp(lr * HINTS[t + 1]) * W
        out.append(q / q.sum())
        lr_prev = lr
    return out


def test_adapt_ml_prod_matches_numpy_and_is_a_distribution():
    regrets = RNG.uniform(-12, 12, size=(3, N))  # large enough that E.9's min is not always 1/8
    state = meta.adapt_ml_prod_init(N)
    np.testing.assert_allclose(state.weights, np.full(N, 0.25))
    expected = _prod_numpy(regrets)
    for t in range(3):
        state = _prod_update(state, jnp.asarray(regrets[t]), jnp.asarray(HINTS[t + 1]))
        p = np.asarray(state.weights)
        assert np.all(p >= 0) and np.isclose(p.sum(), 1.0, atol=1e-14)
        np.testing.assert_allclose(p, expected[t], rtol=1e-12)
    assert np.any(np.asarray(state.lr) < 0.125)


def test_adapt_ml_prod_zero_error_round_keeps_cap_no_nan():
    # E.9 divides by zero while sum (r - m)^2 = 0: eps must stay at the cap, never NaN.
    state = meta.adapt_ml_prod_init(N)
    state = _prod_update(state, jnp.zeros(N), jnp.zeros(N))
    np.testing.assert_array_equal(state.lr, np.full(N, 0.125))
    np.testing.assert_allclose(state.weights, np.full(N, 0.25))
    assert np.all(np.isfinite(np.asarray(state.log_potential)))


def test_hedge_single_expert():
    state = meta.optimistic_hedge_init(1, 1.0)
    state = _hedge_update(state, jnp.ones(1), jnp.ones(1))
    np.testing.assert_array_equal(state.weights, [1.0])


def test_bad_input():
    with pytest.raises(ValueError, match="c0"):
        meta.optimistic_hedge_init(3, 0.0)
    with pytest.raises(ValueError, match="num_experts"):
        meta.optimistic_hedge_init(0, 1.0)
    with pytest.raises(ValueError, match="num_experts"):
        meta.adapt_ml_prod_init(1)
    with pytest.raises(ValueError, match="lr_cap"):
        meta.adapt_ml_prod_init(3, lr_cap=-1.0)
    with pytest.raises(ValueError, match="losses"):
        meta.optimistic_hedge_observe(meta.optimistic_hedge_init(3, 1.0), jnp.ones(4))
    with pytest.raises(ValueError, match="regrets"):
        meta.adapt_ml_prod_observe(meta.adapt_ml_prod_init(3), jnp.ones(2))
    with pytest.raises(ValueError, match="optimism"):
        meta.adapt_ml_prod_predict(meta.adapt_ml_prod_init(3), jnp.ones(2))
