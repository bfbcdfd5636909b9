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

from bandits_jax.mlogb import model

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
    lam_max = jnp.linalg.eigvalsh(A)[:, -1]
    second = 0.5 * jnp.sum(jnp.abs(rewards)) * lam_max
    return s @ rewards, jnp.sqrt(beta) * first + beta * second


def optimistic_reward(K: int, estimate: jax.Array, bonus: jax.Array) -> jax.Array:
    """``R_t(x)`` from the two parts (``sigmoid`` of the index for K = 1, eq. 16)."""
    index = estimate + bonus
    return jax.nn.sigmoid(index) if K == 1 else index


def argmax_tie(values: jax.Array, mask: jax.Array | None = None) -> jax.Array:
    """Lowest index among valid entries within a relative ``1e-9`` of the maximum (errata 9).

    At round 1 every unit-norm action scores the same; a fixed rule makes JAX and numpy paths
    choose the same action.
    """
    if mask is None:
        mask = jnp.ones(values.shape, bool)
    v = jnp.where(mask, values, -jnp.inf)
    vmax = jnp.max(v)
    ok = mask & (values >= vmax - TIE_RTOL * jnp.abs(vmax))
    return jnp.argmax(ok).astype(jnp.int32)
