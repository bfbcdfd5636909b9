"""Eigendecomposition of ``diag(d) + A M A^T`` (K small) by rank-one secular-equation updates.

The Frequent-Directions core (EOFD-MLogB, Algorithm 1, eq. 14-15) in plain ``jnp``, which
vectorises under ``vmap`` (a LAPACK ``eigh`` there is a loop of small calls on CPU):
``M = L L^T`` (LDL^T dropping zero pivots), then K rank-one updates ``diag(lam) + z z^T``
(Bunch, Nielsen & Sorensen 1978) with deflation of ties (one block Householder reflection) and
of zero components of ``z`` (Dongarra & Sorensen 1987), all secular roots at once by the
two-pole rational interpolation of LAPACK's ``dlaed4`` (Li 1993) with bisection in one bounded
``lax.while_loop``, and eigenvectors from Gu & Eisenstat's (1994) recomputed ``z_hat``.

No sort, gather or scatter (which XLA's CPU backend runs elementwise): poles, tie groups and the
order come from n x n comparisons and reductions padded to a multiple of ``LANES``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bandits_jax.checks import is_concrete
from bandits_jax.status import CONVERGED, MAX_STEPS, NONFINITE

UNROLLED = 3  # root steps always taken after the midpoint step (as a rule all that is needed)
LANES = 8  # width of the vectorised partial reductions of _row_sums
MAX_EXTRA_STEPS = 64  # further root steps, only while some root is short of its tolerance


class SecularEigh(NamedTuple):
    """Ascending ``evals`` and column ``evecs`` (as ``jnp.linalg.eigh``) and ``converged``:
    finite inputs and every root within tolerance by the step cap (a root that is not still lies
    in its bracket)."""

    evals: jax.Array
    evecs: jax.Array
    converged: jax.Array

    @property
    def status(self) -> jax.Array:
        """``NONFINITE``, else ``MAX_STEPS`` if not converged, else ``CONVERGED`` (int32)."""
        finite = jnp.all(jnp.isfinite(self.evals)) & jnp.all(jnp.isfinite(self.evecs))
        code = jnp.where(self.converged, CONVERGED, MAX_STEPS)
        return jnp.where(finite, code, NONFINITE).astype(jnp.int32)


def psd_factor(M: jax.Array) -> jax.Array:
    """``L`` (K, K) with ``L L^T = M`` for symmetric PSD ``M`` by an unrolled, unpivoted LDL^T;
    pivots at or below ``K eps max|M|`` drop their column, so singular ``M`` is fine."""
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
    """Row sums (or products) of (n, n) arrays in one variadic ``lax.reduce``: across
    ``LANES``-wide chunks first (a major axis, which XLA's CPU backend vectorises), then across
    lanes; n must be a multiple of ``LANES``."""
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
    """Deflation of tied diagonal entries, in any order of ``d``.

    Group of ``i``: ``g_i = min{j : |d_i - d_j| <= tol}``; the block Householder reflection
    ``H = H^T = H^{-1}`` moves each group's part of ``y`` onto its first member. Returns
    ``(H y, H, reflects)``, ``reflects`` False when ``H = I``."""
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
    ``d`` distinct, any order), root i in ``(d_i, next active pole)`` (``d_i + sum w`` for the
    largest). Returns ``(origin, tau, converged)``, ``lam_i = origin_i + tau_i`` with
    ``origin_i`` the nearer pole.

    The first step, at each interval's midpoint, picks the nearer pole; ``UNROLLED`` more steps
    always run, then at most ``MAX_EXTRA_STEPS`` while some root is short of its tolerance."""
    n = d.shape[0]
    dtype = d.dtype
    eps = jnp.finfo(dtype).eps
    above = active[None, :] & (d[None, :] > d[:, None])  # [i, j]: active pole j right of d_i
    below = active[None, :] & (d[None, :] < d[:, None])  # [i, j]: active pole j left of d_i
    # The next pole on each side and whether there is one (exact reductions, in any order).
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
    # The two poles of each root's model, relative to its origin (first its left pole): the left
    # (psi) and the right (phi). For the largest root, as in dlaed4 (i = n), its own pole's term
    # is phi and the poles left of it (psi) are modelled at the next one.
    p0 = jnp.where(last, jnp.where(any_below, prev - d, -1.0), 0.0)
    q0 = jnp.where(last, 0.0, gap)
    # [i, j]: pole j's term in psi (else phi).
    left_mask = jnp.where(last[:, None], below, d[None, :] <= d[:, None])
    wpos = w > 0

    def sums(origin, tau):
        # One variadic reduction from 1-D inputs: the n x n terms in one loop, no temporaries.
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

    # The loop's six float vectors travel as one stacked (6, n) array (fewer loop outputs).
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
    """``(lam, E, converged)`` of ``diag(d) + y y^T`` (any order of ``d``), ``lam`` ascending.

    Padded to a multiple of ``LANES`` with inert entries (``y = 0``, a diagonal above every
    eigenvalue: deflated and sorted last), sliced off the result."""
    n0, dtype = d.shape[0], d.dtype
    ynorm2 = jnp.sum(y * y)
    tol = 8 * jnp.finfo(dtype).eps * jnp.maximum(jnp.max(jnp.abs(d)), ynorm2)
    n = -(-n0 // LANES) * LANES
    if n > n0:
        # Above every eigenvalue (<= max d + ||y||^2) and more than tol from every d.
        top = jnp.max(d) + 2.0 * ynorm2 + jnp.max(jnp.abs(d)) + 1.0
        d = jnp.concatenate([d, jnp.full((n - n0,), top, dtype)])
        y = jnp.concatenate([y, jnp.zeros((n - n0,), dtype)])
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
    # The n^3 product only when some tie group was reflected.
    E = lax.cond(reflects, lambda W: H @ W, lambda W: W, W)
    return lam_s[:n0], E[:n0, :n0], converged


def eigh_diag_plus_lowrank(d: jax.Array, A: jax.Array, M: jax.Array) -> SecularEigh:
    """``jnp.linalg.eigh(jnp.diag(d) + A @ M @ A.T)`` for ``M`` (K, K) symmetric PSD, K small.

    Non-finite inputs raise ``ValueError`` eagerly; under ``jit`` they give ``converged = False``.
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
    """:func:`eigh_diag_plus_lowrank` without the eager checks."""
    Z = A @ psd_factor(M)
    K = A.shape[1]
    lam, Q, ok = _rank_one(d, Z[:, 0])
    for k in range(1, K):
        lam, E, converged = _rank_one(lam, Q.T @ Z[:, k])
        Q, ok = Q @ E, ok & converged
    finite = jnp.all(jnp.isfinite(d)) & jnp.all(jnp.isfinite(Z))
    return SecularEigh(lam, Q, ok & finite)
