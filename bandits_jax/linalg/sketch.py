"""Block Frequent Directions on the spectral state ``(V, mu, rho)``.

EOFD-MLogB (He et al.), Algorithm 1, eq. (12)-(15), Lemmas 3-4: ``V diag(mu) V^T`` (V: D x m
orthonormal, mu >= 0) with ``V diag(mu) V^T <= M_t <= V diag(mu) V^T + rho I``,
``M_t = sum_s B_s B_s^T``. The SVD of eq. (14) needs no D-sized SVD: with ``B = X G``,
``X = V C + Q T`` (:func:`extend`, ``Q`` implicit) and the eigendecomposition of the
(m+k) x (m+k) core ``diag(mu, 0) + [C; T] G G^T [C; T]^T`` gives eq. (14)'s singular vectors
through ``[V, Q]``. Degenerate residual directions (``X`` in ``span V``, always so when
``m >= D``) get a negative sentinel eigenvalue and are discarded; with ``m >= D`` nothing is
truncated and ``rho`` stays 0 (errata 1).

A :class:`SketchRule` is a round's sketch as data: :func:`per_round_rule` (Algorithm 1),
:func:`deferred_rule` (``V = basis @ R`` formed when the spare columns run out) and
:func:`bandits_jax.linalg.fast_fd.spectral_rule`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.linalg import lapack, secular


class FDState(NamedTuple):
    """Spectral sketch state: ``V`` (D, m) orthonormal, ``mu`` (m,) weights >= 0 descending,
    ``rho`` the accumulated discarded mass ``rho_{1:t}``."""

    V: jax.Array
    mu: jax.Array
    rho: jax.Array


class Extension(NamedTuple):
    """Orthonormal extension ``X = V C + Q T`` of the basis, ``Q = (X - V C) T_pinv`` implicit.

    ``C`` (m, k) and ``T`` (k, k) are ``X``'s coordinates in ``V`` and ``Q``; ``valid`` (k,) is
    False for degenerate residual directions, whose rows of ``T``, columns of ``T_pinv`` and ``Q``
    are zero.
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
    """Empty sketch: ``V`` the first ``m_eff = min(m, D)`` unit vectors (errata 1), ``mu = 0``."""
    m_eff = min(sketch_size, dim)
    return FDState(
        V=jnp.eye(dim, m_eff, dtype=dtype),
        mu=jnp.zeros((m_eff,), dtype),
        rho=jnp.zeros((), dtype),
    )


