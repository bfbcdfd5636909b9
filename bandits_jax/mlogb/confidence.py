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

Robust regularisation (``regularization="robust"``, Robust Frequent Directions, Luo et al. 2019):
``Z_t = (lam + rho_{1:t-1}/2) I + G_t`` with ``G_t = V_t diag(mu_t) V_t^T`` instead of
``lam I + G_t``. With ``H_t = lam I + M_t`` and FD's ``G_t <= M_t <= G_t + rho I`` the sketch
error becomes two-sided, ``Z_t - rho/2 I <= H_t <= Z_t + rho/2 I``, and in the proof of
Theorem 1 (Appendix B.2): Lemma 5/12's factor is ``Delta_Z = (lam + rho)/(lam + rho/2) < 2``
in front of eq. (36)'s third line and of eq. (27); Lemma 6/13's ``log det H`` terms are
unchanged; Lemma 9 uses only ``Z_s >= lam I``, so the eq. (36) increment keeps
``24 eta K d / lam`` with the norm of the robust ``Z_s`` the step was taken in (before that
round's truncation); the telescoping after (34) loses at most ``2 S^2 sigma2_t`` a step, so the
theory radius gains ``+ 2 S^2 rho_{1:n}`` (order form ``+ 2 rho/lam``). The robust
``Delta_t = 1 + rho/(2 lam)`` (:func:`delta_factor`) satisfies ``Z <= Delta H`` and
``H <= Delta Z``. Each step derived: ``beta`` of
:class:`references.eofd_variants_numpy.NumpyEOFDVariant`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

BETA_MODES = {"fixed": 0, "theory": 1, "order": 2}
REGULARIZATIONS = ("paper", "robust")


def check_regularization(regularization: object) -> bool:
    """Eager validation; returns True for the robust variant."""
    if not isinstance(regularization, str) or regularization not in REGULARIZATIONS:
        raise ValueError(f"regularization must be one of {REGULARIZATIONS}, got {regularization!r}")
    return regularization == "robust"


def delta_factor(rho: jax.Array, lam: jax.Array, robust: bool | jax.Array) -> jax.Array:
    """The sketching factor ``Delta_t``: ``1 + rho/lam`` (paper), ``1 + rho/(2 lam)`` (robust;
    ``robust`` may be a traced bool)."""
    return 1.0 + rho / jnp.where(robust, 2.0 * lam, lam)


def discard_budget(
    rho: jax.Array, lam: jax.Array, target: float, robust: bool | jax.Array
) -> jax.Array:
    """Largest mass one truncation may discard so that :func:`delta_factor` stays <= target."""
    return jnp.where(robust, 2.0 * lam, lam) * (target - 1.0) - rho


def radius(
    hp,
    n: jax.Array,
    rho: jax.Array,
    acc: jax.Array,
    *,
    num_outcomes: int,
    dim: int,
    rank: int | jax.Array,
    robust: bool | jax.Array = False,
) -> jax.Array:
    """``beta`` for the next selection.

    Args:
      hp: :class:`~bandits_jax.mlogb.hparams.MLogBHyperparams` (scalars).
      n: completed updates (int32).
      rho: accumulated sketching error ``rho_{1:n}``.
      acc: running sum of eq. (36)'s last line.
      num_outcomes, dim: K and d. rank: ``m_eff`` (``K d`` for OFUL), or the active rank of an
        adaptive sketch (an int32 array; Lemma 6 holds with the rank of ``G_t``).
      robust: the robust regularisation (module docstring): ``Delta_Z`` in front of the sketch
        terms and the telescoping defect ``2 S^2 rho`` (order form ``2 rho/lam``); a Python or a
        traced bool (both branches are formed and one is selected).
    """
    K, d, m = num_outcomes, dim, rank
    dtype = hp.lam.dtype
    n = n.astype(dtype)
    lam, eta, S, D = hp.lam, hp.eta, hp.S, hp.action_bound
    lnK1 = math.log(K + 1)
    if not isinstance(m, int):
        m = jnp.asarray(m).astype(dtype)

    def factors():
        delta_fac = 1.0 + rho / lam
        # Lemma 5/12's factor (Z^{-1} <= front H^{-1}); Lemma 6's ln(1 + rho/lam) stays.
        return delta_fac, jnp.where(robust, (lam + rho) / (lam + 0.5 * rho), delta_fac)

    def fixed():
        return hp.beta

    def theory():
        _, front = factors()
        value = (
            lam * S**2
            + 2.0
            * eta
            * (D * S + lnK1 + 2.0 * jnp.log((K + 1) * n + 2.0))
            * (1.25 + 4.0 * jnp.log(jnp.sqrt(1.0 + 2.0 * n) / hp.delta))
            + 2.0 * eta * (2.0 + lnK1)
            + (math.sqrt(6.0) * eta / (12.0 * K * d))
            * lam
            * front
            * (K * d * jnp.log1p(2.0 * rho / lam) + m * jnp.log1p(2.0 * D**2 * n / (m * lam)))
            + acc
        )
        return hp.beta * jnp.where(robust, value + 2.0 * S**2 * rho, value)

    def order():
        delta_fac, front = factors()
        value = (
            front
            * lnK1
            * (lnK1 + jnp.log1p(n))
            * (m * jnp.log1p(n) + K * d * jnp.log(delta_fac) - jnp.log(hp.delta))
        )
        return hp.beta * jnp.where(robust, value + 2.0 * rho / lam, value)

    # One branch per mode: each formula's hyperparameter-only parts stay in its branch, where a
    # scan over rounds cannot hoist them out of the loop one kernel each (a compile-time cost),
    # and a fixed radius computes nothing per round.
    branches = {"fixed": fixed, "theory": theory, "order": order}
    beta = lax.switch(hp.beta_mode, [branches[k] for k in sorted(BETA_MODES, key=BETA_MODES.get)])
    return jnp.maximum(beta, 0.0)


def increment(
    hp, *, num_outcomes: int, dim: int, step_x_sq: jax.Array, step_z_sq: jax.Array
) -> jax.Array:
    """One term of eq. (36)'s last sum, ``2 sqrt(6) eta L S ||(W_{s+1} - W_s) x_s||^2
    + (24 eta K d / lam - 1) ||W_{s+1} - W_s||^2_{Z_s}``.

    ``step_z_sq`` is in the norm of the ``Z_s`` the step of round s was taken in (robust: with
    ``alpha_s = rho_{1:s-1}/2``); the coefficient keeps ``lam`` (Lemma 9 needs ``Z_s >= lam I``).
    """
    K, d = num_outcomes, dim
    return (
        2.0 * math.sqrt(6.0) * hp.eta * hp.lipschitz * hp.S * step_x_sq
        + (24.0 * hp.eta * K * d / hp.lam - 1.0) * step_z_sq
    )
