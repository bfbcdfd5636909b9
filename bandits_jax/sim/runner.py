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
    """What a run carries from one round to the next (all arrays, checkpointable): the learner
    state (hyperparameters included), the environment state, the PRNG key the next round splits
    and ``t``, the rounds played (int32)."""

    learner: PyTree
    env: PyTree
    key: jax.Array
    t: jax.Array


def init_run(learner_state: PyTree, env_state: PyTree, key: jax.Array) -> RunState:
    """Builds the carry of a run that has played no round yet."""
    return RunState(learner_state, env_state, key, jnp.zeros((), jnp.int32))


def play(step: StepFn, state: RunState, num_rounds: int) -> tuple[RunState, PyTree]:
    """Plays ``num_rounds`` (static) rounds inside one ``lax.scan``; returns the final state
    and the metrics, every leaf with a leading axis of length ``num_rounds``."""

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
    have shape ``(grid, trials, num_rounds, ...)``, all in one compiled call. Nothing is donated
    (only metrics come back, and callers often reuse the states with several keys).

    ``run`` first checks its arguments' leading axes against the flags (:func:`check_batch_axes`);
    ``run.lower(...)`` lowers the jitted program, unchecked.
    """
    fn = functools.partial(rollout, step, num_rounds=num_rounds)
    if trials:
        fn = jax.vmap(fn, in_axes=(None, 0, 0))
    if grid:
        fn = jax.vmap(fn, in_axes=(0, None, None))
    compiled = jax.jit(fn)

    def run(learner_state: PyTree, env_state: PyTree, key: jax.Array) -> PyTree:
        check_batch_axes(learner_state, env_state, key, trials=trials, grid=grid)
        return compiled(learner_state, env_state, key)

    run.lower = compiled.lower  # the compiled program, as a jitted function has it
    return run


def _key_batch(key: Any) -> tuple[int, ...]:
    """The batch shape of a typed key array or of raw ``uint32`` keys (last axis: the key)."""
    key = jnp.asarray(key)
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return tuple(key.shape)
    return tuple(key.shape[:-1])


# argument -> (the flag that batches it, what its leading axis means, how to make one)
_BATCHED_BY = {
    "learner_state": ("grid", "a grid of hyperparameter points", "jax.vmap(learner.init)(grid)"),
    "env_state": ("trials", "one environment per trial", "jax.vmap(env.init)(keys)"),
    "key": ("trials", "one key per trial", "jax.random.split(key, trials)"),
}


def check_batch_axes(
    learner_state: PyTree, env_state: PyTree, key: Any, *, trials: bool, grid: bool
) -> None:
    """:func:`make_rollout`'s check: the learner state has a grid axis exactly when ``grid``
    (read off its ``status``); the keys have a trial axis exactly when ``trials``, and then so
    has every leaf of the environment state. A ``ValueError`` names the argument and the flag."""
    name = f"make_rollout(trials={trials}, grid={grid})"
    batches = {"key": _key_batch(key)}
    if hasattr(learner_state, "status"):
        batches = {"learner_state": tuple(jnp.shape(learner_state.status)), **batches}
    for arg, batch in batches.items():
        flag, meaning, how = _BATCHED_BY[arg]
        on = grid if flag == "grid" else trials
        if on and len(batch) != 1:
            raise ValueError(
                f"{name}: {arg} must have one leading axis ({meaning}, e.g. {how}), "
                f"got batch shape {batch}"
            )
        if not on and batch:
            raise ValueError(
                f"{name}: {arg} has leading axes {batch} ({meaning}?); pass {flag}=True"
            )
    if trials:
        n = batches["key"][0]
        leading = {jnp.shape(x)[:1] for x in jax.tree.leaves(env_state)}
        if leading - {(n,)}:
            _, meaning, how = _BATCHED_BY["env_state"]
            raise ValueError(
                f"{name}: every leaf of env_state must have a leading axis of {n} trials (as the "
                f"key; {meaning}, e.g. {how}), got leading axes {sorted(leading)}"
            )