def _gram_basis(G: jax.Array, tol: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(T, T_pinv, valid)`` with ``R = Q T``, ``Q = R T_pinv`` orthonormal on the ``valid``
    columns, from the Gram matrix ``G = R^T R`` (k x k): ``G = W diag(s^2) W^T``, ``T = diag(s)
    W^T``; directions with ``s <= tol`` are not valid (zero rows of T, columns of T_pinv)."""
    k = G.shape[0]
    if k == 1:
        s, W = jnp.sqrt(jnp.maximum(G[0], 0.0)), jnp.ones((1, 1), G.dtype)
    else:
        ev, W = lapack.eigh(0.5 * (G + G.T))  # k x k: one batched call on every platform
        s = jnp.sqrt(jnp.maximum(ev, 0.0))
    valid = s > tol
    T = jnp.where(valid[:, None], s[:, None] * W.T, 0.0)
    T_pinv = jnp.where(valid[None, :], W / jnp.where(valid, s, 1.0)[None, :], 0.0)
    return T, T_pinv, valid


def extend(V: jax.Array, X: jax.Array, C: jax.Array | None = None) -> Extension:
    """Extends the basis ``V`` (D, m) by the column space of ``X`` (D, k).

    The residual ``X - V C`` is orthonormalised through its Gram matrix ``X^T X - C^T C`` while
    every residual keeps at least half its column's norm. Otherwise it is formed and
    re-orthogonalised once ("twice is enough", Kahan-Parlett), and its Gram matrix is taken
    twice (the second pass on the first's basis restores orthogonality to rounding): only
    k x k eigendecompositions, so a batch stays one batch on every platform.

    Args:
      C: ``V^T X`` if the caller already has it.
    """
    dtype = V.dtype
    if C is None:
        C = V.T @ X
    xx = X.T @ X
    x_sq = jnp.diag(xx)
    tol = jnp.sqrt(jnp.finfo(dtype).eps) * (jnp.sqrt(jnp.sum(x_sq)) + jnp.finfo(dtype).tiny)
    G = xx - C.T @ C
    implicit = _gram_basis(G, tol)
    # The Gram route while every residual keeps half its column (s_i^2: T's squared rows).
    s_sq = jnp.sum(implicit[0] * implicit[0], axis=1)
    need = (jnp.min(s_sq) < 0.25 * jnp.min(x_sq)) | jnp.any(jnp.diag(G) < 0.25 * x_sq)

    def explicit(C):
        R = X - V @ C
        C2 = V.T @ R
        R = R - V @ C2
        T1, P1, _ = _gram_basis(R.T @ R, tol)
        Q1 = R @ P1  # orthonormal up to eps cond(R)^2: once more
        T2, P2, valid = _gram_basis(Q1.T @ Q1, jnp.asarray(0.5, dtype))
        return C + C2, T2 @ T1, P1 @ P2, valid

    # Under vmap both branches run (a select); the explicit one is O(D m k), no solver loop.
    C, T, T_pinv, valid = lax.cond(need, explicit, lambda C: (C, *implicit), C)
    return Extension(X=X, C=C, T=T, T_pinv=T_pinv, valid=valid)


def residual_basis(V: jax.Array, ext: Extension) -> jax.Array:
    """Materialises ``Q = (X - V C) T_pinv`` (D, k) (tests and generic callers)."""
    return (ext.X - V @ ext.C) @ ext.T_pinv


def apply_basis(V: jax.Array, ext: Extension, coef: jax.Array) -> jax.Array:
    """``[V, Q] coef`` (coef: (m + k,) or (m + k, j)) in one pass over V."""
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


class Truncation(NamedTuple):
    """The small part of an FD update: the new ``V = [V, Q] U`` (``U``: (m + k, m)), weights
    ``mu = sigma_i^2 - sigma2`` (eq. 15), the discarded ``sigma2 = sigma_bar_{m+1}^2`` and the
    core eigensolve's ``status`` (int32)."""

    U: jax.Array
    mu: jax.Array
    sigma2: jax.Array
    status: jax.Array


def truncate(mu: jax.Array, ext: Extension, M: jax.Array, solver: str = "auto") -> Truncation:
    """Eigendecomposition and truncation of the core (Algorithm 1 lines 3-6, eq. 14-15)."""
    return truncate_adaptive(mu, ext, M, mu.shape[0], 0.0, solver)[0]


def core_eigh(
    mu: jax.Array, ext: Extension, M: jax.Array, solver: str = "auto"
) -> secular.SecularEigh:
    """Ascending eigenpairs of the core ``diag(mu, 0) + A M A^T`` (``A = ext.coords``, the
    matrix of ``V diag(mu) V^T + X M X^T`` in ``[V, Q]``) as a
    :class:`~bandits_jax.linalg.secular.SecularEigh`; degenerate directions get a sentinel below
    every genuine (>= 0) eigenvalue.

    ``solver`` (:data:`~bandits_jax.linalg.lapack.SOLVERS`): ``"batched"``, k rank-one secular
    updates (:func:`~bandits_jax.linalg.secular.lowrank_eigh`, plain ``jnp``: a batch stays one
    batch on every platform; a degenerate direction has a zero row in ``A`` and is deflated
    exactly); ``"lapack"``, one ``eigh`` of the (m+k) x (m+k) core (counted as converged), which a
    GPU runs as a loop over the batch above 32 x 32; ``"auto"``, the secular updates except on the
    CPU with k >= 2, where LAPACK is faster (``docs/eofd.md``).
    """
    lapack.check_solver("core_eigh", solver)
    A = ext.coords
    k = ext.T.shape[0]
    base = jnp.concatenate([mu, jnp.zeros((k,), mu.dtype)])
    invalid = jnp.concatenate([jnp.zeros(mu.shape, bool), ~ext.valid])

    def by_secular(base, A, M):
        M = 0.5 * (M + M.T)
        sentinel = -(1.0 + jnp.sum(base) + jnp.sum((A @ M) * A))
        return secular.lowrank_eigh(base + jnp.where(invalid, sentinel, 0.0), A, M)

    def by_lapack(base, A, M):
        S = jnp.diag(base) + A @ M @ A.T
        S = 0.5 * (S + S.T)
        S = S + jnp.diag(jnp.where(invalid, -(1.0 + jnp.trace(S)), 0.0))
        return secular.SecularEigh(*lapack.eigh(S), converged=jnp.asarray(True))

    if solver == "auto" and k == 1:
        solver = "batched"
    return lapack.by_platform(solver, by_lapack, by_secular, base, A, M)


def truncate_adaptive(
    mu: jax.Array,
    ext: Extension,
    M: jax.Array,
    rank: jax.Array,
    budget: jax.Array,
    solver: str = "auto",
) -> tuple[Truncation, jax.Array]:
    """:func:`truncate` with an active rank ``r <= m`` that grows to keep the discarded mass small.

    The new rank is the smallest ``r'`` in ``[rank, m]`` with ``sigma_{r'+1}^2 <= budget``
    (``m`` if none); weights beyond it are 0 and ``mu_i = sigma_i^2 - sigma_{r'+1}^2`` (eq. 15).
    Returns ``(truncation, new_rank)``.
    """
    m = mu.shape[0]
    k = ext.T.shape[0]
    eig = core_eigh(mu, ext, M, solver)
    desc = jnp.maximum(eig.evals[::-1], 0.0)  # sigma_1^2 >= sigma_2^2 >= ... (m + k)
    # Discarding sigma_{j+1}^2 is within budget from some j on (desc is non-increasing).
    first = jnp.sum(desc[: m + 1] > budget).astype(jnp.int32)
    new_rank = jnp.clip(jnp.maximum(jnp.asarray(rank, jnp.int32), first), 0, m)
    sigma2 = desc[new_rank]
    mu_new = jnp.where(jnp.arange(m) < new_rank, jnp.maximum(desc[:m] - sigma2, 0.0), 0.0)
    U = eig.evecs[:, k:][:, ::-1]
    return Truncation(U=U, mu=mu_new, sigma2=sigma2, status=eig.status), new_rank


def absorb(
    state: FDState, ext: Extension, M: jax.Array, solver: str = "auto"
) -> tuple[FDState, jax.Array, jax.Array]:
    """Block FD update absorbing ``X M X^T`` (Algorithm 1); returns
    ``(new_state, sigma2, status)`` (:class:`Truncation`).

    Args:
      ext: :func:`extend` of ``state.V`` by ``X``.
      M: (k, k) PSD middle factor (``grad sigma(W_{t+1} x_t)`` for EOFD-MLogB, eq. 12-13).
      solver: the core's (:func:`core_eigh`).
    """
    tr = truncate(state.mu, ext, M, solver)
    V_new = apply_basis(state.V, ext, tr.U)
    return FDState(V=V_new, mu=tr.mu, rho=state.rho + tr.sigma2), tr.sigma2, tr.status


def map_basis(
    V: jax.Array, ext: Extension, U: jax.Array, extra: jax.Array | None = None
) -> tuple[jax.Array, jax.Array | None]:
    """``([V, Q] U, [V, Q] extra)`` in one matrix product (one pass over V)."""
    if extra is None:
        return apply_basis(V, ext, U), None
    m = U.shape[1]
    out = apply_basis(V, ext, jnp.concatenate([U, extra[:, None]], axis=1))
    return out[:, :m], out[:, m]


def update(
    state: FDState, B: jax.Array, solver: str = "auto"
) -> tuple[FDState, jax.Array, jax.Array]:
    """Absorbs ``B B^T`` (B: D x k); returns ``(new_state, sigma2, status)`` as :func:`absorb`."""
    ext = extend(state.V, B)
    return absorb(state, ext, jnp.eye(B.shape[1], dtype=B.dtype), solver)


class Sketch(NamedTuple):
    """A sketch ``V diag(mu) V^T`` with ``V = basis @ R`` (``R`` None: ``V = basis``): ``basis``
    (D, n) orthonormal (or zero) in its first ``used`` columns, where a round's ``Q`` is written
    next, zero after; ``rank`` is the active rank (adaptive size) or number of directions."""

    basis: jax.Array
    R: jax.Array | None
    mu: jax.Array
    rank: jax.Array
    used: jax.Array

    def v_coords(self, basis_coords: jax.Array) -> jax.Array:
        """``V^T w`` from ``basis^T w`` (no D-sized work)."""
        return basis_coords if self.R is None else self.R.T @ basis_coords


class Round(NamedTuple):
    """The small part of one round of a :class:`SketchRule`: the new sketch's ``R, mu, rank,
    used``, the discarded mass ``delta`` (eq. 15's ``sigma_{m+1}^2``), the core eigensolve's
    ``status`` and the ``plan`` (a pytree) the rule's pass 2 needs."""

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
      extend: ``(sketch, X, P) -> (ext_b, ext)`` with ``P = basis^T X``: the extensions of the
        basis (pass 2 maps through ``ext_b``) and of ``V`` (eq. 12-14).
      absorb: ``(sketch, ext, M, coef, budget) -> Round``: absorbs ``X M X^T`` (eq. 12-15);
        ``coef``: the step in ``[V, Q]``; ``budget``: the adaptive size's (None: fixed size).
      commit: ``(sketch, ext_b, round, coef, ok) -> (basis, step, round)``, pass 2: the new
        basis and ``[V, Q] coef`` in one product; the basis is kept where not ``ok``.
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
    """``ext``, or where not ``ok`` one with zero ``X``, ``C`` and ``T_pinv`` (so
    :func:`apply_basis` maps through ``V`` alone and a rejected round changes nothing)."""
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


def _truncation_round(
    sk: Sketch, ext: Extension, M: jax.Array, budget: jax.Array | None, solver: str
) -> Round:
    """Algorithm 1's truncation (eq. 14-15), adaptive when ``budget`` is given; ``plan = U``."""
    if budget is None:
        tr, rank = truncate(sk.mu, ext, M, solver), sk.rank
    else:
        tr, rank = truncate_adaptive(sk.mu, ext, M, sk.rank, budget, solver)
    return Round(sk.R, tr.mu, rank, sk.used, tr.sigma2, tr.status, plan=tr.U)


def per_round_rule(
    sketch_size: int, *, rank: int | None = None, solver: str = "auto"
) -> SketchRule:
    """Algorithm 1 with V formed every round (``basis = V``, ``R`` None).

    Args:
      sketch_size: m (the capacity, ``<= D``).
      rank: the initial active rank of an adaptive size (None: fixed size m).
      solver: the core's (:func:`core_eigh`).
    """
    m = sketch_size
    lapack.check_solver("per_round_rule", solver)

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
        absorb=lambda sk, ext, M, coef, budget: _truncation_round(sk, ext, M, budget, solver),
        commit=commit,
        radius_rank=_radius_rank(m, rank is not None),
    )


def deferred_rule(
    sketch_size: int, spare_columns: int, *, rank: int | None = None, solver: str = "auto"
) -> SketchRule:
    """Algorithm 1 with a deferred rotation ``V = basis @ R``: each round's ``Q`` is written
    into the ``spare_columns >= k`` spare columns and ``V`` is formed only when the next would
    not fit (:func:`rebase`). Arguments as :func:`per_round_rule`."""
    m, n = sketch_size, sketch_size + spare_columns
    lapack.check_solver("deferred_rule", solver)

    def absorb(sk: Sketch, ext: Extension, M: jax.Array, coef: jax.Array, budget) -> Round:
        rnd = _truncation_round(sk, ext, M, budget, solver)
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
    """The extension (eq. 12-14) when ``V = basis @ R``: ``(ext_b, ext)``.

    ``ext_b`` extends the used basis by ``X`` (``P = basis^T X`` given; its ``Q`` goes to columns
    ``used .. used + k``). ``ext`` is :func:`extend` of ``R`` by ``X``'s basis coordinates
    ``[P; Tb]`` (``span V`` is a strict subspace of the used columns after a truncation), so
    the core is the same matrix as with an explicit V; only (n, k)-sized work beyond ``ext_b``."""
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
    """Pass 2 of a deferred rotation: one product over ``[basis, Q]`` gives ``Q`` and the step
    ``basis on_basis + Q on_q``; returns ``(rebase(basis, Q, used, coeffs, flag), step)``."""
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
    """Writes ``Q`` (D, k) into columns ``used .. used + k`` of ``basis`` (D, n), then, when
    ``flag``, replaces the basis by ``[basis coeffs, 0]`` (``coeffs``: (n, m)).

    The product runs in a ``lax.while_loop`` of zero or one trip whose only large operand is
    its carry, so rounds without it make no D-sized pass (``docs/design.md``)."""
    D, n = basis.shape
    m = coeffs.shape[1]
    basis = lax.dynamic_update_slice(basis, Q, (jnp.zeros((), jnp.int32), used))

    def product(carry):
        i, B = carry
        return i + 1, jnp.concatenate([B @ coeffs, jnp.zeros((D, n - m), B.dtype)], axis=1)

    trips = flag.astype(jnp.int32)
    _, basis = lax.while_loop(lambda cr: cr[0] < trips, product, (jnp.zeros((), jnp.int32), basis))
    return basis
