"""Eigendecomposition of ``diag(d) + A M A^T`` by rank-one secular-equation updates.

The Frequent-Directions core (EOFD-MLogB, Algorithm 1, eq. 14-15; ``linalg.sketch.truncate``) is
a diagonal plus a rank-K term with K small. ``jnp.linalg.eigh`` solves it with a LAPACK call that,
under ``vmap`` on CPU, becomes a loop of small calls. Here the same decomposition is written in
plain ``jnp`` so that a batch vectorises:

1. ``M = L L^T`` by an unpivoted LDL^T that drops zero pivots (M PSD), so the low-rank term is
   ``sum_k a_k a_k^T`` with ``a_k`` the columns of ``A L``;
2. K successive rank-one updates ``Q diag(lam) Q^T + a a^T`` (Bunch, Nielsen & Sorensen 1978): in
   the eigenbasis the problem is ``diag(lam) + z z^T`` with ``z = Q^T a``;
3. deflation (Dongarra & Sorensen 1987): tied diagonal entries (every FD weight is zero in the
   first m rounds) are merged by one block Householder reflection that moves each group's part
   of ``z`` onto its first member, and (numerically) zero components of ``z`` are deflated;
4. every root of the secular equation ``1 + sum_j z_j^2 / (d_j - lam) = 0`` is found at once,
   each relative to its nearer pole, by a bracketed two-pole rational interpolation (the
   "middle way" of Li 1993, as in LAPACK ``dlaed4``) with bisection as a safeguard, in one
   bounded ``lax.while_loop``;
5. the eigenvectors use Gu & Eisenstat's (1994) recomputed ``z_hat`` (a Loewner-type product
   formula from the computed roots), which makes them numerically orthogonal however close
   the roots are.

Cost per rank-one update: O(n^2) per root iteration for all n roots together, plus one n x n
matrix product per extra update (the basis ``Q``); no LAPACK call.

References:
  J. R. Bunch, C. P. Nielsen, D. C. Sorensen, "Rank-one modification of the symmetric
  eigenproblem", Numer. Math. 31 (1978). M. Gu, S. C. Eisenstat, "A stable and efficient
  algorithm for the rank-one modification of the symmetric eigenproblem", SIAM J. Matrix Anal.
  Appl. 15 (1994). R.-C. Li, "Solving secular equations stably and efficiently", LAPACK Working
  Note 89 (1993).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bandits_jax.checks import is_concrete

__all__ = ["SecularEigh", "eigh_diag_plus_lowrank", "eigh_diag_plus_rank_one", "psd_factor"]

MAX_STEPS = 64  # root iterations per rank-one update; convergence takes ~5-10 (quadratic)


class SecularEigh(NamedTuple):
    """Result of :func:`eigh_diag_plus_lowrank`.

    Attributes:
      evals: (n,) eigenvalues, ascending (as ``jnp.linalg.eigh``).
      evecs: (n, n) orthonormal eigenvectors, one per column.
      converged: bool, the inputs were finite and every secular root met its tolerance within
        ``MAX_STEPS`` iterations (roots that did not still lie in their bracket, so the result
        stays usable).
    """

    evals: jax.Array
    evecs: jax.Array
    converged: jax.Array


def psd_factor(M: jax.Array) -> jax.Array:
    """``L`` (K, K) with ``L L^T = M`` for a symmetric PSD ``M``, by an unpivoted LDL^T in plain
    ``jnp`` (K unrolled steps); pivots at or below ``K eps max|M|`` (zero for a PSD matrix up to
    rounding) drop their column, so singular ``M`` is fine."""
    K = M.shape[0]
    M = 0.5 * (M + M.T)
    tol = K * jnp.finfo(M.dtype).eps * jnp.max(jnp.abs(M))
    cols = []
    S = M
    for k in range(K):
        piv = S[k, k]
        ok = piv > tol
        col = jnp.where(ok, S[:, k] / jnp.sqrt(jnp.where(ok, piv, 1.0)), 0.0)
        col = col.at[:k].set(0.0)
        cols.append(col)
        S = S - jnp.outer(col, col)
    return jnp.stack(cols, axis=1)


def _householder_groups(ds: jax.Array, y: jax.Array, tol: jax.Array):
    """Groups of tied sorted entries (consecutive gaps <= tol) and the block reflection ``H``
    (``H = H^T = H^{-1}``) that maps each group's part of ``y`` onto its first member.

    Returns ``(y_new, apply_h)`` with ``y_new = H y`` and ``apply_h(W, active) = H W`` for the
    eigenvector matrix ``W`` of the deflated problem (see the comment there)."""
    n = ds.shape[0]
    idx = jnp.arange(n)
    tie = jnp.concatenate([jnp.zeros((1,), bool), (ds[1:] - ds[:-1]) <= tol])
    gid = jnp.cumsum(~tie) - 1
    size = jax.ops.segment_sum(jnp.ones_like(ds), gid, num_segments=n)[gid]
    leader = ~tie
    norm = jnp.sqrt(jax.ops.segment_sum(y * y, gid, num_segments=n))[gid]
    lead_pos = lax.cummax(jnp.where(leader, idx, 0))
    s = jnp.where(y[lead_pos] < 0, -1.0, 1.0).astype(ds.dtype)
    use = (size > 1) & (norm > 0)
    u = jnp.where(use, jnp.where(leader, y + s * norm, y), 0.0)
    uu = jax.ops.segment_sum(u * u, gid, num_segments=n)[gid]
    coef = jnp.where(uu > 0, 2.0 / jnp.where(uu > 0, uu, 1.0), 0.0)
    y_new = jnp.where(use, jnp.where(leader, -s * norm, 0.0), y)

    def apply_h(W, active):
        # H W for the deflated eigenvector matrix W without a scatter: a column of an active
        # root is zero on every non-leader (those are deflated), so within a group it only
        # meets the leader's row; a deflated column is e_c. Hence (H W)[r, c] = W[r, c] -
        # coef_r u_r S[r, c] with S[r, c] = sum_{j in g(r)} u_j W[j, c] given by gathers.
        same = gid[:, None] == gid[None, :]
        lead_part = (u[lead_pos])[:, None] * W[lead_pos, :]
        S = jnp.where(active[None, :], lead_part, jnp.where(same, u[None, :], 0.0))
        return W - (coef * u)[:, None] * S

    return y_new, apply_h


def _secular_roots(ds: jax.Array, w: jax.Array, active: jax.Array):
    """Roots of ``1 + sum_j w_j / (ds_j - lam)`` (``w >= 0``, zero where not active), one per
    active pole: root i lies in ``(ds_i, ds_next)`` (``ds_next`` the next active pole, or
    ``ds_i + sum w`` for the last). Returns ``(origin, tau, converged)`` with
    ``lam_i = origin_i + tau_i`` and ``origin_i`` the nearer pole."""
    n = ds.shape[0]
    dtype = ds.dtype
    eps = jnp.finfo(dtype).eps
    idx = jnp.arange(n)
    nxt = lax.cummin(jnp.where(active, idx, n)[::-1])[::-1]
    nxt = jnp.concatenate([nxt[1:], jnp.full((1,), n)])  # next active strictly after i
    last = nxt >= n
    nxt_c = jnp.minimum(nxt, n - 1)
    total = jnp.sum(w)
    gap = jnp.where(last, total, ds[nxt_c] - ds)
    gap = jnp.where(active & (gap > 0), gap, 1.0)  # inactive rows: any harmless value

    def sums(origin, tau):
        # Everything from 1-D inputs, so that XLA fuses the n x n terms into the reductions
        # (no n x n temporaries: under vmap they would not fit in cache).
        den = (ds[None, :] - origin[:, None]) - tau[:, None]  # ds_j - lam_i
        r = jnp.where(w[None, :] > 0, 1.0 / jnp.where(w[None, :] > 0, den, 1.0), 0.0)
        terms = w[None, :] * r
        left = idx[None, :] <= idx[:, None]  # poles at or left of root i's left pole
        psi = jnp.sum(jnp.where(left, terms, 0.0), axis=1)
        phi = jnp.sum(jnp.where(left, 0.0, terms), axis=1)
        dpsi = jnp.sum(jnp.where(left, terms * r, 0.0), axis=1)
        dphi = jnp.sum(jnp.where(left, 0.0, terms * r), axis=1)
        return psi, phi, dpsi, dphi

    # Which pole is nearer: the sign of f at the interval's midpoint.
    psi, phi, _, _ = sums(ds, 0.5 * gap)
    right = (~last) & (1.0 + psi + phi < 0)
    origin = jnp.where(right, ds[nxt_c], ds)
    p = jnp.where(right, -gap, 0.0)  # left pole, relative to the origin
    q = jnp.where(right, 0.0, gap)  # right pole (for the last root: the upper bound, no pole)
    lo = jnp.where(right, -0.5 * gap, 0.0)
    hi = jnp.where(right, 0.0, jnp.where(last, gap, 0.5 * gap))

    class Carry(NamedTuple):
        tau: jax.Array
        lo: jax.Array
        hi: jax.Array
        done: jax.Array
        step: jax.Array

    def body(c: Carry) -> Carry:
        psi, phi, dpsi, dphi = sums(origin, c.tau)
        f = 1.0 + psi + phi
        err = 1.0 + phi - psi  # psi <= 0 <= phi: the sum of |terms|
        lo = jnp.where(f < 0, c.tau, c.lo)
        hi = jnp.where(f > 0, c.tau, c.hi)
        small = (jnp.abs(f) <= 4 * n * eps * err) | (
            hi - lo <= 4 * eps * jnp.maximum(jnp.abs(lo), jnp.abs(hi))
        )
        # Two-pole model: psi ~ a1 + s/(p - x), phi ~ a2 + t/(q - x), matched at tau.
        s = dpsi * (p - c.tau) ** 2
        t = jnp.where(last, 0.0, dphi * (q - c.tau) ** 2)
        cc = 1.0 + psi - s / (p - c.tau) + phi - jnp.where(last, 0.0, t / (q - c.tau))
        # cc x^2 - a x + b = 0
        a = cc * (p + q) + s + t
        b = cc * p * q + s * q + t * p
        disc = jnp.sqrt(jnp.maximum(a * a - 4 * cc * b, 0.0))
        qq = 0.5 * (a + jnp.where(a >= 0, disc, -disc))
        safe_qq = jnp.where(qq != 0, qq, 1.0)
        x1 = jnp.where(cc != 0, qq / jnp.where(cc != 0, cc, 1.0), jnp.inf)
        x2 = jnp.where(qq != 0, b / safe_qq, jnp.inf)
        in1 = jnp.isfinite(x1) & (x1 > lo) & (x1 < hi)
        in2 = jnp.isfinite(x2) & (x2 > lo) & (x2 < hi)
        x = jnp.where(in2, x2, jnp.where(in1, x1, 0.5 * (lo + hi)))
        done = c.done | small
        return Carry(
            tau=jnp.where(done, c.tau, x),
            lo=jnp.where(c.done, c.lo, lo),
            hi=jnp.where(c.done, c.hi, hi),
            done=done,
            step=c.step + 1,
        )

    def cond(c: Carry):
        return jnp.any(~c.done) & (c.step < MAX_STEPS)

    init = Carry(0.5 * (lo + hi), lo, hi, ~active, jnp.zeros((), jnp.int32))
    out = lax.while_loop(cond, body, init)
    return origin, out.tau, jnp.all(out.done)


def _rank_one_sorted(ds: jax.Array, y: jax.Array):
    """Eigen-decomposition of ``diag(ds) + y y^T`` with ``ds`` ascending.

    Returns ``(lam, E, converged)``: eigenvalues (not sorted), eigenvectors (columns) and the
    convergence flag."""
    n = ds.shape[0]
    dtype = ds.dtype
    eps = jnp.finfo(dtype).eps
    ynorm2 = jnp.sum(y * y)
    scale = jnp.maximum(jnp.max(jnp.abs(ds)), ynorm2)
    tol = 8 * eps * scale
    y, apply_h = _householder_groups(ds, y, tol)
    active = jnp.sqrt(ynorm2) * jnp.abs(y) > tol
    y = jnp.where(active, y, 0.0)
    w = y * y
    origin, tau, converged = _secular_roots(ds, w, active)
    lam = jnp.where(active, origin + tau, ds)
    # den[i, j] = ds_j - lam_i, accurate through the nearer pole.
    den = (ds[None, :] - origin[:, None]) - tau[:, None]
    both = active[:, None] & active[None, :]
    # Gu-Eisenstat: z_hat_j^2 = (lam_j - ds_j) prod_{i != j} (lam_i - ds_j) / (ds_i - ds_j) over
    # active i, j (every factor is positive by interlacing); summed as logs, which cannot
    # overflow.
    eye = jnp.eye(n, dtype=bool)
    dd = ds[None, :] - ds[:, None]  # ds_j - ds_i
    ratio = jnp.where(eye, -den, den / jnp.where(both & ~eye, dd, 1.0))
    tiny = jnp.finfo(dtype).tiny
    log_z2 = jnp.sum(jnp.where(both, jnp.log(jnp.maximum(jnp.abs(ratio), tiny)), 0.0), axis=0)
    z_hat = jnp.where(active, jnp.where(y < 0, -1.0, 1.0) * jnp.exp(0.5 * log_z2), 0.0)
    safe = jnp.where(both, den, 1.0)
    Wt = jnp.where(both, z_hat[None, :] / safe, 0.0)  # row i: eigenvector of root i
    Wt = Wt / jnp.where(active, jnp.linalg.norm(Wt, axis=1), 1.0)[:, None]
    Wt = jnp.where(active[:, None], Wt, jnp.eye(n, dtype=dtype))
    return lam, apply_h(Wt.T, active), converged


def eigh_diag_plus_rank_one(d: jax.Array, z: jax.Array) -> SecularEigh:
    """Eigendecomposition of ``diag(d) + z z^T`` (any order of ``d``); see the module docstring."""
    perm = jnp.argsort(d)
    lam, E, ok = _rank_one_sorted(d[perm], z[perm])
    inv = jnp.zeros_like(perm).at[perm].set(jnp.arange(d.shape[0], dtype=perm.dtype))
    E = E[inv]  # rows back to the input order (a gather, not an n x n scatter)
    order = jnp.argsort(lam)
    return SecularEigh(lam[order], E[:, order], ok)


def eigh_diag_plus_lowrank(d: jax.Array, A: jax.Array, M: jax.Array) -> SecularEigh:
    """Eigendecomposition of ``diag(d) + A M A^T`` for M symmetric PSD (K x K), K small.

    A drop-in for ``jnp.linalg.eigh(jnp.diag(d) + A @ M @ A.T)`` (eigenvalues ascending,
    eigenvectors in columns) that vectorises under ``vmap``: K rank-one secular updates, no
    LAPACK call. In ``linalg.sketch.truncate`` the core is ``d = [mu, 0] + sentinel mask``,
    ``A = ext.coords``.

    Args:
      d: (n,) diagonal. A: (n, K). M: (K, K) symmetric positive semi-definite.

    Returns:
      :class:`SecularEigh` ``(evals, evecs, converged)``. Non-finite inputs raise
      ``ValueError`` when called eagerly; under ``jit`` they give ``converged = False``.
    """
    if d.ndim != 1 or A.ndim != 2 or A.shape[0] != d.shape[0]:
        raise ValueError(f"A: expected shape ({d.shape[0]}, K) for d of shape (n,), got {A.shape}")
    K = A.shape[1]
    if M.shape != (K, K):
        raise ValueError(f"M: expected shape ({K}, {K}), got {M.shape}")
    for name, x in (("d", d), ("A", A), ("M", M)):
        if is_concrete(x) and not np.all(np.isfinite(np.asarray(x))):
            raise ValueError(f"{name}: expected finite values, got NaN or inf")
    Z = A @ psd_factor(M)
    res = eigh_diag_plus_rank_one(d, Z[:, 0])
    lam, Q, ok = res
    for k in range(1, K):
        r = eigh_diag_plus_rank_one(lam, Q.T @ Z[:, k])
        lam, Q, ok = r.evals, Q @ r.evecs, ok & r.converged
    finite = jnp.all(jnp.isfinite(d)) & jnp.all(jnp.isfinite(Z))
    return SecularEigh(lam, Q, ok & finite)
