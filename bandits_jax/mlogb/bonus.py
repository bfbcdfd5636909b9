"""Optimistic rewards of EOFD-/OFUL-MLogB from the K x K matrices ``A(x)``.

He et al., eq. (16) (K = 1), eq. (10)/(19) (K >= 2) and Lemma 1 (eq. 17-18):
``A(x) = (I_K kron x)^T Z^{-1} (I_K kron x)`` with ``||Z^{-1/2}(I_K kron x)||_2^2 = ||A(x)||_2``.
``A(x)`` is positive definite, so its spectral norm is ``lambda_max`` (errata 7). The first bonus
term ``||(grad sigma(W x) kron x) r||_{Z^{-1}}^2 = g^T A(x) g`` with ``g = grad sigma(W x) r``, so
both EOFD (Lemma 1's A) and OFUL (dense A) share this module.

Both learners report scores in two parts, ``index = estimate + bonus``:
- K = 1 (eq. 16): estimate ``w^T x``, bonus ``sqrt(beta) ||x||_{Z^{-1}}`` (the selection index is a
  logit; the optimistic reward is ``sigmoid(index)``, errata 6: the confidence ellipsoid alone);
- K >= 2 (eq. 19): estimate ``r^T sigma(W x)``, bonus the two terms of eq. (10) with Z.
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
    """Eager mask checks (shape, boolean, not all False when concrete); ``None``: all valid.
    Array-likes (a list of bools) are taken as arrays."""
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
    """Returns ``(index, status)``: the lowest index among valid entries within a relative
    ``1e-9`` of the maximum (errata 9), and a selection status (int32,
    :mod:`bandits_jax.status`: ``CONVERGED``, ``NAN_SCORES`` or ``EMPTY_MASK``).

    At round 1 every unit-norm action scores the same; a fixed rule makes JAX and numpy paths
    choose the same action. ``+inf`` wins (ties among ``+inf`` go to the lowest index); NaN scores
    are never chosen over non-NaN ones and set ``NAN_SCORES`` (all valid scores NaN: the
    lowest valid index); an all-False mask is a ``ValueError`` when the mask is concrete and
    ``EMPTY_MASK`` (index 0) under ``jit``.
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
        ~jnp.any(mask),
        EMPTY_MASK,
        jnp.where(jnp.any(mask & nan), NAN_SCORES, CONVERGED),
    ).astype(jnp.int32)
    return idx, status


def argmax_tie(values: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """The index of :func:`select_index` (its status dropped; see there for the semantics)."""
    return select_index(values, mask)[0]
