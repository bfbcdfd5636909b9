"""Fast Frequent Directions in spectral form: a sketch that shrinks only when it is full.

Ghashami, Liberty, Phillips & Woodruff (2016), "Frequent Directions: simple and deterministic
matrix sketching", SIAM J. Comput. 45(5), Algorithm 3: with ``M_t`` the absorbed sum and
``C_t = V diag(mu) V^T`` the sketch,

    C_t <= M_t <= C_t + rho I,      rho <= (tr M_t - tr C_t) / (m + 1).

Blocks are absorbed until the sketch's ``capacity`` slots are full; then it shrinks to its top
m directions with weights ``lambda_i - delta``, ``delta = lambda_{m+1}`` (added to ``rho``).
EOFD-MLogB (``sketch_rule="fast"``) and SOFUL need the eigenbasis every round (Lemmas 1-2), so
the state is ``V = basis @ R`` with a deferred rotation (:func:`spectral_round`,
:func:`spectral_rule`): a round rotates only the small ``R`` (a secular eigenupdate, no LAPACK
call) and the basis is rebuilt at a shrink: O(D m) a round amortised.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.linalg import secular
from bandits_jax.linalg.sketch import (
    Extension,
    Round,
    Sketch,
    SketchRule,
    commit_deferred,
    extend,
    rebase,
)


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
