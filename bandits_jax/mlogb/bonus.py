"""Optimistic rewards of EOFD-/OFUL-MLogB from the K x K matrices ``A(x)``, and the selection.

He et al., eq. (16) (K = 1), eq. (10)/(19) (K >= 2) and Lemma 1 (eq. 17-18):
``A(x) = (I_K kron x)^T Z^{-1} (I_K kron x)``, positive definite, so ``||A(x)||_2 =
lambda_max`` (errata 7), and eq. (10)'s first term is ``g^T A(x) g`` with
``g = grad sigma(W x) r``. Scores come in two parts, ``index = estimate + bonus``: for K = 1
(eq. 16) ``w^T x`` and ``sqrt(beta) ||x||_{Z^{-1}}`` (a logit: the optimistic reward is
``sigmoid(index)``, errata 6); for K >= 2 (eq. 19) ``r^T sigma(W x)`` and eq. (10)'s two terms.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.checks import is_concrete
from bandits_jax.linalg import jacobi
from bandits_jax.mlogb import model
from bandits_jax.status import CONVERGED, EMPTY_MASK, NAN_SCORES

TIE_RTOL = 1e-9


def parts(
    W: jax.Array, actions: jax.Array, A: jax.Array, rewards: jax.Array, beta: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Returns ``(estimate, bonus)`` of shape (N,) for actions (N, d) and A (N, K, K)."""
    K = W.shape[0]
    z = actions @ W.T
    if K == 1:
        return z[:, 0], jnp.sqrt(beta) * jnp.sqrt(jnp.maximum(A[:, 0, 0], 0.0))
    s = model.sigma(z)
    g = jnp.einsum("nij,j->ni", model.jacobian(s), rewards)
    first = jnp.sqrt(jnp.maximum(jnp.einsum("ni,nij,nj->n", g, A, g), 0.0))
    lam_max = jacobi.lambda_max(A)  # not eigvalsh: a loop of N LAPACK calls on CPU
    second = 0.5 * jnp.sum(jnp.abs(rewards)) * lam_max
    return s @ rewards, jnp.sqrt(beta) * first + beta * second


def optimistic_reward(K: int, estimate: jax.Array, bonus: jax.Array) -> jax.Array:
    """``R_t(x)`` from the two parts (``sigmoid`` of the index for K = 1, eq. 16)."""
    index = estimate + bonus
    return jax.nn.sigmoid(index) if K == 1 else index


def check_mask(shape: tuple[int, ...], mask: jax.Array | None) -> jax.Array:
    """Eager mask checks (shape, boolean, not all False when concrete); ``None``: all valid."""
    if mask is None:
        return jnp.ones(shape, bool)
    if not isinstance(mask, jax.Array | np.ndarray):
        mask = np.asarray(mask)
    if jnp.shape(mask) != tuple(shape):
        raise ValueError(
            f"mask must have shape {tuple(shape)} (one per action), got {jnp.shape(mask)}"
        )
    if jnp.result_type(mask) != jnp.bool_:
        raise ValueError(f"mask must be boolean, got dtype {jnp.result_type(mask)}")
    if is_concrete(mask) and not np.any(np.asarray(mask)):
        raise ValueError("mask is all False: no valid action to select")
    return jnp.asarray(mask)


def select_index(values: jax.Array, mask: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """``(index, status)``: the lowest valid index within a relative ``TIE_RTOL`` of the maximum
    (errata 9: at round 1 every unit-norm action ties) and the int32 status.

    ``+inf`` wins; NaN scores are never chosen over others and set ``NAN_SCORES`` (all NaN: the
    lowest valid index); an all-False mask is a ``ValueError`` when concrete, ``EMPTY_MASK``
    (index 0) under ``jit``.
    """
    mask = check_mask(values.shape, mask)
    nan = jnp.isnan(values)
    cand = mask & ~nan
    any_cand = jnp.any(cand)
    cand = jnp.where(any_cand, cand, mask)  # all valid scores NaN: fall back to the valid ones
    vmax = jnp.max(jnp.where(cand & ~nan, values, -jnp.inf))
    # inf - inf is NaN: an infinite maximum is matched exactly.
    thr = jnp.where(jnp.isfinite(vmax), vmax - TIE_RTOL * jnp.abs(vmax), vmax)
    ok = cand & ((values >= thr) | ~any_cand)
    idx = jnp.argmax(ok).astype(jnp.int32)
    status = jnp.where(
        ~jnp.any(mask), EMPTY_MASK, jnp.where(jnp.any(mask & nan), NAN_SCORES, CONVERGED)
    ).astype(jnp.int32)
    return idx, status


def argmax_tie(values: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """The index of :func:`select_index` (its status dropped; see there for the semantics)."""
    return select_index(values, mask)[0]
