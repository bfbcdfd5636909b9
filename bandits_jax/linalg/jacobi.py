"""Eigenvalues of many small symmetric matrices by cyclic Jacobi rotations, in plain ``jnp``.

The MLogB bonus for K >= 2 (He et al., eq. 10/19, Lemma 1) needs ``lambda_max`` of one K x K
matrix per action. Each matrix is held as its K(K+1)/2 entries, each an array over the batch, so
a sweep (Golub & Van Loan, 4th ed., Algorithms 8.5.1, 8.5.3) is elementwise; sweeps stop once
every off-diagonal entry is below ``eps`` times the diagonal's scale. Above ``MAX_K``: LAPACK.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.linalg import lapack

MAX_SWEEPS = 12  # cap of the sweep loop (convergence is quadratic)
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
    """Eigenvalues (ascending) of symmetric ``A`` (..., K, K), like ``jnp.linalg.eigvalsh``
    (upper triangle read; non-finite input gives non-finite output)."""
    if A.shape[-1] > MAX_K:
        return lapack.eigvalsh(A)
    return jnp.sort(jnp.stack(_diagonal(A, max_sweeps), axis=-1), axis=-1)


def lambda_max(A: jax.Array, max_sweeps: int = MAX_SWEEPS) -> jax.Array:
    """Largest eigenvalue of symmetric ``A`` (..., K, K): ``eigvalsh(A)[..., -1]`` without the
    sort."""
    if A.shape[-1] > MAX_K:
        return lapack.eigvalsh(A)[..., -1]
    return functools.reduce(jnp.maximum, _diagonal(A, max_sweeps))
