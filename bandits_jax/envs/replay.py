"""Replays fixed MLogB action sets and outcome uniforms (for JAX-vs-numpy comparisons).

Outcomes are drawn from ``W*`` by the inverse-CDF rule of
:func:`bandits_jax.mlogb.model.sample_outcome` with the recorded uniforms.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax.envs.synthetic_mlogb import MLogBEnvFunctions
from bandits_jax.mlogb import model


class ReplayState(NamedTuple):
    """Recorded stream: actions (T, N, d), mask (T, N), uniforms (T,), ``W*``, rewards, t."""

    actions: jax.Array
    mask: jax.Array
    uniforms: jax.Array
    W_star: jax.Array
    rewards: jax.Array
    t: jax.Array


def replay_state(actions, mask, uniforms, W_star, rewards) -> ReplayState:
    """Validates and packs a recorded stream."""
    actions = jnp.asarray(actions)
    if actions.ndim != 3:
        raise ValueError(f"actions must have shape (T, N, d), got {actions.shape}")
    T, N, d = actions.shape
    mask = jnp.asarray(mask, bool)
    if mask.shape != (T, N):
        raise ValueError(f"mask must have shape ({T}, {N}), got {mask.shape}")
    uniforms = jnp.asarray(uniforms, actions.dtype)
    if uniforms.shape != (T,):
        raise ValueError(f"uniforms must have shape ({T},), got {uniforms.shape}")
    W_star = jnp.asarray(W_star, actions.dtype)
    if W_star.ndim != 2 or W_star.shape[1] != d:
        raise ValueError(f"W_star must have shape (K, {d}), got {W_star.shape}")
    rewards = jnp.asarray(rewards, actions.dtype)
    if rewards.shape != (W_star.shape[0],):
        raise ValueError(f"rewards must have shape ({W_star.shape[0]},), got {rewards.shape}")
    return ReplayState(actions, mask, uniforms, W_star, rewards, jnp.zeros((), jnp.int32))


def replay_mlogb(*, num_outcomes: int, dim: int, max_actions: int) -> MLogBEnvFunctions:
    """An :class:`MLogBEnvFunctions` whose ``init`` is unused: pass a :func:`replay_state` as env
    state."""

    def init(key):
        raise ValueError("replay_mlogb has no random init: build the state with replay_state(...)")

    def observe(state: ReplayState, key):
        t = state.t
        return state._replace(t=t + 1), state.actions[t], state.mask[t]

    def outcome(state: ReplayState, x, key):
        # observe already advanced t: the uniform of this round is at t - 1.
        return model.sample_outcome(state.W_star @ x, state.uniforms[state.t - 1])

    def expected_rewards(state: ReplayState, actions):
        return model.expected_reward(state.W_star, actions, state.rewards)

    return MLogBEnvFunctions(
        init, observe, outcome, expected_rewards, num_outcomes, dim, max_actions
    )
