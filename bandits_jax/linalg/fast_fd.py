"""Fast Frequent Directions: a 2m-column buffer and one small SVD every m rounds.

Ghashami, Liberty, Phillips & Woodruff (2016), "Frequent Directions: simple and deterministic
matrix sketching", SIAM J. Comput. 45(5), Algorithm 3, for columns: a factor ``S`` (D x 2m) with

    S S^T <= M_t <= S S^T + rho I,      rho <= (tr M_t - tr S S^T) / (m + 1).

Blocks are appended to the buffer; when one does not fit, the buffer is shrunk to its top m
directions with weights ``sigma_i^2 - delta``, ``delta = sigma_{m+1}^2`` (added to ``rho``), by
an ``eigh`` of the 2m x 2m Gram matrix: O(D m) a round amortised.

EOFD-MLogB needs the eigenbasis every round (Lemmas 1-2), so its ``sketch_rule="fast"`` keeps
the spectral state ``V = basis @ R`` with a deferred rotation instead (:func:`spectral_round`,
:func:`spectral_rule`), rebuilding the basis only at a shrink.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bandits_jax.checks import is_concrete
from bandits_jax.linalg import lapack, secular
from bandits_jax.linalg.sketch import (
    Extension,
    FDState,
    Round,
    Sketch,
    SketchRule,
    commit_deferred,
    extend,
    rebase,
)


class FastFDState(NamedTuple):
    """Fast-FD state: the factor ``buffer`` (D, 2m), zero at and after column ``count``, the
    accumulated shrinkage ``rho`` and the number of ``rejected`` (non-finite) blocks."""

    buffer: jax.Array
    count: jax.Array
    rho: jax.Array
    rejected: jax.Array


def init(dim: int, sketch_size: int, dtype: jnp.dtype = jnp.float32) -> FastFDState:
    """Empty sketch of ``dim``-dimensional columns with ``sketch_size = m`` kept directions."""
    if not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim: expected a positive int, got {dim!r}")
    if not isinstance(sketch_size, int) or sketch_size < 1:
        raise ValueError(f"sketch_size: expected a positive int, got {sketch_size!r}")
    return FastFDState(
        buffer=jnp.zeros((dim, 2 * sketch_size), dtype),
        count=jnp.zeros((), jnp.int32),
        rho=jnp.zeros((), dtype),
        rejected=jnp.zeros((), jnp.int32),
    )


def _gram_eigh(S: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Eigenvalues (descending, >= 0) and eigenvectors of ``S^T S``."""
    G = S.T @ S
    lam, W = lapack.eigh(0.5 * (G + G.T))
    return jnp.maximum(lam[::-1], 0.0), W[:, ::-1]


def shrink(state: FastFDState) -> FastFDState:
    """Keeps the top m directions of the buffer, shrunk by ``delta = sigma_{m+1}^2``."""
    S = state.buffer
    m = S.shape[1] // 2
    lam, W = _gram_eigh(S)
    delta = lam[m]
    # new columns S W_i sqrt(lam_i - delta) / sigma_i for i < m (= U_i sqrt(sigma_i^2 - delta))
    scale = jnp.sqrt(jnp.maximum(lam[:m] - delta, 0.0)) / jnp.sqrt(
        jnp.where(lam[:m] > 0, lam[:m], 1.0)
    )
    top = S @ (W[:, :m] * jnp.where(lam[:m] > 0, scale, 0.0)[None, :])
    buffer = jnp.concatenate([top, jnp.zeros_like(top)], axis=1)
    return state._replace(buffer=buffer, count=jnp.full((), m, jnp.int32), rho=state.rho + delta)


