"""Block Frequent Directions on the spectral state ``(V, mu, rho)``.

EOFD-MLogB (He et al.), Algorithm 1, eq. (12)-(15), Lemmas 3-4 (Appendix A). The sketch keeps
``V diag(mu) V^T`` (V: D x m orthonormal, mu >= 0) approximating ``M_t = sum_s B_s B_s^T`` with
``V diag(mu) V^T <= M_t <= V diag(mu) V^T + rho I``.

The SVD of ``[V mu^{1/2}, B]^T`` (eq. 14), exactly and without the paper's full SVD:

1. projecting the new block's column space ``X`` (``B = X G``) on ``V``: ``C = V^T X``;
2. orthonormalising the residual ``R = X - V C`` through its k x k Gram matrix (near
   ``span V``: one re-orthogonalisation pass and a thin SVD): ``Q`` (D x k, kept implicit as
   ``(X - V C) T_pinv``) with ``[V, Q]`` orthonormal and ``X = V C + Q T``;
3. an eigendecomposition of the small (m+k) x (m+k) core
   ``S = diag(mu, 0) + [C; T] G G^T [C; T]^T``, whose eigenvalues are the squared singular values
   of eq. (14) and whose eigenvectors, mapped by ``[V, Q]``, are its right singular vectors.

Steps 1-2 depend only on ``V`` and ``X``: EOFD-MLogB reuses one :class:`Extension` for both
low-rank terms of a round (both lie in the span of ``I_K kron x_t``) and never forms the
surrogate's eigenvectors as a D x (m+K) matrix.

Degenerate residual directions (``X`` already in ``span V``, always so when ``m >= D``) have
no orthonormal completion: they are flagged, their columns of ``Q`` and rows of ``T`` zeroed and
their core eigenvalue set to a negative sentinel, so they are always discarded. With ``m >= D``
(``m_eff = D``) nothing is truncated and ``rho`` stays 0 (errata 1).

Sketch rules (:class:`SketchRule`): EOFD-MLogB's round takes the sketch as data, a NamedTuple of
pure functions it calls in order (``extend`` after pass 1, ``absorb``, ``commit`` as pass 2).
Here: Algorithm 1 every round (:func:`per_round_rule`) and with a deferred basis rotation
(:func:`deferred_rule`: ``V = basis @ R``, formed once the spare columns run out);
:func:`bandits_jax.linalg.fast_fd.spectral_rule` gives Fast FD.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.linalg import lapack, secular


class FDState(NamedTuple):
    """Spectral sketch state.

    Attributes:
      V: (D, m) orthonormal columns (columns with ``mu = 0`` may be arbitrary unit vectors).
      mu: (m,) non-negative weights, descending.
      rho: accumulated discarded mass ``rho_{1:t}`` (scalar).
    """

    V: jax.Array
    mu: jax.Array
    rho: jax.Array


class Extension(NamedTuple):
    """Orthonormal extension ``X = V C + Q T`` of the sketch basis by a block's column space.

    ``Q`` is kept implicit, ``Q = (X - V C) T_pinv``, so that no D-sized residual is formed
    unless a second Gram-Schmidt pass is needed; :func:`residual_basis` materialises it.

    Attributes:
      X: (D, k) the block's column space.
      C: (m, k) coordinates of ``X`` in ``V``.
      T: (k, k) coordinates of ``X`` in ``Q`` (rows of invalid directions are zero).
      T_pinv: (k, k) with ``Q = (X - V C) T_pinv`` (columns of invalid directions are zero).
      valid: (k,) bool, False for degenerate residual directions (then ``Q``'s column is 0).
    """

    X: jax.Array
    C: jax.Array
    T: jax.Array
    T_pinv: jax.Array
    valid: jax.Array

    @property
    def coords(self) -> jax.Array:
        """(m + k, k) coordinates of ``X`` in the basis ``[V, Q]``."""
        return jnp.concatenate([self.C, self.T], axis=0)


def init(dim: int, sketch_size: int, dtype: jnp.dtype = jnp.float32) -> FDState:
    """Empty sketch: ``mu = 0``, ``rho = 0``, ``V`` the first ``m_eff = min(m, D)`` unit vectors.

    Algorithm 2 allows an arbitrary orthonormal ``V_1``; m > D is capped (errata 1).
    """
    m_eff = min(sketch_size, dim)
    return FDState(
        V=jnp.eye(dim, m_eff, dtype=dtype),
        mu=jnp.zeros((m_eff,), dtype),
        rho=jnp.zeros((), dtype),
    )


def extend(V: jax.Array, X: jax.Array, C: jax.Array | None = None) -> Extension:
    """Extends the basis ``V`` by the column space of ``X`` (D, k); see the module docstring.

    The residual ``R = X - V C`` is orthonormalised through its k x k Gram matrix
    ``X^T X - C^T C`` (no D-sized work) while that is accurate, i.e. while every residual keeps
    at least half of its column's norm. Otherwise (``X`` close to ``span V``) ``R`` is formed
    and re-orthogonalised once ("twice is enough", Kahan-Parlett), then a thin SVD is used.
    The test is a ``lax.cond`` per call, so unbatched runs skip the passes over V when they are
    not needed; under ``vmap`` both branches run and the result is the same.

    Args:
      V: (D, m) basis. X: (D, k) block.
      C: ``V^T X`` if the caller already has it (e.g. fused with another product).
    """
    dtype = V.dtype
    k = X.shape[1]
    if C is None:
        C = V.T @ X
    xx = X.T @ X
    x_sq = jnp.diag(xx)
    G = xx - C.T @ C
    if k == 1:
        g_min = G[0, 0]
    else:
        ev, Ve = lapack.eigh(0.5 * (G + G.T))
        g_min = ev[0]
    need = (g_min < 0.25 * jnp.min(x_sq)) | jnp.any(jnp.diag(G) < 0.25 * x_sq)

    def explicit(C):
        R = X - V @ C
        C2 = V.T @ R
        R = R - V @ C2
        if k == 1:
            s = jnp.sqrt(jnp.sum(R * R))[None]
            Vh = jnp.ones((1, 1), dtype)
        else:
            _, s, Vh = lapack.svd(R)
        return C + C2, s, Vh

    def implicit(C):
        if k == 1:
            return C, jnp.sqrt(jnp.maximum(G[0], 0.0)), jnp.ones((1, 1), dtype)
        return C, jnp.sqrt(jnp.maximum(ev, 0.0)), Ve.T

    C, s, Vh = lax.cond(need, explicit, implicit, C)
    tol = jnp.sqrt(jnp.finfo(dtype).eps) * (jnp.sqrt(jnp.sum(x_sq)) + jnp.finfo(dtype).tiny)
    valid = s > tol
    T = jnp.where(valid[:, None], s[:, None] * Vh, 0.0)
    T_pinv = jnp.where(valid[None, :], Vh.T / jnp.where(valid, s, 1.0)[None, :], 0.0)
    return Extension(X=X, C=C, T=T, T_pinv=T_pinv, valid=valid)


def residual_basis(V: jax.Array, ext: Extension) -> jax.Array:
    """Materialises ``Q = (X - V C) T_pinv`` (D, k) (tests and generic callers)."""
    return (ext.X - V @ ext.C) @ ext.T_pinv


def apply_basis(V: jax.Array, ext: Extension, coef: jax.Array) -> jax.Array:
    """Maps coordinates in ``[V, Q]`` (shape (m + k,) or (m + k, j)) to R^D in one pass over V:
    ``V c_V + Q c_Q = V (c_V - C T_pinv c_Q) + X (T_pinv c_Q)``."""
    m = V.shape[1]
    g = ext.T_pinv @ coef[m:]
    return V @ (coef[:m] - ext.C @ g) + ext.X @ g


def q_coords(ext: Extension, Xw: jax.Array, Vw: jax.Array) -> jax.Array:
    """``Q^T w`` from ``X^T w`` and ``V^T w`` (no D-sized work)."""
    return ext.T_pinv.T @ (Xw - ext.C.T @ Vw)


def basis_coords(V: jax.Array, ext: Extension, w: jax.Array) -> jax.Array:
    """Returns ``[V, Q]^T w`` for ``w`` of shape (D,)."""
    Vw = V.T @ w
    return jnp.concatenate([Vw, q_coords(ext, ext.X.T @ w, Vw)])


def core(mu: jax.Array, ext: Extension, M: jax.Array) -> jax.Array:
    """Core ``diag(mu, 0) + [C; T] M [C; T]^T`` of ``V diag(mu) V^T + X M X^T`` in ``[V, Q]``."""
    A = ext.coords
    k = ext.T.shape[0]
    base = jnp.concatenate([mu, jnp.zeros((k,), mu.dtype)])
    S = jnp.diag(base) + A @ M @ A.T
    return 0.5 * (S + S.T)


class Truncation(NamedTuple):
    """The small part of an FD update: the new ``V`` is ``[V, Q] U``.

    Attributes:
      U: (m + k, m) top eigenvectors of the core, descending.
      mu: (m,) shrunk weights ``sigma_i^2 - sigma_{m+1}^2`` (eq. 15).
      sigma2: the discarded mass ``sigma_bar_{m+1}^2`` (0 when it does not exist).
      status: the core eigensolve's status (:attr:`bandits_jax.linalg.secular.SecularEigh.status`:
        ``MAX_STEPS`` when a secular root hit the step cap; int32).
    """

    U: jax.Array
    mu: jax.Array
    sigma2: jax.Array
    status: jax.Array


def truncate(mu: jax.Array, ext: Extension, M: jax.Array) -> Truncation:
    """Eigendecomposition and truncation of the core (Algorithm 1 lines 3-6, eq. 14-15).

    Only (m + k)-sized work; :func:`absorb` then maps ``U`` through ``[V, Q]``.
    """
    k = ext.T.shape[0]
    eig = _core_eigh(mu, ext, M)
    sigma2 = jnp.maximum(eig.evals[k - 1], 0.0)
    mu_new = jnp.maximum(eig.evals[k:][::-1] - sigma2, 0.0)
    return Truncation(U=eig.evecs[:, k:][:, ::-1], mu=mu_new, sigma2=sigma2, status=eig.status)


# Largest K for which the FD core's eigendecomposition uses the secular solver (see
# :func:`_core_eigh`); a static choice, read at trace time.
SECULAR_MAX_K = 1


def _use_secular(n: int, k: int) -> bool:
    """Static choice of the core's eigensolver: K rank-one secular updates
    (:mod:`bandits_jax.linalg.secular`) for ``k <= SECULAR_MAX_K``, else
    :func:`~bandits_jax.linalg.lapack.eigh`."""
    return k <= SECULAR_MAX_K


def _core_eigh(mu: jax.Array, ext: Extension, M: jax.Array) -> secular.SecularEigh:
    """Ascending eigenpairs of the core ``diag(mu, 0) + A M A^T`` (``A = ext.coords``);
    degenerate directions get a sentinel below every genuine (>= 0) eigenvalue.

    The core is a diagonal plus a rank-k term, so for small k its eigenpairs come from k
    rank-one secular-equation updates (:func:`bandits_jax.linalg.secular.lowrank_eigh`: plain
    ``jnp``, exact to rounding, with deflation of the tied and zero weights of the first m
    rounds) that vectorise under ``vmap``, instead of a LAPACK ``eigh`` that becomes a loop of
    small calls there. A degenerate direction has a zero row in ``A``, so the secular solver
    deflates it and returns its sentinel and unit vector exactly. The choice is static
    (:func:`_use_secular`); LAPACK's ``eigh`` counts as converged."""
    m = mu.shape[0]
    k = ext.T.shape[0]
    A = ext.coords
    base = jnp.concatenate([mu, jnp.zeros((k,), mu.dtype)])
    invalid = jnp.concatenate([jnp.zeros((m,), bool), ~ext.valid])
    if _use_secular(m + k, k):
        M = 0.5 * (M + M.T)
        sentinel = -(1.0 + jnp.sum(base) + jnp.sum((A @ M) * A))
        return secular.lowrank_eigh(base + jnp.where(invalid, sentinel, 0.0), A, M)
    S = core(mu, ext, M)
    sentinel = -(1.0 + jnp.trace(S))
    S = S + jnp.diag(jnp.where(invalid, sentinel, 0.0))
    return secular.SecularEigh(*lapack.eigh(S), converged=jnp.asarray(True))


