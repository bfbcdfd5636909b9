"""One MLogB round as the runner's step function, with regret and diagnostics.

He et al., Algorithm 2's loop body and the regret of eq. (2). An MLogB environment is a NamedTuple
of pure functions ``init(key)``, ``observe(env_state, key) -> (env_state, actions, mask)``,
``outcome(env_state, x, key) -> y`` and ``expected_rewards(env_state, actions) -> (N,)``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax.learner_base import Learner
from bandits_jax.mlogb.learner import empty_info
from bandits_jax.protocols import WithSketchError, WithSketchRank, WithUpdateInfo


class MLogBMetrics(NamedTuple):
    """Per-round outputs of :func:`interact`.

    Attributes:
      regret: expected regret ``max_x r.sigma(W* x) - r.sigma(W* x_t)`` (eq. 2).
      reward: expected reward of the choice. choice: its index. y: the observed outcome.
      rho: the learner's accumulated sketching error after the update (0 without a sketch).
      beta: confidence radius used at selection (NaN for a learner without one).
      projected, newton_steps, status: Lemma 2 projection diagnostics of the update.
      bonus_spread, estimate_spread, explored: as in :class:`~bandits_jax.mlogb.learner.Choice`.
      select_status: status code of the selection (:mod:`bandits_jax.status`).
      rank: the active sketch rank after the update (EOFD), -1 without a sketch.
    """

    regret: jax.Array
    reward: jax.Array
    choice: jax.Array
    y: jax.Array
    rho: jax.Array
    beta: jax.Array
    projected: jax.Array
    newton_steps: jax.Array
    status: jax.Array
    bonus_spread: jax.Array
    estimate_spread: jax.Array
    explored: jax.Array
    select_status: jax.Array
    rank: jax.Array


def interact(learner: Learner, env: Any):
    """Returns ``step(learner_state, env_state, key) -> (learner_state, env_state, metrics)``:
    the round's action set (``env.observe``), the learner's choice (``act``), its outcome
    (``env.outcome``), the update and the regret of eq. (2) (:class:`MLogBMetrics`)."""

    def step(ls, es, key):
        k_obs, k_out = jax.random.split(key)
        es, actions, mask = env.observe(es, k_obs)
        exp_r = env.expected_rewards(es, actions)
        best = jnp.max(jnp.where(mask, exp_r, -jnp.inf))
        choice = learner.act(ls, (actions, mask), jax.random.fold_in(key, 2))
        y = env.outcome(es, choice.x, k_out)
        ls_new = learner.update(ls, choice, y)
        if isinstance(ls_new, WithUpdateInfo):
            info = ls_new.info
        else:  # a learner without a radius or projection
            info = empty_info(exp_r.dtype)._replace(beta=jnp.full((), jnp.nan, exp_r.dtype))
        idx = choice.index
        metrics = MLogBMetrics(
            regret=best - exp_r[idx],
            reward=exp_r[idx],
            choice=idx,
            y=y,
            rho=ls_new.rho if isinstance(ls_new, WithSketchError) else jnp.zeros((), exp_r.dtype),
            beta=info.beta,
            projected=info.projected,
            newton_steps=info.newton_steps,
            status=ls_new.status,
            bonus_spread=choice.bonus_spread,
            estimate_spread=choice.estimate_spread,
            explored=choice.explored,
            select_status=choice.status,
            rank=ls_new.rank if isinstance(ls_new, WithSketchRank) else jnp.full((), -1, jnp.int32),
        )
        return ls_new, es, metrics

    return step
