"""The synthetic multinomial logistic environment of He et al., Section 4.

``W*`` uniform on the sphere ``||W*||_F = S`` (S is not stated in the paper, errata 8); each
round a random number of actions in ``[min_actions, max_actions]``, uniform on the unit sphere
and padded with a mask; outcomes by inverse-CDF sampling of the model (eq. 1). The validation
and round structure (:func:`check_stream`, :func:`build_env`) serve the low-rank and
heavy-tailed streams too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.checks import check_int
from bandits_jax.mlogb import model
from bandits_jax.mlogb.hparams import state_dtype


class SyntheticState(NamedTuple):
    """Environment state: the true parameter ``W*`` (K, d) and the reward vector (K,)."""

    W_star: jax.Array
    rewards: jax.Array


class BasisState(NamedTuple):
    """State of the low-rank and heavy-tailed streams: ``W*`` (K, d), rewards (K,) and the
    trial's orthonormal ``basis`` (d, r) of the action covariance."""

    W_star: jax.Array
    rewards: jax.Array
    basis: jax.Array


class MLogBEnvFunctions(NamedTuple):
    """An MLogB environment (pure functions of keys, :class:`bandits_jax.protocols.MLogBEnv`)."""

    init: Callable
    observe: Callable
    outcome: Callable
    expected_rewards: Callable
    num_outcomes: int
    dim: int
    max_actions: int


def check_number(name: str, v, *, positive: bool) -> float:
    """A finite real scalar (NaN and infinities rejected), ``> 0`` or ``>= 0``."""
    ok = not isinstance(v, bool) and np.isscalar(v) and isinstance(v, int | float | np.number)
    if ok:
        x = float(v)
        ok = np.isfinite(x) and (x > 0 if positive else x >= 0)
    if not ok:
        raise ValueError(f"{name} must be a finite number {'>' if positive else '>='} 0, got {v!r}")
    return float(v)


def default_rewards(num_outcomes: int) -> np.ndarray:
    """Section 4's rewards of the K outcomes: ``1/K, 2/K, ..., 1``."""
    return np.linspace(1.0 / num_outcomes, 1.0, num_outcomes)


class StreamArgs(NamedTuple):
    """The checked arguments shared by the synthetic streams (:func:`check_stream`)."""

    K: int
    d: int
    S: float
    rewards: np.ndarray
    min_actions: int
    max_actions: int
    dtype: Any

    def scaled(self, W: jax.Array) -> jax.Array:
        """``W`` scaled to ``||W||_F = S``."""
        return W * (self.S / jnp.linalg.norm(W))


def check_stream(num_outcomes, dim, S, rewards, min_actions, max_actions, dtype) -> StreamArgs:
    """The eager validation both synthetic streams share (ValueError naming the argument)."""
    K, d = check_int("num_outcomes", num_outcomes), check_int("dim", dim)
    min_actions = check_int("min_actions", min_actions)
    max_actions = check_int("max_actions", max_actions)
    S = check_number("S", S, positive=True)
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
    return StreamArgs(K, d, S, r, min_actions, max_actions, state_dtype(dtype))


def build_env(
    c: StreamArgs,
    init: Callable[[jax.Array], Any],
    draw_actions: Callable[[Any, jax.Array], jax.Array],
) -> MLogBEnvFunctions:
    """An MLogB environment from ``init(key)`` (a state with ``W_star`` and ``rewards``) and
    ``draw_actions(state, key) -> (max_actions, d)`` raw actions (normalised here)."""
    lo, hi = c.min_actions, c.max_actions

    def observe(state, key: jax.Array):
        k_n, k_x = jax.random.split(key)
        n = jax.random.randint(k_n, (), lo, hi + 1)
        X = draw_actions(state, k_x)
        X = X / jnp.linalg.norm(X, axis=1, keepdims=True)
        return state, X, jnp.arange(hi) < n

    def outcome(state, x: jax.Array, key: jax.Array) -> jax.Array:
        u = jax.random.uniform(key, (), c.dtype)
        return model.sample_outcome(state.W_star @ x, u)

    def expected_rewards(state, actions: jax.Array) -> jax.Array:
        return model.expected_reward(state.W_star, actions, state.rewards)

    return MLogBEnvFunctions(init, observe, outcome, expected_rewards, c.K, c.d, hi)


def synthetic_mlogb(
    *,
    num_outcomes: int,
    dim: int,
    S: float = 1.0,
    rewards=None,
    min_actions: int = 10,
    max_actions: int = 30,
    dtype=None,
) -> MLogBEnvFunctions:
    """Builds the Section 4 synthetic environment (see module docstring).

    Args:
      S: ``||W*||_F > 0``.
      rewards: ``(K,)`` rewards of outcomes 1..K (default ``linspace(1/K, 1, K)``).
      min_actions, max_actions: fewest and most actions shown a round (the padded size).
      dtype: float dtype of the state and actions; default JAX's default float.

    Raises:
      ValueError: an argument out of range (the message names it).
    """
    c = check_stream(num_outcomes, dim, S, rewards, min_actions, max_actions, dtype)

    def init(key: jax.Array) -> SyntheticState:
        W = jax.random.normal(key, (c.K, c.d), c.dtype)
        return SyntheticState(c.scaled(W), jnp.asarray(c.rewards, c.dtype))

    def draw_actions(state: SyntheticState, key: jax.Array) -> jax.Array:
        del state
        return jax.random.normal(key, (c.max_actions, c.d), c.dtype)

    return build_env(c, init, draw_actions)