def truncate_adaptive(
    mu: jax.Array, ext: Extension, M: jax.Array, rank: jax.Array, budget: jax.Array
) -> tuple[Truncation, jax.Array]:
    """:func:`truncate` with an active rank ``r <= m`` that grows to keep the discarded mass small.

    The capacity ``m = mu.shape[0]`` is static; weights beyond the active rank are 0 (their
    columns of ``U`` stay orthonormal, zero-weight directions). The new rank is the smallest
    ``r'`` in ``[rank, m]`` whose discarded eigenvalue ``sigma_{r'+1}^2 <= budget`` (``r' = m``
    if none); then ``mu_i = sigma_i^2 - sigma_{r'+1}^2`` for ``i < r'`` (eq. 15 at rank r').

    Returns:
      ``(truncation, new_rank)`` (int32). With ``rank = m`` this is :func:`truncate`.
    """
    m = mu.shape[0]
    k = ext.T.shape[0]
    eig = _core_eigh(mu, ext, M)
    desc = jnp.maximum(eig.evals[::-1], 0.0)  # sigma_1^2 >= sigma_2^2 >= ... (m + k)
    # Discarding sigma_{j+1}^2 is within budget from some j on (desc is non-increasing).
    first = jnp.sum(desc[: m + 1] > budget).astype(jnp.int32)
    new_rank = jnp.clip(jnp.maximum(jnp.asarray(rank, jnp.int32), first), 0, m)
    sigma2 = desc[new_rank]
    mu_new = jnp.where(jnp.arange(m) < new_rank, jnp.maximum(desc[:m] - sigma2, 0.0), 0.0)
    U = eig.evecs[:, k:][:, ::-1]
    return Truncation(U=U, mu=mu_new, sigma2=sigma2, status=eig.status), new_rank


