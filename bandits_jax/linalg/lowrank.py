"""Operations with ``Z = lam * I + V diag(mu) V^T`` without forming the D x D matrix.

EOFD-MLogB (He et al.), eq. (11) and the Woodbury identity of Section 3.2.2:
``Z^{-1} = (I - V diag(mu / (lam + mu)) V^T) / lam``.

Only columns with ``mu > 0`` must be orthonormal: every formula here weights column ``i`` by a
function of ``mu_i`` that vanishes at ``mu_i = 0``, so zero-weight columns never matter.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


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


def diag_lowrank_solve(diag: jax.Array, A: jax.Array, J: jax.Array, g: jax.Array) -> jax.Array:
    """Returns ``(diag(diag) + A J A^T)^{-1} g`` for ``diag > 0``, A (n, k), J (k, k) PSD.

    Push-through form of the Woodbury identity,
    ``(L + A J A^T)^{-1} = L^{-1} - L^{-1} A (I + J A^T L^{-1} A)^{-1} J A^T L^{-1}``, valid for a
    singular J (``I + J G`` with G PSD is always invertible); O(n k^2 + k^3).
    """
    k = J.shape[0]
    Ad = A / diag[:, None]
    rhs = J @ (Ad.T @ g)
    inner = jnp.eye(k, dtype=A.dtype) + J @ (A.T @ Ad)
    sol = rhs / inner[0, 0] if k == 1 else jnp.linalg.solve(inner, rhs)
    return (g - A @ sol) / diag
