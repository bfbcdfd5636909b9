"""One runner for every learner: rounds inside ``lax.scan``, trials and grids by ``vmap``.

Each problem family supplies a single step function (its ``interact(learner, env)``)

    step(learner_state, env_state, key) -> (learner_state, env_state, metrics)

and this module only ever sees that function, so the scan over rounds, the vmap over trials and
hyperparameter grids (a grid is a batch of learner states, since numeric hyperparameters live in
the state), chunking, checkpoints and sharding are written once for both papers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

PyTree = Any
StepFn = Callable[[PyTree, PyTree, jax.Array], tuple[PyTree, PyTree, PyTree]]


class RunState(NamedTuple):
    """Everything a run carries from one round to the next (all arrays, checkpointable).

    Attributes:
      learner: the learner state (its hyperparameters included).
      env: the environment state.
      key: the PRNG key that the next round splits.
      t: number of rounds already played (int32).
    """

    learner: PyTree
    env: PyTree
    key: jax.Array
    t: jax.Array


def init_run(learner_state: PyTree, env_state: PyTree, key: jax.Array) -> RunState:
    """Builds the carry of a run that has played no round yet."""
    return RunState(learner_state, env_state, key, jnp.zeros((), jnp.int32))


def play(step: StepFn, state: RunState, num_rounds: int) -> tuple[RunState, PyTree]:
    """Plays ``num_rounds`` rounds inside one ``lax.scan``.

    Args:
      step: the family's round function (see module docstring); closed over, not traced.
      state: the run carry.
      num_rounds: static number of rounds.

    Returns:
      ``(final_state, metrics)`` where every leaf of ``metrics`` has a leading axis of length
      ``num_rounds``.
    """

    def body(carry: RunState, _):
        key, sub = jax.random.split(carry.key)
        learner, env, metrics = step(carry.learner, carry.env, sub)
        return RunState(learner, env, key, carry.t + 1), metrics

    return lax.scan(body, state, None, length=num_rounds)


def rollout(
    step: StepFn, learner_state: PyTree, env_state: PyTree, key: jax.Array, num_rounds: int
) -> PyTree:
    """Plays a whole run from scratch and returns the per-round metrics only."""
    _, metrics = play(step, init_run(learner_state, env_state, key), num_rounds)
    return metrics


def make_rollout(
    step: StepFn, num_rounds: int, *, trials: bool = False, grid: bool = False
) -> Callable[[PyTree, PyTree, jax.Array], PyTree]:
    """Returns ``run(learner_state, env_state, key) -> metrics``, jitted, optionally batched.

    With ``trials=True`` the env states and keys carry a leading trial axis; with ``grid=True``
    the learner states carry a leading grid axis (a batch of hyperparameters). With both, metrics
    have shape ``(grid, trials, num_rounds, ...)``: every (grid point, trial) pair runs in the same
    compiled call.

    Nothing is donated: the carry is built inside the call (``lax.scan`` updates it in place) and
    only metrics come back, so no input buffer could be reused, and callers commonly run the same
    learner and env states with several keys. :class:`bandits_jax.sim.chunks.ChunkFn`, which
    returns the carry, donates it.
    """
    fn = functools.partial(rollout, step, num_rounds=num_rounds)
    if trials:
        fn = jax.vmap(fn, in_axes=(None, 0, 0))
    if grid:
        fn = jax.vmap(fn, in_axes=(0, None, None))
    return jax.jit(fn)