def absorb(
    state: FDState, ext: Extension, M: jax.Array, extra: jax.Array | None = None
) -> tuple[FDState, jax.Array, jax.Array | None, jax.Array]:
    """Block FD update absorbing ``X M X^T`` (M PSD, k x k), Algorithm 1.

    Args:
      state: the sketch ``(V_t, mu_t, rho_{1:t-1})``.
      ext: :func:`extend` of ``V_t`` by ``X``.
      M: (k, k) PSD middle factor (``grad sigma(W_{t+1} x_t)`` for EOFD-MLogB, eq. 12-13).
      extra: optional (m + k,) coordinates in ``[V, Q]`` to map to R^D in the same matrix
        product that forms the new ``V`` (at large D each pass over V costs as much as the
        arithmetic, so a caller's ``[V, Q] c`` rides along for free).

    Returns:
      ``(new_state, sigma2, mapped, status)`` with ``sigma2`` the discarded squared singular
      value ``sigma_bar_{m+1}^2``, ``mapped = [V, Q] extra`` (or None) and ``status`` the
      core eigensolve's (:class:`Truncation`).
    """
    tr = truncate(state.mu, ext, M)
    V_new, mapped = map_basis(state.V, ext, tr.U, extra)
    return FDState(V=V_new, mu=tr.mu, rho=state.rho + tr.sigma2), tr.sigma2, mapped, tr.status


