"""Woodbury helpers against dense linear algebra (float64)."""

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.linalg import lowrank


def _problem(D=9, m=4, seed=0):
    rng = np.random.default_rng(seed)
    V, _ = np.linalg.qr(rng.normal(size=(D, m)))
    mu = rng.uniform(0.0, 5.0, size=m)
    mu[-1] = 0.0  # a zero-weight column
    return V, mu, 0.7, rng.normal(size=(3, D))


def test_solve_and_norms_match_dense():
    V, mu, lam, G = _problem()
    Z = lam * np.eye(V.shape[0]) + (V * mu) @ V.T
    np.testing.assert_allclose(lowrank.dense(V, mu, lam), Z, atol=1e-12)
    want = np.linalg.solve(Z, G[0])
    np.testing.assert_allclose(lowrank.solve(V, mu, lam, G[0]), want, rtol=1e-10)
    np.testing.assert_allclose(lowrank.solve(V, mu, lam, G.T), np.linalg.solve(Z, G.T), rtol=1e-10)
    inv = np.einsum("nd,de,ne->n", G, np.linalg.inv(Z), G)
    np.testing.assert_allclose(lowrank.inv_quad(V, mu, lam, G), inv, rtol=1e-10)
    np.testing.assert_allclose(lowrank.quad(V, mu, lam, G), np.einsum("nd,de,ne->n", G, Z, G))


def test_inv_quad_clipped_at_zero():
    """g in span(V) with huge mu: the exact value 1/(lam + mu) ~ 1e-18 is below the cancellation
    of (||g||^2 - sum coef^2 mu/(lam+mu)) / lam, whose rounding is ~ (m + D) eps ||g||^2 / lam;
    the result is never negative and within that rounding of the exact value."""
    V, mu, lam, _ = _problem()
    mu = np.full_like(mu, 1e18)
    for g in (V[:, 0], V @ np.array([0.6, 0.0, 0.8, 0.0])):
        got = float(lowrank.inv_quad(V, mu, lam, g))
        exact = 1.0 / (lam + 1e18)  # g^T Z^{-1} g for a unit g in span(V), equal weights
        D, m = V.shape
        assert 0.0 <= got <= exact + (m + D) * np.finfo(np.float64).eps * (g @ g) / lam


def test_diag_lowrank_solve_matches_dense():
    rng = np.random.default_rng(4)
    n = 11
    diag = rng.uniform(0.5, 3.0, size=n)
    for k in (1, 3, 4, 9):  # 9 > UNROLL_MAX_K: the LAPACK path
        A = rng.normal(size=(n, k))
        B = rng.normal(size=(k, k))
        J = B @ B.T
        J[:, -1] = J[-1, :] = 0.0  # singular J is allowed
        g = rng.normal(size=n)
        want = np.linalg.solve(np.diag(diag) + A @ J @ A.T, g)
        np.testing.assert_allclose(lowrank.diag_lowrank_solve(diag, A, J, g), want, rtol=1e-10)


def test_diag_lowrank_solve_vmaps_and_float32():
    """The unrolled K x K path under vmap equals the loop, and float32 is accurate."""
    rng = np.random.default_rng(5)
    n, k, b = 9, 4, 3
    diag = rng.uniform(0.5, 3.0, size=(b, n))
    A = rng.normal(size=(b, n, k))
    B = rng.normal(size=(b, k, k))
    J = B @ np.swapaxes(B, 1, 2)
    g = rng.normal(size=(b, n))
    got = jax.vmap(lowrank.diag_lowrank_solve)(diag, A, J, g)
    for i in range(b):
        want = np.linalg.solve(np.diag(diag[i]) + A[i] @ J[i] @ A[i].T, g[i])
        np.testing.assert_allclose(got[i], want, rtol=1e-10)
        f32 = lowrank.diag_lowrank_solve(*(jnp.asarray(x[i], jnp.float32) for x in (diag, A, J, g)))
        assert f32.dtype == jnp.float32
        np.testing.assert_allclose(f32, want, rtol=2e-4, atol=2e-4)


def test_spd_solve_matches_numpy():
    rng = np.random.default_rng(6)
    for k in (1, 2, 5):
        G = rng.normal(size=(k, k))
        S = G @ G.T + np.eye(k)
        b = rng.normal(size=k)
        np.testing.assert_allclose(
            lowrank.spd_solve(jnp.asarray(S), jnp.asarray(b)), np.linalg.solve(S, b), rtol=1e-12
        )
