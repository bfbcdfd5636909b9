"""The heavy-tailed action stream: unit actions whose empirical covariance matches the closed form
``Q diag(mu) Q^T`` (mu by scipy's quadrature of the module docstring's integral, Q the env's own
basis), ``W*`` as the Section 4 stream draws it, vmap over trials, and the eager validation."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

from bandits_jax import envs
from bandits_jax.envs.heavy_tail_mlogb import action_spectrum

D = 8


def quad_spectrum(d, decay):
    """mu_i = int_0^inf lam_i/(1 + 2 t lam_i) prod_j (1 + 2 t lam_j)^(-1/2) dt by scipy's
    adaptive quadrature (independent of the module's trapezoid rule on log t)."""
    lam = np.arange(1, d + 1, dtype=float) ** -decay

    def f(t, i):
        return lam[i] / (1 + 2 * t * lam[i]) * np.prod((1 + 2 * t * lam) ** -0.5)

    return np.array(
        [integrate.quad(f, 0, np.inf, args=(i,), epsabs=1e-14, epsrel=1e-12)[0] for i in range(d)]
    )


def stream(env, rounds, seed=0):
    """State and all ``rounds * max_actions`` actions (shown or not) of one run, plus masks."""
    k_init, k_obs = jax.random.split(jax.random.key(seed))
    state = env.init(k_init)
    _, X, mask = jax.jit(jax.vmap(lambda k: env.observe(state, k)))(jax.random.split(k_obs, rounds))
    return state, np.asarray(X), np.asarray(mask)


@pytest.mark.parametrize("d,decay", [(D, 0.0), (D, 1.0), (D, 2.5), (200, 1.0), (200, 0.5)])
def test_spectrum_helper_matches_quadrature(d, decay):
    mu = action_spectrum(d, decay)
    ref = quad_spectrum(d, decay)
    # quad's own tolerance 1e-12 relative; the trapezoid rule on log t is geometrically exact.
    np.testing.assert_allclose(mu, ref, rtol=1e-9, atol=1e-14)
    assert math.isclose(mu.sum(), 1.0, rel_tol=1e-12)  # trace of E[x x^T] = E||x||^2 = 1
    if decay == 0.0:
        np.testing.assert_allclose(mu, 1.0 / d, rtol=1e-12)  # isotropic: I / d


@pytest.mark.parametrize("decay", [1.0, 2.5])
def test_empirical_covariance_matches_closed_form(decay):
    env = envs.heavy_tail_mlogb(num_outcomes=1, dim=D, decay=decay, S=2.0)
    assert (env.num_outcomes, env.dim, env.max_actions) == (1, D, 30)
    state, X, mask = stream(env, 2000)
    assert X.shape == (2000, 30, D)
    A = X.reshape(-1, D)  # every drawn action has the same law, shown or not
    n = A.shape[0]
    np.testing.assert_allclose(np.linalg.norm(A, axis=1), 1.0, atol=10 * np.finfo(float).eps)
    sizes = mask.sum(axis=1)
    assert sizes.min() >= 10 and sizes.max() <= 30 and np.all(mask[:, :10])
    Q = np.asarray(state.basis)
    np.testing.assert_allclose(Q.T @ Q, np.eye(D), atol=1e-12)
    mu = quad_spectrum(D, decay)
    want = (Q * mu) @ Q.T
    emp = A.T @ A / n
    # Each entry is a mean of n i.i.d. products x_i x_j: its standard error is the products'
    # sample standard deviation / sqrt(n); 5 of them bound all 36 distinct entries (false
    # failure ~ 36 * 6e-7).
    prods = A[:, :, None] * A[:, None, :]
    se = prods.std(axis=0) / math.sqrt(n)
    assert np.all(np.abs(emp - want) <= 5 * se + 1e-15), np.max(np.abs(emp - want) / se)
    # The same in the env's basis: diagonal mu, and the test can fail: the naive spectrum
    # lam / sum(lam) (no account of the normalisation) is rejected at the top direction.
    in_basis = Q.T @ emp @ Q
    coords = A @ Q
    se_diag = (coords**2).std(axis=0) / math.sqrt(n)
    np.testing.assert_array_less(np.abs(np.diag(in_basis) - mu), 5 * se_diag)
    lam = np.arange(1, D + 1, dtype=float) ** -decay
    assert abs(in_basis[0, 0] - lam[0] / lam.sum()) > 10 * se_diag[0]


def test_parameter_as_synthetic_and_fresh_basis():
    for S in (0.5, 4.0):
        env = envs.heavy_tail_mlogb(num_outcomes=3, dim=D, decay=1.0, S=S)
        synth = envs.synthetic_mlogb(num_outcomes=3, dim=D, S=S)
        for seed in range(2):
            key = jax.random.key(seed)
            state = env.init(key)
            W = np.asarray(state.W_star)
            assert W.shape == (3, D) and state.basis.shape == (D, D)
            assert math.isclose(np.linalg.norm(W), S, rel_tol=1e-12)
            np.testing.assert_array_equal(W, np.asarray(synth.init(key).W_star))
    Q0 = np.asarray(env.init(jax.random.key(0)).basis)
    Q1 = np.asarray(env.init(jax.random.key(1)).basis)
    assert np.linalg.norm(Q0[:, :2] @ Q0[:, :2].T - Q1[:, :2] @ Q1[:, :2].T) > 0.5


def test_vmap_over_trials_and_float32():
    env = envs.heavy_tail_mlogb(num_outcomes=2, dim=D, decay=0.5, dtype=jnp.float32)
    keys = jax.random.split(jax.random.key(3), 4)
    obs_keys = jax.random.split(jax.random.key(4), 4)
    states = jax.vmap(env.init)(keys)
    assert states.basis.shape == (4, D, D) and states.basis.dtype == jnp.float32
    _, X, mask = jax.vmap(env.observe)(states, obs_keys)
    r = jax.vmap(env.expected_rewards)(states, X)
    assert X.shape == (4, 30, D) and mask.shape == (4, 30) and r.shape == (4, 30)
    assert X.dtype == jnp.float32
    eps32 = float(np.finfo(np.float32).eps)
    for i in range(4):  # the batch equals the trials one by one
        s = env.init(keys[i])
        _, Xi, mi = env.observe(s, obs_keys[i])
        # Same draws; batched and unbatched QR may round differently: Householder's backward
        # error ~ d^2 eps, times cond of a Gaussian 8 x 8 (< 100 for these keys, loosely).
        np.testing.assert_allclose(
            np.asarray(X[i]), np.asarray(Xi), rtol=0, atol=100 * D * D * eps32
        )
        np.testing.assert_array_equal(np.asarray(mask[i]), np.asarray(mi))
    # Unit norms to float32 rounding of a d-term norm.
    norms = np.linalg.norm(np.asarray(X, np.float64), axis=-1)
    np.testing.assert_allclose(norms, 1.0, atol=(D + 2) * eps32)


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        (dict(decay=-0.5), "decay"),
        (dict(decay=float("nan")), "decay"),
        (dict(decay=float("inf")), "decay"),
        (dict(decay=True), "decay"),
        (dict(decay="1"), "decay"),
        (dict(S=0.0), "S"),
        (dict(S=float("nan")), "S"),
        (dict(num_outcomes=0), "num_outcomes"),
        (dict(dim=0), "dim"),
        (dict(dim=2.0), "dim"),
        (dict(min_actions=5, max_actions=4), "min_actions"),
        (dict(rewards=[1.0, 2.0]), "rewards"),
    ],
)
def test_validation_names_function_and_argument(kwargs, needle):
    args = dict(num_outcomes=1, dim=D, decay=1.0) | kwargs
    with pytest.raises(ValueError, match=rf"^heavy_tail_mlogb: .*{needle}"):
        envs.heavy_tail_mlogb(**args)
