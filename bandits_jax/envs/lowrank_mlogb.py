"""A synthetic MLogB stream whose actions lie near an r-dimensional subspace.

Frequent Directions' premise: the action covariance has ``r`` dominant directions. ``init(key)``
draws a uniformly random orthonormal basis ``U`` (d x r, QR of a Gaussian matrix) and
``W* = G U^T`` (``G`` Gaussian K x r, rows of ``W*`` in span(U)) scaled to ``||W*||_F = S``.
Each round draws ``max_actions`` actions::

    x = U z + noise * g / sqrt(d),   z ~ N(0, I_r) / sqrt(r),   g ~ N(0, I_d),

normalised to unit norm, of which a uniform number in ``[min_actions, max_actions]`` is shown
(mask). Both parts have expected squared norm 1 and ``noise**2`` before normalisation, so
``noise`` is the off-subspace to on-subspace amplitude ratio. Outcomes, rewards and validation
are those of :func:`bandits_jax.envs.synthetic_mlogb.synthetic_mlogb` (shared code).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax.envs.synthetic_mlogb import (
    MLogBEnvFunctions,
    _build_env,
    _check_common,
    _check_int,
    _check_number,
)
from bandits_jax.linalg import lapack

__all__ = ["LowRankState", "lowrank_mlogb"]


class LowRankState(NamedTuple):
    """Environment state: ``W*`` (K, d) with rows in span(basis), rewards (K,), basis (d, r)."""

    W_star: jax.Array
    rewards: jax.Array
    basis: jax.Array


def lowrank_mlogb(
    *,
    num_outcomes: int,
    dim: int,
    rank: int,
    S: float = 1.0,
    noise: float = 0.1,
    rewards=None,
    min_actions: int = 10,
    max_actions: int = 30,
    dtype=None,
) -> MLogBEnvFunctions:
    """Builds the low-rank action stream (see module docstring).

    Args:
      num_outcomes: ``K >= 1``.
      dim: ``d >= 1``.
      rank: ``r`` in ``1..d``, the dimension of the action subspace.
      S: ``||W*||_F > 0``.
      noise: off-subspace amplitude ``>= 0`` (0: actions exactly in span(U)).
      rewards: ``(K,)`` rewards of outcomes 1..K (default ``linspace(1/K, 1, K)``).
      min_actions: fewest actions shown per round.
      max_actions: most actions per round (the padded size).
      dtype: float dtype of the state and actions; default JAX's default float.

    Returns:
      An :class:`~bandits_jax.envs.synthetic_mlogb.MLogBEnvFunctions` with :class:`LowRankState`
      states.

    Raises:
      ValueError: an argument out of range (the message names it).
    """
    c = _check_common(num_outcomes, dim, S, rewards, min_actions, max_actions, dtype)
    r = _check_int("rank", rank)
    if r > c.d:
        raise ValueError(f"rank must be in 1..dim = 1..{c.d}, got {rank!r}")
    noise = _check_number("noise", noise, positive=False)
    noise_scale = noise / math.sqrt(c.d)

    def init(key: jax.Array) -> LowRankState:
        k_u, k_w = jax.random.split(key)
        U, _ = lapack.qr(jax.random.normal(k_u, (c.d, r), c.dtype))
        W = jax.random.normal(k_w, (c.K, r), c.dtype) @ U.T
        W = W * (c.S / jnp.linalg.norm(W))
        return LowRankState(W, jnp.asarray(c.rewards, c.dtype), U)

    def draw_actions(state: LowRankState, key: jax.Array) -> jax.Array:
        k_z, k_g = jax.random.split(key)
        z = jax.random.normal(k_z, (c.max_actions, r), c.dtype) / math.sqrt(r)
        g = jax.random.normal(k_g, (c.max_actions, c.d), c.dtype)
        return z @ state.basis.T + noise_scale * g

    return _build_env(c, init, draw_actions)
