"""Greedy: the online-Newton estimate of OFUL-/EOFD-MLogB with no exploration bonus.

The ablation that tells what the optimism of eq. (10)/(16)/(19) buys. ``W_t`` is the base
learner's (eq. 8's online Newton step and Lemma 2's projection, with OFUL-MLogB's Hessian or
EOFD-MLogB's sketch); the choice maximises the estimate alone, ``w^T x`` (K = 1, eq. 16) or
``r^T sigma(W x)`` (eq. 19), at O(N K d): no ``A(x)``, no radius.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from bandits_jax.learner_base import Learner, fresh_state
from bandits_jax.mlogb import bonus, learner, model
from bandits_jax.mlogb.eofd import eofd
from bandits_jax.mlogb.hparams import MLogBHyperparams
from bandits_jax.mlogb.oful import oful


def greedy(
    *, num_outcomes: int, dim: int, sketch_size: int | None = None, **kwargs: Any
) -> Learner:
    """Greedy online-Newton MLogB learner.

    Args:
      sketch_size: ``None`` wraps :func:`~bandits_jax.mlogb.oful`, an int m
        :func:`~bandits_jax.mlogb.eofd` with that sketch size.
      **kwargs: passed to the base factory (e.g. ``max_newton_steps``).

    Returns:
      A :class:`~bandits_jax.learner_base.Learner` on the base learner's state and
      :func:`~bandits_jax.mlogb.hyperparams` (``beta`` unused, ``info.beta`` 0).
      ``score_parts`` returns ``(estimate, 0)``; ``scores`` the estimated reward.
    """
    K, d = learner.check_static(num_outcomes, dim, sketch_size)
    if sketch_size is None:
        inner = oful(num_outcomes=K, dim=d, **kwargs)
    else:
        inner = eofd(num_outcomes=K, dim=d, sketch_size=sketch_size, **kwargs)

    def init(hp: MLogBHyperparams):
        return fresh_state(inner.init(hp))

    def score_parts(state, actions: jax.Array) -> tuple[jax.Array, jax.Array]:
        learner.check_actions(actions, d)
        z = actions.astype(state.W.dtype) @ state.W.T  # (N, K) logits W x
        est = z[:, 0] if K == 1 else model.sigma(z) @ state.hparams.rewards
        return est, jnp.zeros_like(est)

    def update(state, x: jax.Array, y: jax.Array):
        new = inner.update(state, x, y)
        return new._replace(info=new.info._replace(beta=jnp.zeros_like(new.info.beta)))

    scores = functools.partial(bonus.optimistic_reward, K)  # R_t(x) from (estimate, 0)
    return learner.from_score_parts(K, d, init, score_parts, update, scores=scores)
