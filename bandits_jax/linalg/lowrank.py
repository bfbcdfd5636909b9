"""Operations with ``Z = lam I + V diag(mu) V^T`` (EOFD-MLogB, eq. 11) without forming it.

Woodbury (Section 3.2.2): ``Z^{-1} = (I - V diag(mu / (lam + mu)) V^T) / lam``. Every formula
weights column ``i`` by a function of ``mu_i`` that vanishes at 0, so only columns with
``mu > 0`` must be orthonormal.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bandits_jax.linalg import lapack
from bandits_jax.linalg.secular import psd_factor


def solve(V: jax.Array, mu: jax.Array, lam: jax.Array, g: jax.Array) -> jax.Array:
    """Returns ``Z^{-1} g`` for ``g`` of shape (D,) or (D, k) by the Woodbury identity."""
    coef = V.T @ g
    w = mu / (lam + mu)
    coef = coef * (w if g.ndim == 1 else w[:, None])
    return (g - V @ coef) / lam


def inv_quad(V: jax.Array, mu: jax.Array, lam: jax.Array, g: jax.Array) -> jax.Array:
    """Returns ``||g||^2_{Z^{-1}}``, clipped at 0 against cancellation (g of shape (..., D))."""
    coef = g @ V
    val = (jnp.sum(g * g, axis=-1) - jnp.sum(coef**2 * (mu / (lam + mu)), axis=-1)) / lam
    return jnp.maximum(val, 0.0)


def quad(V: jax.Array, mu: jax.Array, lam: jax.Array, g: jax.Array) -> jax.Array:
    """Returns ``||g||^2_Z = lam ||g||^2 + sum_i mu_i (v_i^T g)^2`` (g of shape (..., D))."""
    coef = g @ V
    return lam * jnp.sum(g * g, axis=-1) + jnp.sum(mu * coef**2, axis=-1)


def dense(V: jax.Array, mu: jax.Array, lam: jax.Array) -> jax.Array:
    """Forms ``Z`` densely (tests and small problems only)."""
    return lam * jnp.eye(V.shape[0], dtype=V.dtype) + (V * mu) @ V.T


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
