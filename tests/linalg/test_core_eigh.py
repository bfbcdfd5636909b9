"""The FD core's two eigensolvers agree: ``sketch.core_eigh``'s secular path (rank-one secular
updates, what every platform but the CPU runs at K >= 2 and every platform at K = 1) against its
LAPACK path, on the truncation itself (ties, zero weights, degenerate residual directions,
adaptive rank) and on EOFD-MLogB iterates over a stream (paper, robust and adaptive; K = 1 and
K = 4; float64 and float32)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from bandits_jax import mlogb
from bandits_jax.linalg import sketch

_SOLVERS = ("lapack", "batched")


def _both(mu, ext, M, rank, budget, solver):
    tr = sketch.truncate(mu, ext, M, solver)
    ad, r = sketch.truncate_adaptive(mu, ext, M, rank, budget, solver)
    return tr, ad, r


def _core_inputs(case, k, seed):
    D, m = 12, 6
    rng = np.random.default_rng(seed)
    V = np.linalg.qr(rng.normal(size=(D, m)))[0]
    mu = np.sort(rng.exponential(size=m))[::-1]
    X = rng.normal(size=(D, k))
    G = rng.normal(size=(k, k))
    M = G @ G.T
    if case == "zero_mu":  # the first m rounds: every weight is zero
        mu[:] = 0.0
    elif case == "ties":  # tied weights and a tied zero block
        mu = np.array([3.0, 3.0, 3.0, 1.0, 0.0, 0.0])
    elif case == "in_span":  # degenerate residual directions: sentinel eigenvalues
        X = V @ rng.normal(size=(m, k))
    elif case == "zero_M":
        M = np.zeros((k, k))
    ext = sketch.extend(jnp.asarray(V), jnp.asarray(X))
    return jnp.asarray(mu), ext, jnp.asarray(M)


@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("case", ["random", "zero_mu", "ties", "in_span", "zero_M"])
def test_truncation_secular_equals_eigh(case, k):
    mu, ext, M = _core_inputs(case, k, seed=k)
    rank, budget = jnp.asarray(3, jnp.int32), jnp.asarray(0.05)

    (tr_e, ad_e, r_e), (tr_s, ad_s, r_s) = [
        jax.jit(_both, static_argnums=5)(mu, ext, M, rank, budget, e) for e in _SOLVERS
    ]
    for a, b in ((tr_e, tr_s), (ad_e, ad_s)):
        np.testing.assert_allclose(b.mu, a.mu, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(b.sigma2, a.sigma2, rtol=1e-10, atol=1e-12)
        # U is unique only up to rotations within tied eigenvalues: compare U diag(mu) U^T
        np.testing.assert_allclose((b.U * b.mu) @ b.U.T, (a.U * a.mu) @ a.U.T, atol=1e-10)
        np.testing.assert_allclose(b.U.T @ b.U, np.eye(b.U.shape[1]), atol=1e-12)
    assert int(r_s) == int(r_e)


def _run_eofd(learner, hp, xs, ys):
    def body(s, xy):
        s = learner.update(s, *xy)
        return s, (s.W, s.mu, s.rho)

    return lax.scan(body, learner.init(hp), (xs, ys))[1]


@pytest.mark.parametrize(
    "K,variant,dtype",
    [
        (1, "paper", jnp.float64),
        (1, "robust_adaptive", jnp.float64),
        (4, "paper", jnp.float64),
        (1, "paper", jnp.float32),
    ],
)
def test_eofd_iterates_secular_equal_eigh(K, variant, dtype):
    d, m, T = 6, 3, 30
    kw = {}
    if variant == "robust_adaptive":
        kw = dict(regularization="robust", max_sketch_size=5, delta_target=1.05)
    hp = mlogb.hyperparams(
        lam=0.8, eta=1.5, S=1.0, beta=0.3, rewards=list(np.linspace(1 / K, 1, K)), dtype=dtype
    )
    rng = np.random.default_rng(K)
    xs = rng.normal(size=(T, d))
    xs[5] = xs[4]  # a repeated action: the residual direction is degenerate
    xs = jnp.asarray(xs / np.linalg.norm(xs, axis=1, keepdims=True), dtype)
    ys = jnp.asarray(rng.integers(0, K + 1, size=T))
    (W_e, mu_e, rho_e), (W_s, mu_s, rho_s) = [
        jax.jit(functools.partial(_run_eofd, learner))(hp, xs, ys)
        for learner in (
            mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m, solver=e, **kw) for e in _SOLVERS
        )
    ]
    tol = 1e-9 if dtype == jnp.float64 else 2e-4
    assert W_s.dtype == dtype
    np.testing.assert_allclose(W_s, W_e, rtol=tol, atol=tol)
    np.testing.assert_allclose(mu_s, mu_e, rtol=tol, atol=tol)
    np.testing.assert_allclose(rho_s, rho_e, rtol=tol, atol=tol)
    if variant == "robust_adaptive":
        assert float(rho_e[-1]) > 0.0  # the sketch truncated, so the comparison means something
