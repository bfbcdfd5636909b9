"""The multinomial logistic model: sigma, its Jacobian, loss gradients, outcome sampling.

EOFD-MLogB (He et al.), eq. (1) and Appendix B.1. Conventions: outcomes ``0..K`` with outcome 0
the zero-reward dummy; ``sigma`` drops component 0 (B.1's refinement) and lives in R^K;
``vec(W) = W.reshape(-1)`` for ``W`` of shape (K, d), so block ``k`` of length d is row ``k`` and
``(I_K kron x)`` is the D x K matrix whose column ``k`` holds ``x`` in block ``k``. Appendix B.1
writes ``exp(x_k)`` for ``exp(z_k)`` (errata 5): we use ``exp(z_k)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def probabilities(z: jax.Array) -> jax.Array:
    """All K + 1 outcome probabilities ``[sigma_0, sigma_1..sigma_K]`` for logits z (..., K)."""
    zero = jnp.zeros(z.shape[:-1] + (1,), z.dtype)
    return jax.nn.softmax(jnp.concatenate([zero, z], axis=-1), axis=-1)


def sigma(z: jax.Array) -> jax.Array:
    """``sigma(z) in (0, 1)^K`` of eq. (1) without the dummy component (B.1)."""
    return probabilities(z)[..., 1:]


def jacobian(s: jax.Array) -> jax.Array:
    """``grad sigma = diag(s) - s s^T`` (B.1) from ``s = sigma(z)``; PSD, (..., K, K)."""
    return jnp.einsum("...i,ij->...ij", s, jnp.eye(s.shape[-1], dtype=s.dtype)) - (
        s[..., :, None] * s[..., None, :]
    )


def onehot(y: jax.Array, num_outcomes: int, dtype) -> jax.Array:
    """``y_t`` of B.1: one-hot over outcomes 1..K, the zero vector for outcome 0."""
    return (jnp.arange(1, num_outcomes + 1) == y).astype(dtype)


def sample_outcome(z: jax.Array, u: jax.Array) -> jax.Array:
    """Inverse-CDF draw of an outcome in ``{0..K}`` from logits z (K,) and a uniform u in [0,1)
    (deterministic given ``u``: numpy and JAX paths fed the same uniforms agree)."""
    cdf = jnp.cumsum(probabilities(z))
    k = z.shape[-1]
    return jnp.minimum(jnp.searchsorted(cdf, u, side="right"), k).astype(jnp.int32)


def expected_reward(W: jax.Array, actions: jax.Array, rewards: jax.Array) -> jax.Array:
    """``r^T sigma(W x)`` for each row of ``actions`` (N, d) (the objective of eq. 2)."""
    return sigma(actions @ W.T) @ rewards
