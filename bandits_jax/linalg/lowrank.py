"""Solves with a diagonal plus a small low-rank term by the Woodbury identity (EOFD-MLogB's
surrogate ``Z_t + eta grad^2 l_t`` restricted to ``span[V, Q]``, Section 3.2.2, eq. 20-22),
without forming the matrix."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bandits_jax.linalg import lapack
from bandits_jax.linalg.secular import psd_factor

# K x K systems up to this size are solved by unrolled jnp (vmaps), beyond by LAPACK.
UNROLL_MAX_K = 8


def diag_lowrank_solve(diag: jax.Array, A: jax.Array, J: jax.Array, g: jax.Array) -> jax.Array:
    """Returns ``(diag(diag) + A J A^T)^{-1} g`` for ``diag > 0``, A (n, k), J (k, k) PSD.

    Symmetric Woodbury identity with ``J = F F^T`` (:func:`~bandits_jax.linalg.secular.psd_factor`):
    ``(L + A J A^T)^{-1} = L^{-1} - L^{-1} A F (I + F^T A^T L^{-1} A F)^{-1} F^T A^T L^{-1}``;
    the inner matrix has eigenvalues >= 1, so an unrolled, unpivoted Cholesky
    (:func:`spd_solve`) is stable for ``k <= UNROLL_MAX_K``.
    """
    k = J.shape[0]
    if k == 1:
        Ad = A[:, 0] / diag
        j = J[0, 0]
        coef = j * (Ad @ g) / (1.0 + j * (Ad @ A[:, 0]))
        return g / diag - coef * Ad
    if k > UNROLL_MAX_K:
        Ad = A / diag[:, None]
        inner = jnp.eye(k, dtype=A.dtype) + J @ (A.T @ Ad)
        return (g - A @ lapack.solve(inner, J @ (Ad.T @ g))) / diag
    AF = A @ psd_factor(J)
    AFd = AF / diag[:, None]
    inner = jnp.eye(k, dtype=A.dtype) + AF.T @ AFd
    return g / diag - AFd @ spd_solve(inner, AFd.T @ g)


def spd_solve(S: jax.Array, b: jax.Array) -> jax.Array:
    """``S^{-1} b`` for a small symmetric positive-definite ``S`` (k x k, k static) by an
    unrolled Cholesky factorisation and two triangular solves in plain ``jnp``."""
    k = S.shape[0]
    L = [[None] * k for _ in range(k)]
    for j in range(k):
        acc = S[j, j] - sum((L[j][p] ** 2 for p in range(j)), jnp.zeros((), S.dtype))
        L[j][j] = jnp.sqrt(acc)
        for i in range(j + 1, k):
            acc = S[i, j] - sum((L[i][p] * L[j][p] for p in range(j)), jnp.zeros((), S.dtype))
            L[i][j] = acc / L[j][j]
    y = []
    for i in range(k):
        y.append((b[i] - sum((L[i][p] * y[p] for p in range(i)), jnp.zeros((), S.dtype))) / L[i][i])
    x = [None] * k
    for i in reversed(range(k)):
        acc = y[i] - sum((L[p][i] * x[p] for p in range(i + 1, k)), jnp.zeros((), S.dtype))
        x[i] = acc / L[i][i]
    return jnp.stack(x)
