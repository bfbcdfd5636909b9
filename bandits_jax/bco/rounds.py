"""One round of BCO for the shared runner, and regret bookkeeping (BCO paper eq. 5.1, Theorem
1's regret, eqs. 1.1, 3.4, 3.5).

:func:`interact` gives the runner's step (as ``bandits_jax.mlogb.interact`` does; rounds are
scanned and trials vmapped by ``bandits_jax.sim.runner``) on a
:class:`bandits_jax.protocols.BCOEnv`. The loss charged in round ``t`` is the mean of the queried
values (``(f_t(x_t) + f_t(x'_t)) / 2`` for two-point learners, eq. 5.1).

Per-round metrics (:class:`BCOMetrics`, one scalar per round each): ``loss`` (charged),
``loss_centre`` (``f_t`` at the queries' centre ``w_t``; diagnostics only), ``comparator_loss``
(``f_t(v_t)``, the env's dynamic comparator), ``path`` (``||v_t - v_{t-1}||``), ``grad_var``
(``sup_x ||grad f_t(x) - grad f_{t-1}(x)||^2``, the summand of eq. 1.1; ``path`` and ``grad_var``
are 0 at the first round), ``min_loss_plus`` (``min_{X+} f_t``, for ``F_T``), ``in_domain``
(the queries lie in ``X``) and ``status`` (the learner's, after the update). Those that need the
env's analysis part (:class:`bandits_jax.protocols.BCOAnalysis`) are NaN without it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax.bco import domains as dom
from bandits_jax.sim.runner import StepFn
from bandits_jax.status import INACTIVE, is_failure

Array = jax.Array


class BCOMetrics(NamedTuple):
    """Per-round outputs of :func:`interact` (module docstring); one scalar per round each."""

    loss: Array
    loss_centre: Array
    comparator_loss: Array
    path: Array
    grad_var: Array
    min_loss_plus: Array
    in_domain: Array
    status: Array


class BCOSummary(NamedTuple):
    """Regret and problem quantities of one run (:func:`summarize`)."""

    regret: Array
    dynamic_regret: Array
    best_point_status: Array
    V_T: Array
    W_T: Array
    F_T: Array
    P_T: Array
    cum_loss: Array
    best_loss: Array
    num_failures: Array
    all_in_domain: Array


def interact(learner: Any, env: Any, *, analysis: bool | None = None) -> StepFn:
    """Returns ``step(learner_state, env_state, key) -> (learner_state, env_state, metrics)``:
    the learner's queries, their losses (``env.loss``), the update and :class:`BCOMetrics`.

    ``analysis``: whether the round records ``comparator_loss``, ``path``, ``grad_var`` and
    ``min_loss_plus`` (NaN when not); default: when ``env`` has ``comparator``,
    ``grad_variation`` and ``min_loss_plus``.
    """
    domain = env.domain
    scale = float(dom.outer_radius(domain))
    atol = 64 * float(jnp.finfo(dom.dtype_of(domain)).eps) * scale
    if analysis is None:
        analysis = _has_round_analysis(env)
    elif analysis and not _has_round_analysis(env):
        raise ValueError(
            "analysis: the environment has no comparator, grad_variation and min_loss_plus "
            "(bandits_jax.protocols.BCOAnalysis); pass analysis=False or leave it unset"
        )

    def step(learner_state, env_state, key):
        t = env_state.t
        query = learner.act(learner_state, None, key)
        points = query.points
        values = env.loss(env_state, t, points)
        new_state = learner.update(learner_state, query, values)
        loss = jnp.mean(values)
        if analysis:
            v_t = env.comparator(env_state, t)
            v_prev = env.comparator(env_state, jnp.maximum(t - 1, 0))
            comparator_loss = env.loss(env_state, t, v_t)
            path = jnp.where(t > 0, jnp.linalg.norm(v_t - v_prev), 0.0)
            grad_var = env.grad_variation(env_state, t)
            min_loss_plus = env.min_loss_plus(env_state, t)
        else:
            comparator_loss = path = grad_var = min_loss_plus = jnp.full_like(loss, jnp.nan)
        metrics = BCOMetrics(
            loss=loss,
            loss_centre=env.loss(env_state, t, jnp.mean(points, axis=0)),
            comparator_loss=comparator_loss,
            path=path,
            grad_var=grad_var,
            min_loss_plus=min_loss_plus,
            in_domain=jnp.all(dom.contains(domain, points, 0.0, atol)),
            status=new_state.status,
        )
        return new_state, env.step(env_state), metrics

    return step


def _has_round_analysis(env: Any) -> bool:
    return all(hasattr(env, n) for n in ("comparator", "grad_variation", "min_loss_plus"))


def hindsight_loss(env: Any, env_state0: Any, x: Array, num_rounds: int) -> Array:
    """``sum_{t < T} f_t(x)`` for a fixed point ``x`` (``env_state0`` is the initial state)."""
    ts = jnp.arange(num_rounds, dtype=jnp.int32)
    return jnp.sum(jax.vmap(lambda t: env.loss(env_state0, t, x))(ts))


def summarize(env: Any, env_state0: Any, metrics: BCOMetrics, num_rounds: int) -> BCOSummary:
    """Regret and problem quantities of ONE run (``vmap`` it over trials) from the env state it
    started from and its :func:`interact` metrics (leading axis ``num_rounds``, static).

    Returns:
      :class:`BCOSummary` of scalars: ``regret`` (static, vs ``argmin_X sum_t f_t``),
      ``dynamic_regret`` (eq. 5.1, vs the env's comparator), ``best_point_status``
      (``INACTIVE`` without ``best_fixed_point``), ``V_T`` (eq. 1.1), ``W_T`` (eq. 3.4), ``F_T``
      (eq. 3.5), ``P_T``, ``cum_loss``, ``best_loss``, ``num_failures`` (rounds whose status was
      a failure), ``all_in_domain``; NaN where the env lacks the analysis part they need.
    """
    cum = jnp.sum(metrics.loss)
    nan = jnp.full_like(cum, jnp.nan)
    if hasattr(env, "best_fixed_point"):
        x_star, status = env.best_fixed_point(env_state0, num_rounds)
        best = hindsight_loss(env, env_state0, x_star, num_rounds)
    else:
        status, best = jnp.asarray(INACTIVE, jnp.int32), nan
    grad_variance = getattr(env, "grad_variance", None)
    return BCOSummary(
        regret=cum - best,
        dynamic_regret=cum - jnp.sum(metrics.comparator_loss),
        best_point_status=status,
        V_T=jnp.sum(metrics.grad_var),
        W_T=nan if grad_variance is None else grad_variance(env_state0, num_rounds),
        F_T=best - jnp.sum(metrics.min_loss_plus),
        P_T=jnp.sum(metrics.path),
        cum_loss=cum,
        best_loss=best,
        num_failures=jnp.sum(is_failure(metrics.status)),
        all_in_domain=jnp.all(metrics.in_domain),
    )


def regret_curve(
    env: Any, env_state0: Any, metrics: BCOMetrics, horizons: tuple[int, ...]
) -> Array:
    """Static regret of the first ``T_k`` rounds (its own best fixed point) for each ``T_k``."""
    out = []
    for T in horizons:
        x_star, _ = env.best_fixed_point(env_state0, T)
        out.append(jnp.sum(metrics.loss[:T]) - hindsight_loss(env, env_state0, x_star, T))
    return jnp.stack(out)
