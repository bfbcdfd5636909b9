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


def np_lowrank(key, K, d, r, S, noise, max_actions, dtype):
    """The module docstring's construction in float64 numpy, from the environment's raw draws
    (the Gaussians and uniforms it takes from ``key`` as ``init``/``observe``/``outcome`` split
    it, in its dtype): U by numpy's QR, ``W* = G U^T`` scaled to norm S, actions
    ``x = U z + noise g / sqrt(d)`` normalised; and the first round's shown-count ``n``."""
    k_init, k_obs = jax.random.split(key)
    k_u, k_w = jax.random.split(k_init)
    G_u = np.asarray(jax.random.normal(k_u, (d, r), dtype), np.float64)
    G_w = np.asarray(jax.random.normal(k_w, (K, r), dtype), np.float64)
    U, _ = np.linalg.qr(G_u)
    W = G_w @ U.T
    W *= S / np.linalg.norm(W)
    k_n, k_x = jax.random.split(k_obs)
    k_z, k_g = jax.random.split(k_x)
    z = np.asarray(jax.random.normal(k_z, (max_actions, r), dtype), np.float64) / np.sqrt(r)
    g = np.asarray(jax.random.normal(k_g, (max_actions, d), dtype), np.float64)
    X = z @ U.T + noise / np.sqrt(d) * g
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return U, W, X, np.linalg.cond(G_u), k_obs


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_values_match_numpy_construction(dtype):
    """W*, U, the actions, the expected rewards and the outcomes of the float32 (and float64)
    environment against the float64 numpy construction from the same raw draws."""
    K, d, r, S, noise = 3, 12, 3, 2.0, 0.3
    rewards = np.array([0.25, 0.5, 1.0])
    env = envs.lowrank_mlogb(
        num_outcomes=K, dim=d, rank=r, S=S, noise=noise, rewards=rewards, dtype=dtype
    )
    eps = float(np.finfo(dtype).eps)
    key = jax.random.key(11)
    U_ref, W_ref, X_ref, cond_u, k_obs = np_lowrank(key, K, d, r, S, noise, 30, dtype)
    state = env.init(jax.random.split(key)[0])
    _, X, _ = env.observe(state, k_obs)
    assert state.W_star.dtype == dtype and state.basis.dtype == dtype and X.dtype == dtype
    U, W, X = (np.asarray(a, np.float64) for a in (state.basis, state.W_star, X))
    # Householder QR in the env's precision: backward error ~ d r eps, so Q moves by
    # ~ cond(G_u) d r eps (columns compared up to sign: QR fixes them only up to sign).
    tol_u = cond_u * d * r * eps
    U_ref = U_ref * np.sign(np.sum(U_ref * U, axis=0))
    np.testing.assert_allclose(U, U_ref, rtol=0, atol=tol_u)
    # W* = G U^T (r-term sums) scaled: tol_u relative plus (r + d) eps of rounding.
    np.testing.assert_allclose(W, W_ref, rtol=0, atol=S * (tol_u + (r + d) * eps))
    # Actions: U z + noise g (r + 1 terms per entry) normalised (a d-term norm), unit rows.
    np.testing.assert_allclose(X, X_ref, rtol=0, atol=tol_u + (r + d + 2) * eps)
    # Expected rewards r^T softmax([0, W x]) from the env's own state and actions: W x carries
    # d eps ||W|| ||x|| = d eps S of rounding, softmax's probabilities 2 d S eps + (K + 1) eps.
    got = np.asarray(env.expected_rewards(state, jnp.asarray(X, dtype)))
    want = np_expected_reward(W, X, rewards)
    np.testing.assert_allclose(got, want, rtol=0, atol=(2 * d * S + K + 1) * eps * rewards.max())
    # Outcomes: the inverse-CDF draw of model.sample_outcome with the env's uniform; equal
    # outcomes wherever u is farther than the CDF's rounding (2 d S + K + 1) eps from a step.
    x = X[0]
    keys = jax.random.split(jax.random.key(12), 2000)
    ys = np.asarray(jax.vmap(lambda k: env.outcome(state, jnp.asarray(x, dtype), k))(keys))
    u = np.asarray(jax.vmap(lambda k: jax.random.uniform(k, (), dtype))(keys), np.float64)
    zl = np.concatenate([[0.0], W @ x])
    cdf = np.cumsum(np.exp(zl - zl.max()) / np.exp(zl - zl.max()).sum())
    want_y = np.minimum(np.searchsorted(cdf, u, side="right"), K)
    clear = np.min(np.abs(u[:, None] - cdf[None, :]), axis=1) > (2 * d * S + K + 1) * eps
    assert clear.mean() > 0.99
    np.testing.assert_array_equal(ys[clear], want_y[clear])
    assert len(np.unique(ys)) == K + 1  # every outcome occurs: the law is not degenerate


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
