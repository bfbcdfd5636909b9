"""A synthetic MLogB stream whose actions lie near an r-dimensional subspace.

Frequent Directions' premise: the action covariance has ``r`` dominant directions. ``init(key)``
draws a random orthonormal basis ``U`` (d x r, QR of a Gaussian) and ``W* = G U^T`` (``G``
Gaussian K x r) scaled to ``||W*||_F = S``. Each round draws ``max_actions`` actions::

    x = U z + noise * g / sqrt(d),   z ~ N(0, I_r) / sqrt(r),   g ~ N(0, I_d),

normalised to unit norm: ``noise`` is the off-subspace to on-subspace amplitude ratio. Outcomes,
rewards and validation are those of :func:`bandits_jax.envs.synthetic_mlogb.synthetic_mlogb`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from bandits_jax.checks import check_int
from bandits_jax.envs.synthetic_mlogb import (
    BasisState,
    MLogBEnvFunctions,
    build_env,
    check_number,
    check_stream,
)
from bandits_jax.linalg import lapack


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
    """Builds the low-rank action stream (module docstring); other arguments as
    :func:`~bandits_jax.envs.synthetic_mlogb.synthetic_mlogb`, states :class:`BasisState`.

    Args:
      rank: ``r`` in ``1..d``, the dimension of the action subspace.
      noise: off-subspace amplitude ``>= 0`` (0: actions exactly in span(U)).
    """
    c = check_stream(num_outcomes, dim, S, rewards, min_actions, max_actions, dtype)
    r = check_int("rank", rank)
    if r > c.d:
        raise ValueError(f"rank must be in 1..dim = 1..{c.d}, got {rank!r}")
    noise = check_number("noise", noise, positive=False)
    noise_scale = noise / math.sqrt(c.d)

    def init(key: jax.Array) -> BasisState:
        k_u, k_w = jax.random.split(key)
        U, _ = lapack.qr(jax.random.normal(k_u, (c.d, r), c.dtype))
        W = jax.random.normal(k_w, (c.K, r), c.dtype) @ U.T
        return BasisState(c.scaled(W), jnp.asarray(c.rewards, c.dtype), U)

    def draw_actions(state: BasisState, key: jax.Array) -> jax.Array:
        k_z, k_g = jax.random.split(key)
        z = jax.random.normal(k_z, (c.max_actions, r), c.dtype) / math.sqrt(r)
        g = jax.random.normal(k_g, (c.max_actions, c.d), c.dtype)
        return z @ state.basis.T + noise_scale * g

    return build_env(c, init, draw_actions)
