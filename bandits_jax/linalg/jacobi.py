"""Eigenpairs of many small symmetric matrices by cyclic Jacobi rotations, in plain ``jnp``.

The optimistic bonus of MLogB for K >= 2 (He et al., eq. 10/19, Lemma 1) needs
``lambda_max(A(x))`` of one K x K matrix per action, and EOFD's basis extension
(``linalg.sketch.extend``) the eigenpairs of a K x K Gram matrix every round.
``jnp.linalg.eigvalsh`` on an (N, K, K) stack is a loop of N LAPACK calls on CPU (and N x trials
calls under ``vmap``), which cost more than the rest of the selection. Here the K x K matrix is
held as its K(K+1)/2 entries, each an array over the batch, and every rotation is elementwise
arithmetic on those arrays, so a whole sweep is a few fused loops over the batch, whatever the
leading axes are. Above ``MAX_K`` the functions call LAPACK (the unrolled sweep grows as K^2).

Cyclic Jacobi (Golub & Van Loan, Matrix Computations, 4th ed., Algorithm 8.5.3 with the stable
rotation of Algorithm 8.5.1) converges quadratically; a sweep annihilates each off-diagonal entry
in turn, and sweeps stop once every off-diagonal entry is below ``eps`` times the diagonal's
scale (a bounded ``lax.while_loop``). For symmetric positive semi-definite matrices it is the most
accurate eigenvalue method known (Demmel & Veselic 1992): small eigenvalues keep relative
accuracy, where ``eigvalsh`` keeps only absolute accuracy.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["eigh_unsorted", "eigvalsh", "lambda_max"]

MAX_SWEEPS = 12  # quadratic convergence: 3-6 sweeps as a rule for K <= 8 in float64
MAX_K = 8  # above this the unrolled sweep (K (K - 1) / 2 rotations) is too long: LAPACK instead


def _rotate(a: dict, K: int, p: int, q: int) -> tuple[dict, jax.Array, jax.Array]:
    """One Jacobi rotation ``A <- J^T A J`` annihilating ``a[p, q]`` (``a`` holds the upper
    triangle); returns the new entries and ``(c, s)``: columns p, q of J are
    ``c e_p - s e_q`` and ``s e_p + c e_q``."""
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
    return out, c, s


def _sweeps(
    A: jax.Array, max_sweeps: int, vectors: bool
) -> tuple[list[jax.Array], list[list[jax.Array]] | None]:
    """Cyclic Jacobi sweeps on ``A`` (..., K, K): the final diagonal (the eigenvalues, in no
    particular order) and, with ``vectors``, the accumulated rotations ``v[i][j]`` (row i,
    column j of the eigenvector matrix, column j for eigenvalue j)."""
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
        k, entries, vs = carry
        a = dict(zip(keys, entries, strict=True))
        v = [list(vs[i * K : (i + 1) * K]) for i in range(K)] if vectors else None
        for p, q in pairs:
            a, c, s = _rotate(a, K, p, q)
            if vectors:
                for i in range(K):
                    v[i][p], v[i][q] = c * v[i][p] - s * v[i][q], s * v[i][p] + c * v[i][q]
        flat = tuple(x for row in v for x in row) if vectors else vs
        return k + 1, tuple(a[key] for key in keys), flat

    def cond(carry):
        k, entries, _ = carry
        return (k < max_sweeps) & ~off_small(dict(zip(keys, entries, strict=True)))

    entries = tuple(A[..., i, j] for i, j in keys)
    one, zero = jnp.ones_like(entries[0]), jnp.zeros_like(entries[0])
    eye = tuple(one if i == j else zero for i in range(K) for j in range(K)) if vectors else ()
    # A non-finite entry makes every eigenvalue of its matrix NaN (the rotations would hide it).
    poison = jnp.where(jnp.isfinite(sum(entries)), 0.0, jnp.nan).astype(A.dtype)
    _, entries, flat = lax.while_loop(cond, sweep, (jnp.zeros((), jnp.int32), entries, eye))
    a = dict(zip(keys, entries, strict=True))
    v = [[flat[i * K + j] + poison for j in range(K)] for i in range(K)] if vectors else None
    return [a[i, i] + poison for i in range(K)], v


def eigh_unsorted(A: jax.Array, max_sweeps: int = MAX_SWEEPS) -> tuple[jax.Array, jax.Array]:
    """Eigenpairs of symmetric ``A`` (..., K, K) (upper triangle read), for small K, in no
    particular order (as ``lax.linalg.eigh(..., sort_eigenvalues=False)``).

    Returns:
      ``(w, V)``: (..., K) eigenvalues and (..., K, K) orthonormal eigenvectors, ``V[..., :, j]``
      for ``w[..., j]``.
    """
    if A.shape[-1] > MAX_K:
        V, w = lax.linalg.eigh(A, lower=False, symmetrize_input=False, sort_eigenvalues=False)
        return w, V
    d, v = _sweeps(A, max_sweeps, vectors=True)
    V = jnp.stack([jnp.stack(row, axis=-1) for row in v], axis=-2)
    return jnp.stack(d, axis=-1), V


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
        return jnp.linalg.eigvalsh(A, UPLO="U")
    return jnp.sort(jnp.stack(_sweeps(A, max_sweeps, vectors=False)[0], axis=-1), axis=-1)


def lambda_max(A: jax.Array, max_sweeps: int = MAX_SWEEPS) -> jax.Array:
    """Largest eigenvalue of symmetric ``A`` (..., K, K): ``eigvalsh(A)[..., -1]`` without the
    sort."""
    if A.shape[-1] > MAX_K:
        return jnp.linalg.eigvalsh(A, UPLO="U")[..., -1]
    d, _ = _sweeps(A, max_sweeps, vectors=False)
    out = d[0]
    for x in d[1:]:
        out = jnp.maximum(out, x)
    return out