def map_basis(
    V: jax.Array, ext: Extension, U: jax.Array, extra: jax.Array | None = None
) -> tuple[jax.Array, jax.Array | None]:
    """``([V, Q] U, [V, Q] extra)`` in one matrix product (one pass over V)."""
    if extra is None:
        return apply_basis(V, ext, U), None
    m = U.shape[1]
    out = apply_basis(V, ext, jnp.concatenate([U, extra[:, None]], axis=1))
    return out[:, :m], out[:, m]


def update(state: FDState, B: jax.Array) -> tuple[FDState, jax.Array, jax.Array]:
    """Absorbs ``B B^T`` for a generic D x k block ``B`` (Algorithm 1 with ``M = I``); returns
    ``(new_state, sigma2, status)`` as :func:`absorb`."""
    ext = extend(state.V, B)
    new, sigma2, _, status = absorb(state, ext, jnp.eye(B.shape[1], dtype=B.dtype))
    return new, sigma2, status


# --- Sketch rules: a round of EOFD-MLogB's sketch as data ---


class Sketch(NamedTuple):
    """A sketch ``V diag(mu) V^T`` with ``V = basis @ R`` (``R`` None: ``V`` is ``basis``).

    Attributes:
      basis: (D, n) columns ``0 .. used`` orthonormal (or zero), the rest zero.
      R: (n, r) rotation, or None.
      mu: (r,) weights.
      rank: int32, the active rank (adaptive size) or the number of directions (fast rule).
      used: int32, basis columns in use (where a round's new columns ``Q`` are written).
    """

    basis: jax.Array
    R: jax.Array | None
    mu: jax.Array
    rank: jax.Array
    used: jax.Array

    def v_coords(self, basis_coords: jax.Array) -> jax.Array:
        """``V^T w`` from ``basis^T w`` (no D-sized work)."""
        return basis_coords if self.R is None else self.R.T @ basis_coords


