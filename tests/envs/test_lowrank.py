"""The low-rank action stream (and the validation it shares with the Section 4 stream): unit
actions with r dominant singular values, ``W*`` of norm S in span(U), the logistic outcome law;
all checked against independent numpy computations."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import envs
from bandits_jax.mlogb import model

D, R = 24, 3


def stream(env, rounds, seed=0):
    """State and all ``rounds * max_actions`` actions (shown or not) of one run, plus masks."""
    k_init, k_obs = jax.random.split(jax.random.key(seed))
    state = env.init(k_init)
    keys = jax.random.split(k_obs, rounds)
    _, X, mask = jax.jit(jax.vmap(lambda k: env.observe(state, k)))(keys)
    return state, np.asarray(X), np.asarray(mask)


def np_expected_reward(W, X, r):
    # Independent of the module: softmax over [0, W x] (outcome 0 the dummy), reward-weighted.
    z = np.concatenate([np.zeros((X.shape[0], 1)), X @ W.T], axis=1)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return p[:, 1:] @ r


@pytest.mark.parametrize("noise", [0.0, 0.05])
def test_actions_unit_norm_with_r_dominant_directions(noise):
    env = envs.lowrank_mlogb(num_outcomes=2, dim=D, rank=R, noise=noise, S=2.0)
    assert (env.num_outcomes, env.dim, env.max_actions) == (2, D, 30)
    state, X, mask = stream(env, 100)
    assert X.shape == (100, 30, D)
    np.testing.assert_allclose(np.linalg.norm(X, axis=-1), 1.0, atol=1e-12)
    sizes = mask.sum(axis=1)
    assert sizes.min() >= 10 and sizes.max() <= 30 and np.all(mask[:, :10])
    A = X.reshape(-1, D)
    s = np.linalg.svd(A, compute_uv=False)
    # r directions carry the energy: the first r singular values are comparable ...
    assert s[R - 1] / s[0] > 0.5
    if noise == 0.0:
        assert s[R] / s[R - 1] < 1e-10  # exactly rank r
    else:
        # Off-subspace energy noise^2 / d per direction vs ~1 / r, amplified by the unit-norm
        # scaling of actions with a small subspace part: s_{r+1} / s_r ~ 0.04 (noise 0.5: 0.25).
        assert 1e-3 < s[R] / s[R - 1] < 0.1
    # ... and they span the basis U the state holds (all principal angles ~ 0).
    U = np.asarray(state.basis)
    top = np.linalg.svd(A, full_matrices=False)[2][:R].T
    cosines = np.linalg.svd(U.T @ top, compute_uv=False)
    np.testing.assert_allclose(cosines, 1.0, atol=1e-10 if noise == 0 else 1e-3)


def test_full_rank_basis_is_not_low_rank():
    # The dominant-direction check can fail: with r = d nothing is small.
    env = envs.lowrank_mlogb(num_outcomes=1, dim=8, rank=8, noise=0.0)
    _, X, _ = stream(env, 50)
    s = np.linalg.svd(X.reshape(-1, 8), compute_uv=False)
    assert s[-1] / s[0] > 0.3


@pytest.mark.parametrize("S", [0.5, 4.0])
def test_parameter_norm_and_span(S):
    env = envs.lowrank_mlogb(num_outcomes=3, dim=D, rank=R, S=S)
    for seed in range(3):
        state = env.init(jax.random.key(seed))
        W, U = np.asarray(state.W_star), np.asarray(state.basis)
        assert W.shape == (3, D) and U.shape == (D, R)
        np.testing.assert_allclose(U.T @ U, np.eye(R), atol=1e-12)  # orthonormal
        assert math.isclose(np.linalg.norm(W), S, rel_tol=1e-12)
        residual = W - W @ U @ U.T  # rows projected off span(U)
        assert np.linalg.norm(residual) < 1e-12 * S
    U0 = np.asarray(env.init(jax.random.key(0)).basis)
    U1 = np.asarray(env.init(jax.random.key(1)).basis)
    assert np.linalg.norm(U0 @ U0.T - U1 @ U1.T) > 0.5  # a fresh subspace per key


def test_expected_rewards_and_outcome_law():
    rewards = np.array([0.2, 0.5, 1.0])
    env = envs.lowrank_mlogb(num_outcomes=3, dim=D, rank=R, S=3.0, rewards=rewards)
    state, X, _ = stream(env, 2)
    W = np.asarray(state.W_star)
    got = np.asarray(env.expected_rewards(state, jnp.asarray(X[0])))
    np.testing.assert_allclose(got, np_expected_reward(W, X[0], rewards), rtol=1e-12)
    np.testing.assert_allclose(
        got, np.asarray(model.expected_reward(state.W_star, X[0], state.rewards)), rtol=1e-14
    )
    x = X[0, 0]
    ys = np.asarray(
        jax.jit(jax.vmap(lambda k: env.outcome(state, jnp.asarray(x), k)))(
            jax.random.split(jax.random.key(7), 8000)
        )
    )
    z = np.concatenate([[0.0], W @ x])
    law = np.exp(z) / np.exp(z).sum()
    np.testing.assert_allclose(np.bincount(ys, minlength=4) / ys.size, law, atol=0.025)


def test_float32():
    env = envs.lowrank_mlogb(num_outcomes=1, dim=6, rank=2, dtype=jnp.float32)
    state, X, _ = stream(env, 2)
    assert state.W_star.dtype == jnp.float32 and state.basis.dtype == jnp.float32
    assert X.dtype == np.float32


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(rank=0), "rank"),
        (dict(rank=D + 1), "rank"),
        (dict(rank=1.5), "rank"),
        (dict(rank=True), "rank"),
        (dict(noise=-0.1), "noise"),
        (dict(noise=float("nan")), "noise"),
        (dict(noise=float("inf")), "noise"),
        (dict(S=0.0), "S"),
        (dict(S=float("nan")), "S"),
        (dict(num_outcomes=0), "num_outcomes"),
        (dict(dim=0), "dim"),
        (dict(min_actions=5, max_actions=4), "min_actions"),
        (dict(rewards=[1.0, 2.0]), "rewards"),
    ],
)
def test_validation_names_the_argument(kwargs, needle):
    args = dict(num_outcomes=1, dim=D, rank=R) | kwargs
    with pytest.raises(ValueError, match=needle):
        envs.lowrank_mlogb(**args)


@pytest.mark.parametrize("S", [0.0, -1.0, float("nan"), float("inf"), "1"])
def test_synthetic_rejects_bad_S(S):
    with pytest.raises(ValueError, match="S must be"):
        envs.synthetic_mlogb(num_outcomes=1, dim=3, S=S)