def update(state: FastFDState, B: jax.Array) -> FastFDState:
    """Absorbs ``B B^T`` (B: D x k, k <= m), shrinking first if B does not fit.

    A non-finite block raises ``ValueError`` eagerly; under ``jit`` it is rejected (counted)."""
    D, two_m = state.buffer.shape
    m = two_m // 2
    if B.ndim != 2 or B.shape[0] != D or not 1 <= B.shape[1] <= m:
        raise ValueError(f"B: expected shape ({D}, k) with 1 <= k <= {m}, got {B.shape}")
    k = B.shape[1]
    if is_concrete(B) and not np.all(np.isfinite(np.asarray(B))):
        raise ValueError("B: expected finite values, got NaN or inf")
    B = B.astype(state.buffer.dtype)
    ok = jnp.all(jnp.isfinite(B))
    # A rejected block is written as zeros at ``count`` (zero already): no select over the buffer.
    B = jnp.where(ok, B, 0.0)
    new = lax.cond(ok & (state.count + k > two_m), shrink, lambda s: s, state)
    zero = jnp.zeros((), jnp.int32)
    return new._replace(
        buffer=lax.dynamic_update_slice(new.buffer, B, (zero, new.count)),
        count=new.count + jnp.where(ok, k, 0).astype(jnp.int32),
        rejected=new.rejected + (~ok).astype(jnp.int32),
    )


def covariance(state: FastFDState) -> jax.Array:
    """The sketched covariance ``S S^T`` (D x D; small D only)."""
    return state.buffer @ state.buffer.T


def view(state: FastFDState) -> FDState:
    """The sketch as an :class:`~bandits_jax.linalg.sketch.FDState` with 2m directions:
    ``V diag(mu) V^T = S S^T``, ``mu`` descending (columns of V with ``mu = 0`` are zero)."""
    S = state.buffer
    lam, W = _gram_eigh(S)
    tol = S.shape[1] * jnp.finfo(S.dtype).eps * lam[0]
    pos = lam > tol
    V = S @ (W * jnp.where(pos, 1.0 / jnp.sqrt(jnp.where(pos, lam, 1.0)), 0.0)[None, :])
    return FDState(V=V, mu=jnp.where(pos, lam, 0.0), rho=state.rho)


class Rotation(NamedTuple):
    """The small part of one fast-FD round: the new sketch's ``R, mu, rank, used`` (zero at and
    after ``rank``), the mass ``delta`` a shrink discards, whether the round does ``shrink`` and
    then the new basis's ``coeffs`` (n, m) in the basis with ``Q`` written in, and ``status``."""

    R: jax.Array
    mu: jax.Array
    rank: jax.Array
    used: jax.Array
    delta: jax.Array
    shrink: jax.Array
    coeffs: jax.Array
    status: jax.Array


def spectral_round(
    R: jax.Array,
    mu: jax.Array,
    rank: jax.Array,
    used: jax.Array,
    ext: Any,
    M: jax.Array,
    sketch_size: int,
) -> Rotation:
    """Absorbs ``X M X^T`` into ``V diag(mu) V^T``, ``V = basis @ R`` (Algorithm 3 in the
    spectral form of eq. 12-15; ``ext`` in V's coordinates); only ``R`` rotates. When the next
    block would not fit, the sketch shrinks to ``sketch_size`` directions with weights
    ``lambda_i - lambda_{m+1}`` (eq. 15; :func:`commit_basis` rebuilds the basis).
    """
    n = mu.shape[0]
    k = ext.T.shape[0]
    m = sketch_size
    dtype = mu.dtype
    # Slots at and after ``rank`` and degenerate directions get a sentinel below every eigenvalue.
    genuine = jnp.concatenate([jnp.arange(n) < rank, ext.valid])
    A = jnp.where(genuine[:, None], ext.coords, 0.0)
    sentinel = -(1.0 + jnp.sum(mu) + jnp.trace(M @ (A.T @ A)))
    diag = jnp.where(genuine, jnp.concatenate([mu, jnp.zeros((k,), dtype)]), sentinel)
    eig = secular.eigh_diag_plus_lowrank(diag, A, 0.5 * (M + M.T))
    desc, U = eig.evals[::-1], eig.evecs[:, ::-1]
    rank_all = (rank + jnp.sum(ext.valid)).astype(jnp.int32)

    # [V, Q] U = basis' (R U_V + E U_Q), basis' with Q written at columns used .. used + k.
    keep = jnp.arange(n) < rank_all
    Uc = jnp.where(keep[None, :], U[:, :n], 0.0)
    E_U = lax.dynamic_update_slice(jnp.zeros((n, n), dtype), Uc[n:], (used, jnp.int32(0)))
    R_keep = R @ Uc[:n] + E_U
    mu_keep = jnp.where(keep, jnp.maximum(desc[:n], 0.0), 0.0)

    # Shrink to m directions (Ghashami's Algorithm 3): the new basis is basis' coeffs.
    rank_s = jnp.minimum(rank_all, m).astype(jnp.int32)
    delta = jnp.maximum(desc[m], 0.0)
    top = jnp.arange(m) < rank_s
    coeffs = jnp.where(top[None, :], R_keep[:, :m], 0.0)
    mu_s = (
        jnp.zeros((n,), dtype).at[:m].set(jnp.where(top, jnp.maximum(desc[:m] - delta, 0.0), 0.0))
    )
    R_s = jnp.eye(n, dtype=dtype) * (jnp.arange(n) < rank_s)[None, :]

    shrink = used + 2 * k > n  # the next round's Q would not fit
    return Rotation(
        R=jnp.where(shrink, R_s, R_keep),
        mu=jnp.where(shrink, mu_s, mu_keep),
        rank=jnp.where(shrink, rank_s, rank_all).astype(jnp.int32),
        used=jnp.where(shrink, rank_s, used + k).astype(jnp.int32),
        delta=jnp.where(shrink, delta, 0.0),
        shrink=shrink,
        coeffs=coeffs,
        status=eig.status,
    )


