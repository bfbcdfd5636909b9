"""Meta-learners of the online ensembles: Optimistic-Hedge and Optimistic-Adapt-ML-Prod.

Paper: BCO with gradient variation, Appendix E.1 (eq. E.3, Lemma 15; Algorithm 5) and Appendix
E.2 (eq. E.7-E.9, Lemma 20; Algorithm 6).

Each is split for Algorithm 6's fixed point: ``observe(state, feedback)`` folds in round ``t``'s
feedback with the stored optimism ``m_t``; ``predict(state, m_{t+1})`` stores ``p_{t+1}`` and
``m_{t+1}``; ``*_weights(state, m)`` is the same map without storing anything.

Optimistic-Hedge (E.3): ``p_{t+1} ∝ exp(-eps_t (L_t + m_{t+1}))``, ``L_t = sum_{s<=t} l_s``, with
Lemma 15's ``eps_t = sqrt(ln N / (C0^2 + sum_{s<=t} ||l_s - m_s||_inf^2))`` (Theorem 9 sums to
``t - 1``; errata 16). ``N = 1`` gives ``eps = 0`` and ``p = 1``.

Optimistic-Adapt-ML-Prod (E.7-E.9), in log potentials ``log W`` for range safety:

    log W_t   = (eps_t / eps_{t-1}) (log W_{t-1} + eps_{t-1} r_t - eps_{t-1}^2 (r_t - m_t)^2),
    p_{t+1}   ∝ eps_t exp(eps_t m_{t+1}) W_t,
    eps_t     = min(1/8, sqrt(log N / sum_{s<=t} (r_s - m_s)^2)).

E.9 divides by zero before any error has accrued; its limit ``eps = 1/8`` is used (errata 17),
written with ``jnp.where`` so that no ``inf``/``nan`` is formed. ``N >= 2`` is required.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax import checks

Array = jax.Array


def _start(num_experts, minimum: int, name: str, value, dtype) -> tuple[Array, dict]:
    """The start shared by both meta-learners: checks ``num_experts >= minimum`` and the positive
    scalar hyperparameter ``name``; returns it as an array of ``dtype`` (default: its own dtype
    if floating, else JAX's default float) and the fields ``p_1`` (uniform), ``m_1``, ``t``."""
    checks.check_int("num_experts", num_experts, minimum)
    if dtype is None:
        dtype = jnp.result_type(float, value)
    value = jnp.asarray(value, dtype)
    checks.check_float(name, value, shape=())
    return checks.fresh(value), dict(
        weights=jnp.full((num_experts,), 1.0 / num_experts, dtype),
        optimism=jnp.zeros((num_experts,), dtype),
        t=jnp.zeros((), jnp.int32),
    )


def _vector(name: str, x, state) -> Array:
    """``x`` as an ``(N,)`` array of the state's dtype (``N`` experts), checked eagerly."""
    x = jnp.asarray(x, state.optimism.dtype)
    n = state.weights.shape[0]
    if x.shape != (n,):
        raise ValueError(f"{name}: expected shape ({n},), got {x.shape}")
    return x


# --- Optimistic-Hedge (E.3, Lemma 15) --------------------------------------------------------


class OptimisticHedgeState(NamedTuple):
    """State of Optimistic-Hedge before round ``t``.

    Attributes:
      weights: ``p_t`` (N,).
      optimism: ``m_t`` (N,), the hint that produced ``p_t``.
      cum_loss: ``L_{t-1} = sum_{s<t} l_s`` (N,).
      err_sq_sum: ``sum_{s<t} ||l_s - m_s||_inf^2`` (scalar).
      lr: the learning rate that produced ``p_t`` (``eps_{t-1}``; Lemma 15).
      c0: the constant ``C0 > 0`` of Lemma 15 (hyperparameter).
      t: rounds observed (int32).
    """

    weights: Array
    optimism: Array
    cum_loss: Array
    err_sq_sum: Array
    lr: Array
    c0: Array
    t: Array


def hedge_learning_rate(num_experts: int, c0: Array, err_sq_sum: Array) -> Array:
    """Lemma 15: ``sqrt(ln N / (C0^2 + sum ||l_s - m_s||_inf^2))``."""
    return jnp.sqrt(math.log(num_experts) / (c0**2 + err_sq_sum))


def optimistic_hedge_init(num_experts: int, c0, *, dtype=None) -> OptimisticHedgeState:
    """Uniform ``p_1`` with ``m_1 = 0`` over ``N = num_experts >= 1`` experts (static), with
    ``C0 = c0 > 0`` (Theorem 9: ``16 R^2 L sqrt(d^3 log(dT) ln N)``); ``dtype`` defaults to that
    of ``c0`` if floating, else JAX's default float. Raises ``ValueError`` naming the argument.
    """
    c0, common = _start(num_experts, 1, "c0", c0, dtype)
    zero = jnp.zeros((), c0.dtype)
    return OptimisticHedgeState(
        **common,
        cum_loss=jnp.zeros((num_experts,), c0.dtype),
        err_sq_sum=zero,
        lr=hedge_learning_rate(num_experts, c0, zero),
        c0=c0,
    )


def optimistic_hedge_observe(state: OptimisticHedgeState, losses: Array) -> OptimisticHedgeState:
    """Folds in ``l_t`` (N,): ``L_t = L_{t-1} + l_t`` and the error ``||l_t - m_t||_inf^2``."""
    losses = _vector("losses", losses, state)
    err = jnp.max(jnp.abs(losses - state.optimism)) ** 2
    return state._replace(
        cum_loss=state.cum_loss + losses, err_sq_sum=state.err_sq_sum + err, t=state.t + 1
    )


def optimistic_hedge_weights(state: OptimisticHedgeState, optimism: Array) -> tuple[Array, Array]:
    """``(p, eps)`` with ``p ∝ exp(-eps (L + m))`` for the hint ``m``; nothing stored (E.3)."""
    n = state.weights.shape[0]
    lr = hedge_learning_rate(n, state.c0, state.err_sq_sum)
    return jax.nn.softmax(-lr * (state.cum_loss + optimism)), lr


def optimistic_hedge_predict(state: OptimisticHedgeState, optimism: Array) -> OptimisticHedgeState:
    """Stores ``p_{t+1}`` (E.3) and ``m_{t+1}``."""
    optimism = _vector("optimism", optimism, state)
    p, lr = optimistic_hedge_weights(state, optimism)
    return state._replace(weights=p, optimism=optimism, lr=lr)


# --- Optimistic-Adapt-ML-Prod (E.7-E.9, Lemma 20) --------------------------------------------


class AdaptMLProdState(NamedTuple):
    """State of Optimistic-Adapt-ML-Prod before round ``t``.

    Attributes:
      weights: ``p_t`` (N,).
      optimism: ``m_t`` (N,).
      log_potential: ``log W_{t-1}`` (N,), ``log W_0 = -log N``.
      lr: ``eps_{t-1}`` (N,), ``eps_0 = lr_cap``.
      err_sq_sum: ``sum_{s<t} (r_s - m_s)^2`` (N,).
      lr_cap: the cap ``1/8`` of E.9 (hyperparameter).
      t: rounds observed (int32).
    """

    weights: Array
    optimism: Array
    log_potential: Array
    lr: Array
    err_sq_sum: Array
    lr_cap: Array
    t: Array


def adapt_ml_prod_learning_rate(num_experts: int, lr_cap: Array, err_sq_sum: Array) -> Array:
    """E.9 with the ``t = 0`` fix: ``lr_cap`` where ``sum (r - m)^2 = 0`` (module docstring)."""
    positive = err_sq_sum > 0
    safe = jnp.where(positive, err_sq_sum, 1.0)
    return jnp.where(positive, jnp.minimum(lr_cap, jnp.sqrt(math.log(num_experts) / safe)), lr_cap)


def adapt_ml_prod_init(num_experts: int, *, lr_cap=0.125, dtype=None) -> AdaptMLProdState:
    """``W_0 = 1/N``, ``m_1 = 0``, hence uniform ``p_1``, over ``N = num_experts >= 2`` experts
    (static); ``lr_cap`` is E.9's cap (``1/8`` in the paper, which Lemma 20 needs; any positive
    value is accepted). Raises ``ValueError`` naming the argument.
    """
    cap, common = _start(num_experts, 2, "lr_cap", lr_cap, dtype)
    return AdaptMLProdState(
        **common,
        log_potential=jnp.full((num_experts,), -math.log(num_experts), cap.dtype),
        lr=jnp.full((num_experts,), cap),
        err_sq_sum=jnp.zeros((num_experts,), cap.dtype),
        lr_cap=cap,
    )


def adapt_ml_prod_observe(state: AdaptMLProdState, regrets: Array) -> AdaptMLProdState:
    """Folds in ``r_t`` (N,) with the stored ``m_t``: E.9's ``eps_t`` and E.7's ``W_t``."""
    r = _vector("regrets", regrets, state)
    err = (r - state.optimism) ** 2
    err_sq_sum = state.err_sq_sum + err
    lr_prev = state.lr
    lr = adapt_ml_prod_learning_rate(r.shape[0], state.lr_cap, err_sq_sum)
    log_w = (lr / lr_prev) * (state.log_potential + lr_prev * r - lr_prev**2 * err)
    return state._replace(log_potential=log_w, lr=lr, err_sq_sum=err_sq_sum, t=state.t + 1)


def adapt_ml_prod_weights(state: AdaptMLProdState, optimism: Array) -> Array:
    """``p ∝ eps exp(eps m) W`` (E.7) for the hint ``m``; nothing stored."""
    return jax.nn.softmax(jnp.log(state.lr) + state.lr * optimism + state.log_potential)


def adapt_ml_prod_predict(state: AdaptMLProdState, optimism: Array) -> AdaptMLProdState:
    """Stores ``p_{t+1}`` (E.7) and ``m_{t+1}``."""
    optimism = _vector("optimism", optimism, state)
    return state._replace(weights=adapt_ml_prod_weights(state, optimism), optimism=optimism)
