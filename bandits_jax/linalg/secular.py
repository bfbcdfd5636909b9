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
   "middle way" of Li 1993, LAPACK Working Note 89, as in ``dlaed4``) with bisection as a
   safeguard, in one bounded ``lax.while_loop``;
5. the eigenvectors use Gu & Eisenstat's (1994, SIAM J. Matrix Anal. Appl. 15) recomputed
   ``z_hat`` (a Loewner-type product formula from the computed roots), which makes them
   numerically orthogonal however close the roots are.

Nothing needs the diagonal sorted: next poles, tie groups and the final order come from pairwise
comparisons (n x n masks and reductions), the order is applied as a one-hot permutation, and the
n x n sums of a root step are one variadic reduction, padded to a multiple of ``LANES``. So there
is no sort, gather or scatter (which XLA's CPU backend runs elementwise) and no LAPACK call; the
K updates chain without re-sorting. Cost per update: O(n^2) per root step for all roots (1 +
``UNROLLED`` steps as a rule), an n x n product for the tie reflection (skipped when no group is
reflected) and, for K > 1, one for ``Q``. ``docs/eofd.md`` compares it with LAPACK ``eigh``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bandits_jax.checks import is_concrete
from bandits_jax.status import CONVERGED, MAX_STEPS, NONFINITE

__all__ = [
    "SecularEigh",
    "eigh_diag_plus_lowrank",
    "eigh_diag_plus_rank_one",
    "lowrank_eigh",
    "psd_factor",
]

UNROLLED = 3  # root steps always taken after the midpoint step (as a rule all that is needed)
LANES = 8  # width of the vectorised partial reductions of _row_sums
MAX_EXTRA_STEPS = 64  # further root steps, only while some root is short of its tolerance


class SecularEigh(NamedTuple):
    """Result of :func:`eigh_diag_plus_lowrank`.

    Attributes:
      evals: (n,) eigenvalues, ascending (as ``jnp.linalg.eigh``).
      evecs: (n, n) orthonormal eigenvectors, one per column.
      converged: bool, the inputs were finite and every secular root met its tolerance within
        the step cap, ``1 + UNROLLED + MAX_EXTRA_STEPS`` steps (roots that did not still lie in
        their bracket, so the result stays usable); :attr:`status` as a status code.
    """

    evals: jax.Array
    evecs: jax.Array
    converged: jax.Array

    @property
    def status(self) -> jax.Array:
        """``NONFINITE`` if a result is not finite, else ``MAX_STEPS`` if the solve did not
        converge (a root short of its tolerance at the step cap), else ``CONVERGED`` (int32)."""
        finite = jnp.all(jnp.isfinite(self.evals)) & jnp.all(jnp.isfinite(self.evecs))
        code = jnp.where(self.converged, CONVERGED, MAX_STEPS)
        return jnp.where(finite, code, NONFINITE).astype(jnp.int32)


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


def _row_sums(*xs: jax.Array, prod: bool = False) -> tuple[jax.Array, ...]:
    """Row sums (or products) of several (n, n) arrays in one variadic ``lax.reduce``: one
    fused loop instead of one per array.

    The rows are cut into ``LANES``-wide chunks and reduced first across the chunks, then across
    the lanes: a reduction over a major axis is a sequence of elementwise vector operations,
    which XLA's CPU backend vectorises under IEEE semantics, whereas a reduction over the minor
    axis stays a scalar loop (reassociating it needs fast math). The width must be a multiple of
    ``LANES`` (:func:`_rank_one` pads the problem: padding the n x n terms here instead is not
    fused and loses the gain)."""
    n = xs[0].shape[-1]
    if n % LANES:
        raise ValueError(f"xs: expected a width that is a multiple of {LANES}, got {n}")
    one = 1.0 if prod else 0.0
    xs = tuple(x.reshape(x.shape[0], n // LANES, LANES) for x in xs)
    init = tuple(jnp.asarray(one, x.dtype) for x in xs)

    def op(a, b):
        return tuple(u * v if prod else u + v for u, v in zip(a, b, strict=True))

    return lax.reduce(lax.reduce(xs, init, op, (1,)), init, op, (1,))


def _tie_reflection(d: jax.Array, y: jax.Array, tol: jax.Array):
    """Deflation of tied diagonal entries, in any order of ``d`` (no sort, no scatter).

    Entries within ``tol`` of a common entry form a group (``g_i = min{j : |d_i - d_j| <= tol}``,
    equal ``g`` = same group, so members lie within ``2 tol``); the block Householder reflection
    ``H = H^T = H^{-1}`` moves each group's part of ``y`` onto its first member (Dongarra &
    Sorensen 1987). Every step is an elementwise n x n expression or a reduction over it, which
    vectorises under ``vmap``.

    Returns ``(y_new, H, reflects)`` with ``y_new = H y``, ``H`` dense (n, n) and ``reflects``
    False when ``H = I`` (no group of two or more with a non-zero part of ``y``)."""
    n = d.shape[0]
    idx = jnp.arange(n)
    tie = jnp.abs(d[:, None] - d[None, :]) <= tol
    g = jnp.min(jnp.where(tie, idx[None, :], n), axis=1)
    same = g[:, None] == g[None, :]
    rep = jnp.min(jnp.where(same, idx[None, :], n), axis=1)
    leader = rep == idx
    size, norm2, y_rep = _row_sums(
        same.astype(d.dtype),
        jnp.where(same, (y * y)[None, :], 0.0),
        jnp.where(same & leader[None, :], y[None, :], 0.0),
    )
    norm = jnp.sqrt(norm2)
    s = jnp.where(y_rep < 0, -1.0, 1.0).astype(d.dtype)
    use = (size > 1) & (norm > 0)
    u = jnp.where(use, jnp.where(leader, y + s * norm, y), 0.0)
    (uu,) = _row_sums(jnp.where(same, (u * u)[None, :], 0.0))
    coef = jnp.where(uu > 0, 2.0 / jnp.where(uu > 0, uu, 1.0), 0.0)
    y_new = jnp.where(use, jnp.where(leader, -s * norm, 0.0), y)
    H = jnp.eye(n, dtype=d.dtype) - jnp.where(same, (coef * u)[:, None] * u[None, :], 0.0)
    return y_new, H, jnp.any(use)


def _secular_roots(d: jax.Array, w: jax.Array, active: jax.Array):
    """Roots of ``1 + sum_j w_j / (d_j - lam)`` (``w >= 0``, zero where not active; active
    entries of ``d`` distinct, any order), one per active pole: root i lies in
    ``(d_i, d_next)`` with ``d_next`` the next larger active pole (``d_i + sum w`` for the
    largest). Returns ``(origin, tau, converged)`` with ``lam_i = origin_i + tau_i`` and
    ``origin_i`` the nearer pole.

    One ``lax.while_loop`` whose body is compiled once: the first step evaluates the secular
    function at each interval's midpoint, which decides the nearer pole (the origin) and gives
    the first two-pole step; ``UNROLLED`` more steps run whatever the tolerance says (a trip
    count known in advance, as a rule all that is needed), then only while some root is short
    of its tolerance, at most ``MAX_EXTRA_STEPS`` more."""
    n = d.shape[0]
    dtype = d.dtype
    eps = jnp.finfo(dtype).eps
    above = active[None, :] & (d[None, :] > d[:, None])  # [i, j]: active pole j right of d_i
    below = active[None, :] & (d[None, :] < d[:, None])  # [i, j]: active pole j left of d_i
    # The next pole on each side and whether there is one: one variadic reduction (min, max and
    # or are exact, so the order of the terms does not matter).
    nxt, any_above, prev, any_below = lax.reduce(
        (
            jnp.where(above, d[None, :], jnp.inf),
            above,
            jnp.where(below, d[None, :], -jnp.inf),
            below,
        ),
        (jnp.asarray(jnp.inf, dtype), False, jnp.asarray(-jnp.inf, dtype), False),
        lambda a, b: (jnp.minimum(a[0], b[0]), a[1] | b[1], jnp.maximum(a[2], b[2]), a[3] | b[3]),
        (1,),
    )
    last = ~any_above
    total = jnp.sum(w)
    gap = jnp.where(last, total, jnp.where(last, 0.0, nxt) - d)
    gap = jnp.where(active & (gap > 0), gap, 1.0)  # inactive rows: any harmless value
    d_right = jnp.where(last, d + gap, nxt)
    # The two poles of each root's model (relative to its origin, which starts at its left pole):
    # the left pole (its share of the sum in psi) and the right one (phi). The largest root has
    # no pole on its right; as in LAPACK dlaed4 (i = n) its own pole's term, exact, is phi and
    # the poles left of it, psi, are modelled at the next one (with one model pole for all of
    # them it was the slowest root and set the loop's trip count).
    p0 = jnp.where(last, jnp.where(any_below, prev - d, -1.0), 0.0)
    q0 = jnp.where(last, 0.0, gap)
    # [i, j]: pole j's term in psi (else phi).
    left_mask = jnp.where(last[:, None], below, d[None, :] <= d[:, None])
    wpos = w > 0

    def sums(origin, tau):
        # Everything from 1-D inputs into one variadic reduction, so that XLA computes the
        # n x n terms once, in one loop, with no n x n temporaries (faster under vmap than
        # four separate sums).
        den = (d[None, :] - origin[:, None]) - tau[:, None]  # d_j - lam_i
        r = jnp.where(wpos[None, :], 1.0 / jnp.where(wpos[None, :], den, 1.0), 0.0)
        terms = w[None, :] * r
        dterms = terms * r
        return _row_sums(
            jnp.where(left_mask, terms, 0.0),
            jnp.where(left_mask, 0.0, terms),
            jnp.where(left_mask, dterms, 0.0),
            jnp.where(left_mask, 0.0, dterms),
        )

    # The loop's six float vectors travel as one stacked (6, n) array: XLA writes each separate
    # loop output with its own kernel, which costs compile time.
    def body(c):
        v, done, k = c
        origin, p, q, tau, lo, hi = v
        psi, phi, dpsi, dphi = sums(origin, tau)
        f = 1.0 + psi + phi
        # First step (at the midpoint, relative to the left pole): f < 0 means the root is
        # nearer the right pole, which becomes the origin (exact shifts: half = gap / 2).
        shift = jnp.where((k == 0) & (~last) & (f < 0), gap, 0.0)
        origin = jnp.where(shift > 0, d_right, origin)
        p, q, tau, lo, hi = p - shift, q - shift, tau - shift, lo - shift, hi - shift
        err = 1.0 + jnp.abs(phi) - psi  # the sum of |terms| (psi <= 0)
        lo_new = jnp.where(f < 0, tau, lo)
        hi_new = jnp.where(f > 0, tau, hi)
        small = (jnp.abs(f) <= 4 * n * eps * err) | (
            hi_new - lo_new <= 4 * eps * jnp.maximum(jnp.abs(lo_new), jnp.abs(hi_new))
        )
        # Two-pole model: psi ~ a1 + s/(p - x), phi ~ a2 + t/(q - x), matched at tau.
        s = dpsi * (p - tau) ** 2
        t = dphi * (q - tau) ** 2
        cc = 1.0 + psi - s / (p - tau) + phi - t / (q - tau)
        a = cc * (p + q) + s + t  # cc x^2 - a x + b = 0
        b = cc * p * q + s * q + t * p
        disc = jnp.sqrt(jnp.maximum(a * a - 4 * cc * b, 0.0))
        qq = 0.5 * (a + jnp.where(a >= 0, disc, -disc))
        x1 = jnp.where(cc != 0, qq / jnp.where(cc != 0, cc, 1.0), jnp.inf)
        x2 = jnp.where(qq != 0, b / jnp.where(qq != 0, qq, 1.0), jnp.inf)
        in1 = jnp.isfinite(x1) & (x1 > lo_new) & (x1 < hi_new)
        in2 = jnp.isfinite(x2) & (x2 > lo_new) & (x2 < hi_new)
        x = jnp.where(in2, x2, jnp.where(in1, x1, 0.5 * (lo_new + hi_new)))
        new_done = done | small
        tau = jnp.where(new_done, tau, x)
        lo, hi = jnp.where(done, lo, lo_new), jnp.where(done, hi, hi_new)
        return jnp.stack([origin, p, q, tau, lo, hi]), new_done, k + 1

    def cond(c):
        _, done, k = c
        return (k <= UNROLLED) | (jnp.any(~done) & (k <= UNROLLED + MAX_EXTRA_STEPS))

    # Start at each interval's midpoint, relative to the left pole (origin d).
    zero = jnp.zeros_like(d)
    init = (jnp.stack([d, p0, q0, 0.5 * gap, zero, gap]), ~active, jnp.zeros((), jnp.int32))
    v, done, _ = lax.while_loop(cond, body, init)
    return v[0], v[3], jnp.all(done)


def _rank_one(d: jax.Array, y: jax.Array):
    """Eigen-decomposition of ``diag(d) + y y^T`` (any order of ``d``), eigenvalues ascending.

    Returns ``(lam, E, converged)``. The ascending order comes from pairwise comparisons and a
    one-hot permutation applied to the (n,)-vectors that define the eigenvectors, so no sort,
    gather or scatter is needed.

    The problem is padded to a multiple of ``LANES`` with inert entries (``y = 0``, a diagonal
    above every eigenvalue, so they are deflated and sort last) so that every n x n reduction
    of :func:`_row_sums` vectorises; the padding is sliced off the result."""
    n = d.shape[0]
    dtype = d.dtype
    eps = jnp.finfo(dtype).eps
    ynorm2 = jnp.sum(y * y)
    scale = jnp.maximum(jnp.max(jnp.abs(d)), ynorm2)
    tol = 8 * eps * scale
    width = -(-n // LANES) * LANES
    if width > n:
        # Above every eigenvalue (<= max d + ||y||^2) and more than tol from every d.
        top = jnp.max(d) + 2.0 * ynorm2 + jnp.max(jnp.abs(d)) + 1.0
        d = jnp.concatenate([d, jnp.full((width - n,), top, dtype)])
        y = jnp.concatenate([y, jnp.zeros((width - n,), dtype)])
    lam, E, converged = _rank_one_padded(d, y, tol, ynorm2)
    return lam[:n], E[:n, :n], converged


def _rank_one_padded(d: jax.Array, y: jax.Array, tol: jax.Array, ynorm2: jax.Array):
    """:func:`_rank_one` on a problem whose size is a multiple of ``LANES``."""
    n = d.shape[0]
    dtype = d.dtype
    y, H, reflects = _tie_reflection(d, y, tol)
    active = jnp.sqrt(ynorm2) * jnp.abs(y) > tol
    y = jnp.where(active, y, 0.0)
    origin, tau, converged = _secular_roots(d, y * y, active)
    lam = jnp.where(active, origin + tau, d)
    tau = jnp.where(active, tau, 0.0)
    origin = jnp.where(active, origin, d)

    # Gu-Eisenstat: z_hat_j^2 = (lam_j - d_j) prod_{i != j} (lam_i - d_j) / (d_i - d_j) over
    # active i, j. Every factor is positive by interlacing; those with d_i < d_j are <= 1 and
    # the others >= 1 and telescoping, so the two partial products neither overflow nor
    # underflow before z_hat itself would.
    both = active[:, None] & active[None, :]  # symmetric
    eye = jnp.eye(n, dtype=bool)
    den = (d[:, None] - origin[None, :]) - tau[None, :]  # [j, i] = d_j - lam_i
    dd = d[None, :] - d[:, None]  # [j, i] = d_i - d_j
    off = both & ~eye
    ratio = jnp.where(off, -den / jnp.where(off, dd, 1.0), 1.0)
    small, large = _row_sums(
        jnp.where(dd < 0, ratio, 1.0), jnp.where(dd < 0, 1.0, ratio), prod=True
    )
    own = jnp.maximum((origin - d) + tau, 0.0)  # lam_j - d_j, accurate through the nearer pole
    z_hat = jnp.where(active, jnp.where(y < 0, -1.0, 1.0) * jnp.sqrt(own * large * small), 0.0)

    # Ascending order: rank_i = #{lam_j < lam_i} + #{j < i: lam_j = lam_i}; P[r, i] = [rank_i = r].
    idx = jnp.arange(n)
    before = (lam[None, :] < lam[:, None]) | (
        (lam[None, :] == lam[:, None]) & (idx[None, :] < idx[:, None])
    )
    (rank,) = _row_sums(before.astype(dtype))
    P = (rank[None, :] == idx[:, None].astype(dtype)).astype(dtype)
    lam_s, origin_s, tau_s, act_s = (P @ jnp.stack([lam, origin, tau, active.astype(dtype)], 1)).T
    active_s = act_s > 0.5
    # Column r: the eigenvector of the r-th smallest root, z_hat_j / (d_j - lam); a deflated
    # root's is e_j of its pole (row r of P).
    both = active_s[None, :] & active[:, None]  # [j, r]
    den = (d[:, None] - origin_s[None, :]) - tau_s[None, :]
    W = jnp.where(both, z_hat[:, None] / jnp.where(both, den, 1.0), 0.0)
    W = W / jnp.where(active_s, jnp.sqrt(jnp.sum(W * W, axis=0)), 1.0)[None, :]
    W = jnp.where(active_s[None, :], W, P.T)
    # The n^3 product only when some tie group was reflected (as a rule, only in the first
    # rounds of a sketch, whose zero weights tie).
    E = lax.cond(reflects, lambda W: H @ W, lambda W: W, W)
    return lam_s, E, converged


def eigh_diag_plus_rank_one(d: jax.Array, z: jax.Array) -> SecularEigh:
    """Eigendecomposition of ``diag(d) + z z^T`` (any order of ``d``); see the module docstring."""
    return SecularEigh(*_rank_one(d, z))


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
    return lowrank_eigh(d, A, M)


def lowrank_eigh(d: jax.Array, A: jax.Array, M: jax.Array) -> SecularEigh:
    """:func:`eigh_diag_plus_lowrank` without the eager checks (for callers inside a jitted
    update, whose non-finite inputs are flagged by ``converged`` and rejected there)."""
    Z = A @ psd_factor(M)
    K = A.shape[1]
    res = eigh_diag_plus_rank_one(d, Z[:, 0])
    lam, Q, ok = res
    for k in range(1, K):
        r = eigh_diag_plus_rank_one(lam, Q.T @ Z[:, k])
        lam, Q, ok = r.evals, Q @ r.evecs, ok & r.converged
    finite = jnp.all(jnp.isfinite(d)) & jnp.all(jnp.isfinite(Z))
    return SecularEigh(lam, Q, ok & finite)
