"""Woodbury helpers against dense linear algebra (float64)."""

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.linalg import lowrank


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
