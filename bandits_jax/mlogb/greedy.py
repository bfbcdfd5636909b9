"""Greedy: the online-Newton estimate of OFUL-/EOFD-MLogB with no exploration bonus.

The ablation that tells what the optimism of eq. (10)/(16)/(19) buys. The estimate ``W_t`` is
exactly the base learner's (the same ``init``, ``update`` and hyperparameters: eq. 8's online
Newton step and Lemma 2's projection, with the full Hessian of OFUL-MLogB or the sketch of
EOFD-MLogB); the choice maximises the estimate part alone:
``w^T x`` for K = 1 (eq. 16 without the bonus) and ``r^T sigma(W x)`` for K >= 2 (eq. 19 without
the two bonus terms). Scoring needs neither Lemma 1's ``A(x)`` nor the radius, so it costs
O(N K d) instead of the base learner's O(N K d m) (EOFD) or O(D^3 + N K D^2) (OFUL).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from bandits_jax.learner_base import Learner, fresh_state
from bandits_jax.mlogb import bonus, model
from bandits_jax.mlogb.eofd import eofd
from bandits_jax.mlogb.hparams import MLogBHyperparams
from bandits_jax.mlogb.learner import (
    check_actions,
    check_static,
    from_score_parts,
)
from bandits_jax.mlogb.oful import oful


def greedy(
    *, num_outcomes: int, dim: int, sketch_size: int | None = None, **kwargs: Any
) -> Learner:
    """Greedy online-Newton MLogB learner.

    Args:
      num_outcomes: K >= 1; dim: d.
      sketch_size: ``None`` wraps :func:`~bandits_jax.mlogb.oful` (full Hessian); an int m wraps
        :func:`~bandits_jax.mlogb.eofd` with that sketch size.
      **kwargs: passed to the base factory unchanged (e.g. ``max_newton_steps``).

    Returns:
      An :class:`~bandits_jax.learner_base.Learner` whose ``init`` takes
      :func:`~bandits_jax.mlogb.hyperparams` (``beta`` is not used) and whose state is the base
      learner's state. ``score_parts`` returns ``(estimate, 0)``; ``scores`` the estimated reward
      (``sigmoid(w^T x)`` for K = 1). ``info.beta`` is 0 (no radius is used at selection); the
      other ``info`` fields are the base update's (projection diagnostics, ``NONFINITE`` when a
      non-finite update was rejected).
    """
    K, d = check_static(num_outcomes, dim, sketch_size)
    if sketch_size is None:
        base = oful(num_outcomes=K, dim=d, **kwargs)
    else:
        base = eofd(num_outcomes=K, dim=d, sketch_size=sketch_size, **kwargs)

    def init(hp: MLogBHyperparams):
        return fresh_state(base.init(hp))

    def score_parts(state, actions: jax.Array) -> tuple[jax.Array, jax.Array]:
        check_actions(actions, d)
        z = actions.astype(state.W.dtype) @ state.W.T  # (N, K) logits W x
        est = z[:, 0] if K == 1 else model.sigma(z) @ state.hparams.rewards
        return est, jnp.zeros_like(est)

    def update(state, x: jax.Array, y: jax.Array):
        new = base.update(state, x, y)
        return new._replace(info=new.info._replace(beta=jnp.zeros_like(new.info.beta)))

    scores = functools.partial(bonus.optimistic_reward, K)  # R_t(x) from (estimate, 0)
    return from_score_parts(K, d, init, score_parts, update, scores=scores)
