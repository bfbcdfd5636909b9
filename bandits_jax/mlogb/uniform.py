"""Uniform random choice: the floor every MLogB learner must beat.

The protocol's ``score_parts`` and ``select`` take no key, so the state carries one: the estimate
part of the scores is a vector of i.i.d. uniforms from the state's key (the bonus part is 0), so
the tie-broken argmax over the valid actions is a uniform choice among them (an action with a
non-finite entry scores NaN, as with every learner). ``update`` advances the key; ``select``
called twice on one state returns the same action.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax.learner_base import Learner, accept, fresh_state, no_failures
from bandits_jax.mlogb import learner
from bandits_jax.mlogb.hparams import check_seed, grid_arrays


class UniformHyperparams(NamedTuple):
    """Hyperparameters of :func:`uniform` (leading axes, if any, are grid axes): the uint32
    ``seed`` of the state's key and the (..., K) ``rewards`` (they fix K and the dtype)."""

    seed: jax.Array
    rewards: jax.Array


class UniformState(NamedTuple):
    """State of :func:`uniform`: the raw key data of the next draw (``key``), ``t``,
    ``hparams``, ``status`` and ``num_failures``."""

    key: jax.Array
    t: jax.Array
    hparams: UniformHyperparams
    status: jax.Array
    num_failures: jax.Array


def uniform_hyperparams(*, seed=0, rewards=None, dtype=None) -> UniformHyperparams:
    """Builds :class:`UniformHyperparams`, validated eagerly.

    Args:
      seed: an int in ``[0, 2**32)`` or an int array of them (a grid of seeds).
      rewards: (K,) or (..., K), ``>= 0`` (``None``: ``[1.]``). dtype: default JAX's float.
    """
    fn = "uniform_hyperparams"
    dtype = jnp.dtype(dtype) if dtype is not None else jnp.zeros(()).dtype
    return UniformHyperparams(**grid_arrays(fn, dtype, rewards, seed=check_seed(fn, seed)))


def uniform(*, num_outcomes: int, dim: int) -> Learner:
    """Uniform random choice among the valid actions (``init`` takes
    :func:`uniform_hyperparams`; ``score_parts`` returns ``(u, 0)``, ``scores`` ``u``)."""
    K, d = learner.check_static(num_outcomes, dim)

    def init(hp: UniformHyperparams) -> UniformState:
        learner.check_hparams(hp, K, ("seed",))
        state = UniformState(
            key=jax.random.key_data(jax.random.key(hp.seed)),
            t=jnp.zeros((), jnp.int32),
            hparams=hp,
            **no_failures(),
        )
        return fresh_state(state)

    def score_parts(state: UniformState, actions: jax.Array) -> tuple[jax.Array, jax.Array]:
        learner.check_actions(actions, d)
        _, sub = jax.random.split(jax.random.wrap_key_data(state.key))
        u = jax.random.uniform(sub, (actions.shape[0],), state.hparams.rewards.dtype)
        # A non-finite action scores NaN, as with every other learner: never chosen over a valid
        # one, and flagged by select (under jit; a ValueError eagerly).
        u = jnp.where(jnp.all(jnp.isfinite(actions), axis=1), u, jnp.nan)
        return u, jnp.zeros_like(u)

    def update(state: UniformState, x: jax.Array, y: jax.Array) -> UniformState:
        learner.check_update_args(x, y, K, d)
        # x plays no part in the choice, but a non-finite one is still rejected, as everywhere.
        new = state._replace(key=learner.next_key(state.key), t=state.t + 1)
        return accept(state, new, jnp.all(jnp.isfinite(x)))

    return learner.from_score_parts(
        K, d, init, score_parts, update, hyperparams=uniform_hyperparams
    )