def commit_basis(basis: jax.Array, Q: jax.Array, rot: Rotation, used: jax.Array) -> jax.Array:
    """The basis after a round: :func:`~bandits_jax.linalg.sketch.rebase` at a shrink."""
    return rebase(basis, Q, used, rot.coeffs, rot.shrink)


def spectral_rule(sketch_size: int, capacity: int, block: int) -> SketchRule:
    """Fast FD in spectral form as a :class:`~bandits_jax.linalg.sketch.SketchRule`: up to
    ``capacity`` directions (``capacity + block`` slots), shrunk to ``sketch_size`` when the
    next block would not fit (:func:`spectral_round`). No adaptive size (``budget`` None)."""
    n = capacity + block

    def init(D: int, dtype) -> Sketch:
        zero = lambda: jnp.zeros((), jnp.int32)  # noqa: E731  (one buffer per leaf)
        mu = jnp.zeros((n,), dtype)
        return Sketch(jnp.zeros((D, n), dtype), jnp.zeros((n, n), dtype), mu, zero(), zero())

    def extend_(sk: Sketch, X: jax.Array, P: jax.Array) -> tuple[Extension, Extension]:
        # Q is the same in V = basis R coordinates, as span V = span of the used columns.
        ext_b = extend(sk.basis, X, P)
        return ext_b, ext_b._replace(C=sk.R.T @ ext_b.C)

    def absorb(sk: Sketch, ext: Extension, M: jax.Array, coef: jax.Array, budget) -> Round:
        if budget is not None:
            raise ValueError("the fast rule has no adaptive size (budget must be None)")
        rot = spectral_round(sk.R, sk.mu, sk.rank, sk.used, ext, M, sketch_size)
        return Round(
            rot.R, rot.mu, rot.rank, rot.used, rot.delta, rot.status, (rot.shrink, rot.coeffs)
        )

    def commit(sk: Sketch, ext_b: Extension, rnd: Round, coef: jax.Array, ok: jax.Array):
        # [V, Q] coef = basis (R coef_V) + Q coef_Q; a shrink rebuilds the basis.
        shrink, coeffs = rnd.plan
        on_basis, on_q = sk.R @ coef[:n], coef[n:]
        basis, step = commit_deferred(sk.basis, ext_b, on_basis, on_q, sk.used, coeffs, shrink & ok)
        return basis, step, rnd

    return SketchRule(init, extend_, absorb, commit, lambda sk: jnp.maximum(sk.rank, 1))
