"""Confidence radius ``beta_t`` of EOFD-MLogB: fixed, Theorem 1's eq. (36), or eq. (27)'s order.

He et al., Theorem 1 and Appendix B.2. At selection time in round ``t`` the learner has completed
``n = t - 1`` updates; eq. (36) is read with ``t -> n`` and its last line is a running sum kept in
the learner state (:func:`increment`). OFUL-MLogB uses the same formulas with ``rho = 0`` and
``m = K d`` (Theorem 2's remark: no truncation recovers OFUL-MLogB).

Readings that the text leaves open, chosen and tested here:
- ``ln Delta_t^{lam/2}`` in eq. (36) is read as ``ln(1 + rho/(lam/2))`` (Delta with lam -> lam/2).
- Eq. (27)'s ``ln^2 K`` vanishes at K = 1 and ``ln t`` at t = 1: the order form uses the
  appendix's refined ``ln(K+1) (ln(K+1) + ln(n+1))`` and ``ln(n+1)``.
- The running sum of eq. (36) can be negative when ``lam >= 24 eta K d`` (that is what makes the
  theorem work); the radius is clipped at 0.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

BETA_MODES = {"fixed": 0, "theory": 1, "order": 2}


def radius(
    hp,
    n: jax.Array,
    rho: jax.Array,
    acc: jax.Array,
    *,
    num_outcomes: int,
    dim: int,
    rank: int,
) -> jax.Array:
    """``beta`` for the next selection.

    Args:
      hp: :class:`~bandits_jax.mlogb.hyperparams.MLogBHyperparams` (scalars).
      n: completed updates (int32).
      rho: accumulated sketching error ``rho_{1:n}``.
      acc: running sum of eq. (36)'s last line.
      num_outcomes, dim: K and d. rank: ``m_eff`` (``K d`` for OFUL).
    """
    K, d, m = num_outcomes, dim, rank
    dtype = hp.lam.dtype
    n = n.astype(dtype)
    lam, eta, S, D = hp.lam, hp.eta, hp.S, hp.action_bound
    lnK1 = math.log(K + 1)
    delta_fac = 1.0 + rho / lam
    theory = (
        lam * S**2
        + 2.0
        * eta
        * (D * S + lnK1 + 2.0 * jnp.log((K + 1) * n + 2.0))
        * (1.25 + 4.0 * jnp.log(jnp.sqrt(1.0 + 2.0 * n) / hp.delta))
        + 2.0 * eta * (2.0 + lnK1)
        + (math.sqrt(6.0) * eta / (12.0 * K * d))
        * lam
        * delta_fac
        * (K * d * jnp.log1p(2.0 * rho / lam) + m * jnp.log1p(2.0 * D**2 * n / (m * lam)))
        + acc
    )
    order = (
        delta_fac
        * lnK1
        * (lnK1 + jnp.log1p(n))
        * (m * jnp.log1p(n) + K * d * jnp.log(delta_fac) - jnp.log(hp.delta))
    )
    beta = jnp.where(
        hp.beta_mode == BETA_MODES["fixed"],
        hp.beta,
        hp.beta * jnp.where(hp.beta_mode == BETA_MODES["theory"], theory, order),
    )
    return jnp.maximum(beta, 0.0)


def increment(
    hp, *, num_outcomes: int, dim: int, step_x_sq: jax.Array, step_z_sq: jax.Array
) -> jax.Array:
    """One term of eq. (36)'s last sum, ``2 sqrt(6) eta L S ||(W_{s+1} - W_s) x_s||^2
    + (24 eta K d / lam - 1) ||W_{s+1} - W_s||^2_{Z_s}``.
    """
    K, d = num_outcomes, dim
    return (
        2.0 * math.sqrt(6.0) * hp.eta * hp.lipschitz * hp.S * step_x_sq
        + (24.0 * hp.eta * K * d / hp.lam - 1.0) * step_z_sq
    )
