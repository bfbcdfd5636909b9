"""One MLogB round as the runner's step function, with regret and diagnostics.

He et al., Algorithm 2's loop body and the regret of eq. (2). An MLogB environment is a NamedTuple
of pure functions ``init(key)``, ``observe(env_state, key) -> (env_state, actions, mask)``,
``outcome(env_state, x, key) -> y`` and ``expected_rewards(env_state, actions) -> (N,)``.

The round comes in the runner's two halves (:class:`bandits_jax.sim.runner.SplitStep`):
:func:`draw_round`, the environment's action set (it does not depend on the learner), and
:func:`respond_round`, the learner's choice, the outcome, the update and the metrics.
:func:`interact` is their composition, one step function.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax.mlogb import bonus
from bandits_jax.mlogb.learner import MLogBLearner
from bandits_jax.sim.runner import SplitStep


class MLogBMetrics(NamedTuple):
    """Per-round outputs of :func:`interact`.

    Attributes:
      regret: expected regret ``max_x r.sigma(W* x) - r.sigma(W* x_t)`` (eq. 2).
      reward: expected reward of the chosen action.
      choice: index of the chosen action; y: the observed outcome.
      rho: the learner's accumulated sketching error after the update (0 for OFUL).
      beta: confidence radius used at selection.
      projected, newton_steps, status: Lemma 2 projection diagnostics of the update.
      bonus_spread, estimate_spread: max - min over the action set of the optimistic bonus and of
        the estimate (selection-index space). Their ratio tells whether exploration can change a
        decision: a tiny ratio means the learner is effectively greedy.
      explored: whether the optimistic choice differs from the greedy choice (argmax of the
        estimate alone): the direct measure of exploration of which the spread ratio is a proxy.
      select_status: status code of the selection (:mod:`bandits_jax.status`; ``NAN_SCORES``:
        some valid score was NaN and not chosen; ``EMPTY_MASK``: no valid action, the round is
        void).
      rank: the active sketch rank after the update (EOFD; grows with an adaptive sketch size),
        -1 for learners without a sketch.
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


def _spread(v: jax.Array, mask: jax.Array) -> jax.Array:
    return jnp.max(jnp.where(mask, v, -jnp.inf)) - jnp.min(jnp.where(mask, v, jnp.inf))


class MLogBRound(NamedTuple):
    """What :func:`draw_round` hands to :func:`respond_round`: the environment state after
    ``observe`` (``env``), the action set ``actions`` (N, d) and ``mask`` (N,), the actions'
    expected rewards ``expected`` (N,) and the best of them ``best`` (eq. 2), and the key of the
    outcome (``key``)."""

    env: Any
    actions: jax.Array
    mask: jax.Array
    expected: jax.Array
    best: jax.Array
    key: jax.Array


def draw_round(env: Any):
    """Returns ``draw(env_state, key) -> (env_state, MLogBRound)``: the round's action set and
    what the regret needs of it."""

    def draw(es, key):
        k_obs, k_out = jax.random.split(key)
        es, actions, mask = env.observe(es, k_obs)
        exp_r = env.expected_rewards(es, actions)
        best = jnp.max(jnp.where(mask, exp_r, -jnp.inf))
        return es, MLogBRound(es, actions, mask, exp_r, best, k_out)

    return draw


def respond_round(learner: MLogBLearner, env: Any):
    """Returns ``respond(learner_state, MLogBRound) -> (learner_state, MLogBMetrics)``: the
    optimistic choice, its outcome (``env.outcome``), the update and the regret of eq. (2)."""

    def respond(ls, rnd: MLogBRound):
        es, actions, mask = rnd.env, rnd.actions, rnd.mask
        est, bon = learner.score_parts(ls, actions)
        idx, select_status = bonus.select_index(est + bon, mask)
        x = actions[idx]
        y = env.outcome(es, x, rnd.key)
        exp_r, best = rnd.expected, rnd.best
        ls_new = learner.update(ls, x, y)
        info = ls_new.info
        metrics = MLogBMetrics(
            regret=best - exp_r[idx],
            reward=exp_r[idx],
            choice=idx,
            y=y,
            rho=ls_new.rho,
            beta=info.beta,
            projected=info.projected,
            newton_steps=info.newton_steps,
            status=info.status,
            bonus_spread=_spread(bon, mask),
            estimate_spread=_spread(est, mask),
            explored=idx != bonus.argmax_tie(est, mask),
            select_status=select_status,
            rank=getattr(ls_new, "rank", jnp.full((), -1, jnp.int32)),
        )
        return ls_new, metrics

    return respond


def interact(learner: MLogBLearner, env: Any) -> SplitStep:
    """Returns ``step(learner_state, env_state, key) -> (learner_state, env_state, metrics)``,
    a :class:`~bandits_jax.sim.runner.SplitStep` of :func:`draw_round` and
    :func:`respond_round`."""
    return SplitStep(draw_round(env), respond_round(learner, env))