class Round(NamedTuple):
    """The small part of one round of a :class:`SketchRule` (no D-sized work).

    Attributes:
      R, mu, rank, used: the new sketch's (:class:`Sketch`).
      delta: the mass discarded (added to ``rho``; eq. 15's ``sigma_{m+1}^2``).
      status: the core eigensolve's status (int32).
      plan: what the rule's pass 2 needs (a pytree of the rule's own; finite-checked with the rest).
    """

    R: jax.Array | None
    mu: jax.Array
    rank: jax.Array
    used: jax.Array
    delta: jax.Array
    status: jax.Array
    plan: Any


class SketchRule(NamedTuple):
    """A sketch rule as data: the pure functions a round calls in order.

    Attributes:
      init: ``(D, dtype) -> Sketch``, the empty sketch.
      extend: ``(sketch, X, P) -> (ext_b, ext)`` with ``P = basis^T X`` from pass 1: the
        extension of the basis (``ext_b``, pass 2 maps through it) and of ``V``
        (``ext``: ``X = V C + Q T`` in V's coordinates, eq. 12-14; small work).
      absorb: ``(sketch, ext, M, coef, budget) -> Round``: absorbs ``X M X^T`` (eq. 12-15) in
        small work; ``coef`` are the round's step coordinates in ``[V, Q]``, ``budget`` the
        adaptive size's discard budget (None: fixed size).
      commit: ``(sketch, ext_b, round, coef, ok) -> (basis, step, round)``, pass 2: the new
        basis and ``[V, Q] coef`` in one product; where not ``ok`` (``coef`` and ``ext_b``
        then zeroed, :func:`mask_extension`) the basis is left as it was.
      radius_rank: ``sketch -> rank`` for the radius (Lemma 6; a static int for a fixed size).
    """

    init: Callable[[int, Any], Sketch]
    extend: Callable[[Sketch, jax.Array, jax.Array], tuple[Extension, Extension]]
    absorb: Callable[[Sketch, Extension, jax.Array, jax.Array, jax.Array | None], Round]
    commit: Callable[
        [Sketch, Extension, Round, jax.Array, jax.Array], tuple[jax.Array, jax.Array, Round]
    ]
    radius_rank: Callable[[Sketch], int | jax.Array]


def mask_extension(ext: Extension, ok: jax.Array) -> Extension:
    """``ext``, or where not ``ok`` one whose ``Q`` and ``X`` part are zero (``apply_basis``
    then maps coordinates through the basis alone): a rejected round's pass 2 writes zero
    columns where zero columns are, so the D-sized work is done once either way."""
    return ext._replace(
        X=jnp.where(ok, ext.X, 0.0),
        C=jnp.where(ok, ext.C, 0.0),
        T_pinv=jnp.where(ok, ext.T_pinv, 0.0),
    )


def _per_round_init(D: int, m: int, spare: int, rank: int | None, dtype) -> Sketch:
    """V the first m unit vectors (:func:`init`), ``spare`` zero columns; ``rank`` None: m."""
    fd = init(D, m, dtype)
    return Sketch(
        basis=jnp.concatenate([fd.V, jnp.zeros((D, spare), dtype)], axis=1),
        R=jnp.eye(m + spare, m, dtype=dtype) if spare else None,
        mu=fd.mu,
        rank=jnp.full((), m if rank is None else rank, jnp.int32),
        used=jnp.full((), m, jnp.int32),
    )


def _radius_rank(m: int, adaptive: bool) -> Callable[[Sketch], int | jax.Array]:
    return (lambda sk: sk.rank) if adaptive else (lambda sk: m)


