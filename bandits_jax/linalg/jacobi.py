"""Eigenvalues of many small symmetric matrices by cyclic Jacobi rotations, in plain ``jnp``.

The optimistic bonus of MLogB for K >= 2 (He et al., eq. 10/19, Lemma 1) needs
``lambda_max(A(x))`` of one K x K matrix per action. ``jnp.linalg.eigvalsh`` on an (N, K, K)
stack is a loop of N LAPACK calls on CPU (and N x trials calls under ``vmap``), which cost more
than the rest of the selection. Here the K x K matrix is held as its K(K+1)/2 entries, each an
array over the batch, and every rotation is elementwise arithmetic on those arrays, so a whole
sweep is a few fused loops over the batch, whatever the leading axes are. Above ``MAX_K`` the
functions call LAPACK (the unrolled sweep grows as K^2).

Cyclic Jacobi (Golub & Van Loan, Matrix Computations, 4th ed., Algorithm 8.5.3 with the stable
rotation of Algorithm 8.5.1) converges quadratically; a sweep annihilates each off-diagonal entry
in turn, and sweeps stop once every off-diagonal entry is below ``eps`` times the diagonal's
scale (a bounded ``lax.while_loop``). Jacobi is the most accurate eigenvalue method known for
symmetric positive definite matrices (Demmel & Veselic 1992): with their stopping rule
``|a_pq| <= eps sqrt(a_pp a_qq)`` small eigenvalues keep relative accuracy. This module's rule is
normwise, so that holds on moderately graded matrices (``tests/linalg/test_jacobi.py``) but not
on strongly graded ones (a spread of 1e-8 can cost small eigenvalues their relative accuracy);
the bonus needs only ``lambda_max``, accurate to ``eps`` times the scale either way.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.linalg import lapack

__all__ = ["eigvalsh", "lambda_max"]

MAX_SWEEPS = 12  # quadratic convergence: 3-6 sweeps as a rule for K <= 8 in float64
MAX_K = 8  # above this the unrolled sweep (K (K - 1) / 2 rotations) is too long: LAPACK instead


def _rotate(a: dict, K: int, p: int, q: int) -> dict:
    """One Jacobi rotation ``A <- J^T A J`` annihilating ``a[p, q]`` (``a`` holds the upper
    triangle)."""
    apq = a[p, q]
    app, aqq = a[p, p], a[q, q]
    nonzero = apq != 0
    theta = (aqq - app) / (2.0 * jnp.where(nonzero, apq, 1.0))
    t = jnp.where(theta >= 0, 1.0, -1.0) / (jnp.abs(theta) + jnp.sqrt(theta * theta + 1.0))
    t = jnp.where(nonzero & jnp.isfinite(t), t, 0.0)
    c = 1.0 / jnp.sqrt(t * t + 1.0)
    s = t * c
    out = dict(a)
    out[p, p] = app - t * apq
    out[q, q] = aqq + t * apq
    out[p, q] = jnp.zeros_like(apq)
    for r in range(K):
        if r in (p, q):
            continue
        arp = a[min(r, p), max(r, p)]
        arq = a[min(r, q), max(r, q)]
        out[min(r, p), max(r, p)] = c * arp - s * arq
        out[min(r, q), max(r, q)] = s * arp + c * arq
    return out


def _diagonal(A: jax.Array, max_sweeps: int) -> list[jax.Array]:
    """The diagonal of ``A`` (..., K, K) after cyclic Jacobi sweeps: its eigenvalues, unordered."""
    K = A.shape[-1]
    if A.ndim < 2 or A.shape[-2] != K:
        raise ValueError(f"A: expected shape (..., K, K), got {A.shape}")
    pairs = [(p, q) for p in range(K) for q in range(p + 1, K)]
    keys = [(i, j) for i in range(K) for j in range(i, K)]
    eps = jnp.finfo(A.dtype).eps

    def off_small(a):
        scale = sum(jnp.abs(a[i, i]) for i in range(K))
        off = sum(jnp.abs(a[p, q]) for p, q in pairs)
        # Non-finite entries stop the loop (their matrix's result is NaN, see ``poison``).
        return jnp.all((off <= eps * scale) | ~jnp.isfinite(off + scale))

    def sweep(carry):
        k, entries = carry
        a = dict(zip(keys, entries, strict=True))
        for p, q in pairs:
            a = _rotate(a, K, p, q)
        return k + 1, tuple(a[key] for key in keys)

    def cond(carry):
        k, entries = carry
        return (k < max_sweeps) & ~off_small(dict(zip(keys, entries, strict=True)))

    entries = tuple(A[..., i, j] for i, j in keys)
    # A non-finite entry makes every eigenvalue of its matrix NaN (the rotations would hide it).
    poison = jnp.where(jnp.isfinite(sum(entries)), 0.0, jnp.nan).astype(A.dtype)
    _, entries = lax.while_loop(cond, sweep, (jnp.zeros((), jnp.int32), entries))
    a = dict(zip(keys, entries, strict=True))
    return [a[i, i] + poison for i in range(K)]


def eigvalsh(A: jax.Array, max_sweeps: int = MAX_SWEEPS) -> jax.Array:
    """Eigenvalues (ascending) of symmetric ``A`` of shape (..., K, K), like
    ``jnp.linalg.eigvalsh`` (only the upper triangle is read), for small K.

    Args:
      A: (..., K, K) symmetric, finite (non-finite input gives non-finite output).
      max_sweeps: cap of the sweep loop (static).

    Returns:
      (..., K) eigenvalues, ascending.
    """
    if A.shape[-1] > MAX_K:
        return lapack.eigvalsh(A)
    return jnp.sort(jnp.stack(_diagonal(A, max_sweeps), axis=-1), axis=-1)


def lambda_max(A: jax.Array, max_sweeps: int = MAX_SWEEPS) -> jax.Array:
    """Largest eigenvalue of symmetric ``A`` (..., K, K): ``eigvalsh(A)[..., -1]`` without the
    sort."""
    if A.shape[-1] > MAX_K:
        return lapack.eigvalsh(A)[..., -1]
    d = _diagonal(A, max_sweeps)
    out = d[0]
    for x in d[1:]:
        out = jnp.maximum(out, x)
    return out
