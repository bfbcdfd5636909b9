"""Block Frequent Directions on the spectral state ``(V, mu, rho)``.

EOFD-MLogB (He et al.), Algorithm 1, eq. (12)-(15), Lemmas 3-4 (Appendix A). The sketch keeps
``V diag(mu) V^T`` (V: D x m orthonormal, mu >= 0) approximating ``M_t = sum_s B_s B_s^T`` with
``V diag(mu) V^T <= M_t <= V diag(mu) V^T + rho I``.

How the SVD of ``[V mu^{1/2}, B]^T`` (eq. 14) is obtained: not by a full SVD of the (m+k) x D
matrix as in the paper, but exactly and more cheaply by

1. projecting the new block's column space ``X`` (``B = X G``) on ``V``: ``C = V^T X``;
2. orthonormalising the residual ``R = X - V C`` through its k x k Gram matrix (or, when ``X``
   is close to ``span V``, explicitly with one re-orthogonalisation pass and a thin SVD), which
   gives ``Q`` (D x k, kept implicit as ``(X - V C) T_pinv``) with ``[V, Q]`` orthonormal and
   ``X = V C + Q T``;
3. an eigendecomposition of the small (m+k) x (m+k) core
   ``S = diag(mu, 0) + [C; T] G G^T [C; T]^T``, whose eigenvalues are the squared singular values
   of eq. (14) and whose eigenvectors, mapped by ``[V, Q]``, are its right singular vectors.

Steps 1-2 depend only on ``V`` and ``X``; EOFD-MLogB reuses one :class:`Extension` for both
low-rank terms of a round (the surrogate at ``W_t`` and the sketch term at ``W_{t+1}``; both lie in
the span of ``I_K kron x_t``) and never forms the surrogate's eigenvectors as a D x (m+K) matrix.

Degenerate residual directions (``X`` already in the span of ``V``, always the case when
``m >= D``) have no orthonormal completion: they are flagged, their columns of ``Q`` and rows of
``T`` are zeroed (so coordinates ``[V, Q]^T w`` never see a spurious direction) and they get a
negative sentinel eigenvalue in the core so that they are always among the discarded directions.
With ``m >= D`` (``m_eff = D``) nothing is truncated and ``rho`` stays 0 (errata 1).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.linalg import secular


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
        ev, Ve = jnp.linalg.eigh(0.5 * (G + G.T))
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
            _, s, Vh = jnp.linalg.svd(R, full_matrices=False)
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
    (:mod:`bandits_jax.linalg.secular`) for ``k <= SECULAR_MAX_K``, else ``jnp.linalg.eigh``."""
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
    (:func:`_use_secular`); ``jnp.linalg.eigh`` counts as converged."""
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
    return secular.SecularEigh(*jnp.linalg.eigh(S), converged=jnp.asarray(True))


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