def _truncation_round(sk: Sketch, ext: Extension, M: jax.Array, budget: jax.Array | None) -> Round:
    """Algorithm 1's truncation (eq. 14-15), adaptive when ``budget`` is given; ``plan = U``."""
    if budget is None:
        tr, rank = truncate(sk.mu, ext, M), sk.rank
    else:
        tr, rank = truncate_adaptive(sk.mu, ext, M, sk.rank, budget)
    return Round(sk.R, tr.mu, rank, sk.used, tr.sigma2, tr.status, plan=tr.U)


def per_round_rule(sketch_size: int, *, rank: int | None = None) -> SketchRule:
    """Algorithm 1 every round with V formed every round (``basis = V``, ``R`` None): pass 2 is
    one D x (m+k) x (m+1) product giving the new ``V = [V, Q] U`` and the step.

    Args:
      sketch_size: m (the capacity, ``<= D``).
      rank: the initial active rank of an adaptive size (None: fixed size m).
    """
    m = sketch_size

    def extend_(sk: Sketch, X: jax.Array, P: jax.Array) -> tuple[Extension, Extension]:
        ext = extend(sk.basis, X, P)
        return ext, ext

    def commit(sk: Sketch, ext_b: Extension, rnd: Round, coef: jax.Array, ok: jax.Array):
        # A rejected round maps [V, Q] [I; 0] = V (ext_b's X and C are zeroed).
        U = jnp.where(ok, rnd.plan, jnp.eye(*rnd.plan.shape, dtype=coef.dtype))
        basis, step = map_basis(sk.basis, ext_b, U, coef)
        return basis, step, rnd

    return SketchRule(
        init=lambda D, dtype: _per_round_init(D, m, 0, rank, dtype),
        extend=extend_,
        absorb=lambda sk, ext, M, coef, budget: _truncation_round(sk, ext, M, budget),
        commit=commit,
        radius_rank=_radius_rank(m, rank is not None),
    )


def deferred_rule(sketch_size: int, spare_columns: int, *, rank: int | None = None) -> SketchRule:
    """Algorithm 1 every round with a deferred basis rotation: ``V = basis @ R``, ``basis``
    (D x n, ``n = m + c``, ``c = spare_columns >= k``) orthonormal in its ``used`` columns, a
    round's new columns written into the spare ones (:func:`extend_deferred`) and
    ``V = basis @ R`` formed (then ``R = I``, ``used = m``) only when the next round's would
    not fit (:func:`rebase`). Arguments as :func:`per_round_rule`."""
    m, n = sketch_size, sketch_size + spare_columns

    def absorb(sk: Sketch, ext: Extension, M: jax.Array, coef: jax.Array, budget) -> Round:
        rnd = _truncation_round(sk, ext, M, budget)
        # The new V = [V, Q] U = basis' R_new and the step [V, Q] coef = basis' c_w in basis
        # coordinates (basis' = basis with Q written in): (n, m)-sized work.
        R_new, c_w = map_basis(sk.R, ext, rnd.plan, coef)
        return rnd._replace(R=R_new, plan=(rnd.plan, c_w))

    def commit(sk: Sketch, ext_b: Extension, rnd: Round, coef: jax.Array, ok: jax.Array):
        k = ext_b.X.shape[1]
        c_w = jnp.where(ok, rnd.plan[1], 0.0)  # rows used .. used + k: the step on Q
        grown = sk.used + jnp.where(jnp.any(ext_b.valid), k, 0).astype(jnp.int32)
        full = ok & (grown + k > n)  # the next round's Q would not fit
        on_q = lax.dynamic_slice(c_w, (sk.used,), (k,))
        basis, step = commit_deferred(sk.basis, ext_b, c_w, on_q, sk.used, rnd.R, full)
        R = jnp.where(full, jnp.eye(n, m, dtype=c_w.dtype), rnd.R)
        return basis, step, rnd._replace(R=R, used=jnp.where(full, m, grown).astype(jnp.int32))

    return SketchRule(
        init=lambda D, dtype: _per_round_init(D, m, spare_columns, rank, dtype),
        extend=lambda sk, X, P: extend_deferred(sk.basis, sk.R, sk.used, X, P),
        absorb=absorb,
        commit=commit,
        radius_rank=_radius_rank(m, rank is not None),
    )


