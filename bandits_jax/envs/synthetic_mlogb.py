"""The synthetic multinomial logistic environment of He et al., Section 4.

``W*`` uniform on the sphere ``||W*||_F = S``; each round an action set of random size in
``[min_actions, max_actions]`` drawn uniformly on the unit sphere, padded to ``max_actions`` with a
mask; outcomes from the multinomial logistic model (eq. 1) by inverse-CDF sampling of one uniform
(:func:`bandits_jax.mlogb.model.sample_outcome`). Rewards default to ``[0.25, 0.5, 0.75, 1]`` for
K = 4 (``linspace(1/K, 1, K)`` in general) and ``[1]`` for K = 1. S is not stated in the paper
(errata 8); it is a parameter here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.mlogb import model
from bandits_jax.mlogb.hyperparams import state_dtype


class SyntheticState(NamedTuple):
    """Environment state: the true parameter ``W*`` (K, d) and the reward vector (K,)."""

    W_star: jax.Array
    rewards: jax.Array


class MLogBEnv(NamedTuple):
    """An MLogB environment (pure functions of keys)."""

    init: Callable
    observe: Callable
    outcome: Callable
    expected_rewards: Callable
    num_outcomes: int
    dim: int
    max_actions: int


def _check_int(name: str, v) -> int:
    if not isinstance(v, int | np.integer) or isinstance(v, bool) or v < 1:
        raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    return int(v)


def default_rewards(num_outcomes: int) -> np.ndarray:
    return np.linspace(1.0 / num_outcomes, 1.0, num_outcomes)


def synthetic_mlogb(
    *,
    num_outcomes: int,
    dim: int,
    S: float = 1.0,
    rewards=None,
    min_actions: int = 10,
    max_actions: int = 30,
    dtype=None,
) -> MLogBEnv:
    """Builds the Section 4 synthetic environment (see module docstring)."""
    K, d = _check_int("num_outcomes", num_outcomes), _check_int("dim", dim)
    min_actions = _check_int("min_actions", min_actions)
    max_actions = _check_int("max_actions", max_actions)
    if isinstance(S, bool) or not np.isscalar(S) or not (np.isfinite(S) and S > 0):
        raise ValueError(f"S must be a finite number > 0, got {S!r}")
    if not (min_actions <= max_actions):
        raise ValueError(
            f"need 1 <= min_actions <= max_actions, got min_actions={min_actions}, "
            f"max_actions={max_actions}"
        )
    r = default_rewards(K) if rewards is None else np.asarray(rewards, float)
    if r.shape != (K,):
        raise ValueError(f"rewards must have shape ({K},), got {r.shape}")
    if not np.all(np.isfinite(r) & (r >= 0)):
        raise ValueError(f"rewards must be finite and >= 0, got {rewards!r}")
    dtype = state_dtype(dtype)

    def init(key: jax.Array) -> SyntheticState:
        W = jax.random.normal(key, (K, d), dtype)
        return SyntheticState(W * (S / jnp.linalg.norm(W)), jnp.asarray(r, dtype))

    def observe(state: SyntheticState, key: jax.Array):
        k_n, k_x = jax.random.split(key)
        n = jax.random.randint(k_n, (), min_actions, max_actions + 1)
        X = jax.random.normal(k_x, (max_actions, d), dtype)
        X = X / jnp.linalg.norm(X, axis=1, keepdims=True)
        return state, X, jnp.arange(max_actions) < n

    def outcome(state: SyntheticState, x: jax.Array, key: jax.Array) -> jax.Array:
        u = jax.random.uniform(key, (), dtype)
        return model.sample_outcome(state.W_star @ x, u)

    def expected_rewards(state: SyntheticState, actions: jax.Array) -> jax.Array:
        return model.expected_reward(state.W_star, actions, state.rewards)

    return MLogBEnv(init, observe, outcome, expected_rewards, K, d, max_actions)
