"""Confidence radius ``beta_t`` of EOFD-MLogB: fixed, Theorem 1's eq. (36), or eq. (27)'s order.

He et al., Theorem 1 and Appendix B.2. At selection in round ``t`` the learner has completed
``n = t - 1`` updates; eq. (36) is read with ``t -> n`` and its last line is a running sum kept in
the state (:func:`increment`). OFUL-MLogB uses ``rho = 0`` and ``m = K d`` (Theorem 2's remark).
Readings of the text: ``ln Delta_t^{lam/2}`` is ``ln(1 + rho/(lam/2))``; eq. (27)'s ``ln^2 K`` and
``ln t`` become the appendix's ``ln(K+1) (ln(K+1) + ln(n+1))`` and ``ln(n+1)``; the running sum
can be negative when ``lam >= 24 eta K d``, so the radius is clipped at 0.

Robust regularisation (Robust Frequent Directions, Luo et al. 2019):
``Z_t = (lam + rho_{1:t-1}/2) I + V_t diag(mu_t) V_t^T``. FD's ``G_t <= M_t <= G_t + rho I`` makes
the error two-sided, ``Z_t - rho/2 I <= H_t <= Z_t + rho/2 I``, so in Appendix B.2 Lemma 5/12's
factor is ``Delta_Z = (lam + rho)/(lam + rho/2) < 2`` (eq. 36's third line, eq. 27), Lemma 6/13
and Lemma 9 are unchanged (the increment keeps ``24 eta K d / lam`` in the robust ``Z_s``'s
norm), and the telescoping after (34) adds ``2 S^2 rho_{1:n}`` (order form ``2 rho/lam``);
``Delta_t = 1 + rho/(2 lam)`` (:func:`delta_factor`). Each step is derived in
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
    """``beta`` for the next selection after ``n`` updates (int32), with the sketching error
    ``rho = rho_{1:n}``, eq. (36)'s running sum ``acc``, the sketch ``rank`` (``K d`` for OFUL; an
    int32 array for an adaptive sketch: Lemma 6 holds with the rank of ``G_t``) and the robust
    regularisation (module docstring; a Python or traced bool)."""
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

    # One branch per mode: a fixed radius computes nothing per round, and a scan cannot hoist
    # each formula's hyperparameter-only parts out of its loop one kernel each.
    branches = {"fixed": fixed, "theory": theory, "order": order}
    beta = lax.switch(hp.beta_mode, [branches[k] for k in sorted(BETA_MODES, key=BETA_MODES.get)])
    return jnp.maximum(beta, 0.0)


def increment(
    hp, *, num_outcomes: int, dim: int, step_x_sq: jax.Array, step_z_sq: jax.Array
) -> jax.Array:
    """One term of eq. (36)'s last sum, ``2 sqrt(6) eta L S ||(W_{s+1} - W_s) x_s||^2
    + (24 eta K d / lam - 1) ||W_{s+1} - W_s||^2_{Z_s}``, in the norm of the ``Z_s`` the step was
    taken in (robust too); the coefficient keeps ``lam`` (Lemma 9 needs ``Z_s >= lam I``)."""
    K, d = num_outcomes, dim
    return (
        2.0 * math.sqrt(6.0) * hp.eta * hp.lipschitz * hp.S * step_x_sq
        + (24.0 * hp.eta * K * d / hp.lam - 1.0) * step_z_sq
    )