def extend_deferred(
    basis: jax.Array, R: jax.Array, used: jax.Array, X: jax.Array, P: jax.Array
) -> tuple[Extension, Extension]:
    """The extension of Algorithm 1 (eq. 12-14) when ``V = basis @ R``: ``(ext_b, ext)``.

    ``ext_b`` extends the whole used basis by ``X`` (``X = basis P + Qb Tb``, ``P = basis^T X``
    given, ``Qb`` implicit, to be written into the spare columns ``used .. used + k``). After a
    truncation ``span V`` is a strict subspace of the used columns, so ``X``'s residual against
    ``V`` is not ``Qb Tb``: ``ext`` is the extension ``X = V C + Q T`` of :func:`extend` taken
    in basis coordinates, with ``R`` for ``V`` and ``X``'s coordinates ``[P; Tb]`` (``Tb`` at
    rows ``used .. used + k``) for ``X``: ``C = R^T P`` and ``Q`` has coordinates
    ``(P - R C) T^+`` on the old columns and ``Tb T^+`` on the new ones. Only (n, k)-sized work
    beyond ``ext_b``; the FD core ``diag(mu, 0) + [C; T] M [C; T]^T`` is the same matrix as
    with an explicit V."""
    n, k = R.shape[0], X.shape[1]
    ext_b = extend(basis, X, P)
    # ext_b.C is zero at rows >= used (zero columns), where Tb goes.
    place = lax.dynamic_update_slice(jnp.zeros((n, k), X.dtype), ext_b.T, (used, jnp.int32(0)))
    return ext_b, extend(R, ext_b.C + place)


def commit_deferred(
    basis: jax.Array,
    ext_b: Extension,
    on_basis: jax.Array,
    on_q: jax.Array,
    used: jax.Array,
    coeffs: jax.Array,
    flag: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Pass 2 of a deferred rotation: one product over ``[basis, Q]`` (``Q``: ``ext_b``'s k
    new columns) gives ``Q`` and the step ``basis on_basis + Q on_q``; ``Q`` is written into
    columns ``used .. used + k`` and, when ``flag``, the basis becomes ``[basis' coeffs, 0]``
    (:func:`rebase`). Returns ``(basis', step)``."""
    n, k = on_basis.shape[0], on_q.shape[0]
    dtype = on_basis.dtype
    # Coordinates of [Q, step] in [basis, Q].
    top = jnp.concatenate([jnp.zeros((n, k), dtype), on_basis[:, None]], axis=1)
    bottom = jnp.concatenate([jnp.eye(k, dtype=dtype), on_q[:, None]], axis=1)
    out = apply_basis(basis, ext_b, jnp.concatenate([top, bottom], axis=0))
    return rebase(basis, out[:, :k], used, coeffs, flag), out[:, k]


def rebase(
    basis: jax.Array, Q: jax.Array, used: jax.Array, coeffs: jax.Array, flag: jax.Array
) -> jax.Array:
    """Writes ``Q`` (D, k) into columns ``used .. used + k`` of ``basis`` (D, n) (O(D k)), then,
    when ``flag``, replaces the basis by ``[basis coeffs, 0]`` (``coeffs``: (n, m); O(D n m)).

    Shared by the deferred rotations (:func:`deferred_rule`'s materialisation of
    ``V = basis @ R``, the fast rule's shrink). The product runs in a ``lax.while_loop`` of zero
    or one trip whose only large operand is its carry: measured, a ``lax.cond`` over the basis,
    a slice read back and rewritten, or a product with a captured ``Q`` (hoisted out of the
    loop by XLA and so computed every round) each cost a D-sized pass per round; this form
    costs none."""
    D, n = basis.shape
    m = coeffs.shape[1]
    basis = lax.dynamic_update_slice(basis, Q, (jnp.zeros((), jnp.int32), used))

    def product(carry):
        i, B = carry
        return i + 1, jnp.concatenate([B @ coeffs, jnp.zeros((D, n - m), B.dtype)], axis=1)

    trips = flag.astype(jnp.int32)
    _, basis = lax.while_loop(lambda cr: cr[0] < trips, product, (jnp.zeros((), jnp.int32), basis))
    return basis
