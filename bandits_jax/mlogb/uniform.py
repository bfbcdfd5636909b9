"""Uniform random choice: the floor every MLogB learner must beat.

A :class:`~bandits_jax.learner_base.Learner` that ignores what it observes and picks an
action uniformly at random among the valid (masked) ones. The protocol's ``score_parts`` and
``select`` take no key, so the state carries one: the estimate part of the scores is a vector of
i.i.d. uniforms drawn from the state's key (the bonus part is 0), so the runner's
``argmax_tie(estimate + bonus, mask)`` is the argmax of i.i.d. continuous draws restricted to the
mask, i.e. a uniform choice among valid actions (an action with a non-finite entry scores NaN,
as with every learner). ``update`` advances the key, so each round draws afresh; ``select``
called twice on the same state returns the same action.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.learner_base import Learner, accept, fresh_state, no_failures
from bandits_jax.mlogb.hparams import check_rewards
from bandits_jax.mlogb.learner import (
    check_actions,
    check_hparams,
    check_static,
    check_update_args,
    from_score_parts,
)


class UniformHyperparams(NamedTuple):
    """Hyperparameters of :func:`uniform` (leading axes, if any, are grid axes).

    Attributes:
      seed: uint32 seed of the state's PRNG key.
      rewards: (..., K) outcome rewards (unused by the choice; they fix K and the float dtype, and
        keep the field every MLogB hyperparameter set has).
    """

    seed: jax.Array
    rewards: jax.Array


class UniformState(NamedTuple):
    """State of :func:`uniform`.

    Attributes:
      key: raw PRNG key data (``jax.random.key_data``) of the next round's draw.
      t: completed updates (int32). hparams: :class:`UniformHyperparams`.
      status, num_failures: the last update's status and the rejected updates so far.
    """

    key: jax.Array
    t: jax.Array
    hparams: UniformHyperparams
    status: jax.Array
    num_failures: jax.Array


def uniform_hyperparams(*, seed=0, rewards=None, dtype=None) -> UniformHyperparams:
    """Builds :class:`UniformHyperparams`, validated eagerly.

    Args:
      seed: an int in ``[0, 2**32)`` or an int array of them (a grid of seeds).
      rewards: (K,) or (..., K) non-negative rewards; ``None`` means ``[1.]`` (K = 1).
      dtype: floating dtype of the state (default: JAX's default float).

    Raises:
      ValueError: naming the offending argument.
    """
    dtype = jnp.dtype(dtype) if dtype is not None else jnp.zeros(()).dtype
    s = np.asarray(seed)
    if not np.issubdtype(s.dtype, np.integer) or np.any(s < 0) or np.any(s >= 2**32):
        raise ValueError(f"seed must be an int (or int array) in [0, 2**32), got {seed!r}")
    r = check_rewards(rewards)
    batch = np.broadcast_shapes(s.shape, r.shape[:-1])
    return UniformHyperparams(
        seed=jnp.asarray(np.broadcast_to(s, batch), jnp.uint32),
        rewards=jnp.asarray(np.broadcast_to(r, batch + r.shape[-1:]), dtype),
    )


def uniform(*, num_outcomes: int, dim: int) -> Learner:
    """Uniform random choice among the valid actions.

    Args:
      num_outcomes: K >= 1; dim: d >= 1.

    Returns:
      An :class:`~bandits_jax.learner_base.Learner` whose ``init`` takes
      :func:`uniform_hyperparams`. ``score_parts`` returns ``(u, 0)`` with ``u`` i.i.d. uniforms
      on [0, 1) from the state's key; ``scores`` returns ``u``.
    """
    K, d = check_static(num_outcomes, dim)

    def init(hp: UniformHyperparams) -> UniformState:
        check_hparams(hp, K, ("seed",))
        state = UniformState(
            key=jax.random.key_data(jax.random.key(hp.seed)),
            t=jnp.zeros((), jnp.int32),
            hparams=hp,
            **no_failures(),
        )
        return fresh_state(state)

    def score_parts(state: UniformState, actions: jax.Array) -> tuple[jax.Array, jax.Array]:
        check_actions(actions, d)
        _, sub = jax.random.split(jax.random.wrap_key_data(state.key))
        u = jax.random.uniform(sub, (actions.shape[0],), state.hparams.rewards.dtype)
        # A non-finite action scores NaN, as with every other learner: never chosen over a valid
        # one, and flagged by select (under jit; a ValueError eagerly).
        u = jnp.where(jnp.all(jnp.isfinite(actions), axis=1), u, jnp.nan)
        return u, jnp.zeros_like(u)

    def update(state: UniformState, x: jax.Array, y: jax.Array) -> UniformState:
        check_update_args(x, y, K, d)
        # x plays no part in the choice, but a non-finite one is still rejected, as everywhere.
        nxt, _ = jax.random.split(jax.random.wrap_key_data(state.key))
        new = state._replace(key=jax.random.key_data(nxt), t=state.t + 1)
        return accept(state, new, jnp.all(jnp.isfinite(x)))

    return from_score_parts(
        K,
        d,
        init,
        score_parts,
        update,
        scores=lambda est, bon: est,
        hyperparams=uniform_hyperparams,
    )
