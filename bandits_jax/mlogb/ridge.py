"""Ridge regression on action features, kept by Sherman-Morrison: LinUCB's and LinTS's state.

With one shared parameter (the ``A = lam I + sum z z^T`` form of Abbasi-Yadkori, Pal and
Szepesvari 2011), the outcome ``y`` as the scalar reward ``r_y`` (``r_0 = 0``) and the features
``z = [x, 1]`` (an intercept, regularised by ``lam``) or ``z = x``:

    A_t = lam I + sum_{s<t} z_s z_s^T,   b_t = sum_{s<t} r_{y_s} z_s,   theta_t = A_t^{-1} b_t.

``A_t^{-1}`` is kept by Sherman-Morrison (O(D^2) a round, matrix-vector products only),
re-symmetrised each round, and ``theta`` recomputed as ``A^{-1} b`` (``b`` an exact running sum).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np


class Ridge(NamedTuple):
    """``A^{-1}`` (D, D) and ``b`` (D,) (module docstring)."""

    A_inv: jax.Array
    b: jax.Array


def check_intercept(fn: str, intercept: object) -> bool:
    """``intercept`` as a bool; anything else is a ValueError naming ``fn``."""
    if not isinstance(intercept, bool | np.bool_):
        raise ValueError(f"{fn}: intercept must be a bool, got {intercept!r}")
    return bool(intercept)


def weights(state: Any) -> jax.Array:
    """The (K, d) view ``W`` every MLogB state has: row 0 is ``state.theta``, the other rows 0."""
    K, theta = state.hparams.rewards.shape[-1], state.theta
    return jnp.zeros(theta.shape[:-1] + (K, theta.shape[-1]), theta.dtype).at[..., 0, :].set(theta)


def features(X: jax.Array, intercept: bool) -> jax.Array:
    """``z``: ``[X, 1]`` (rows, or one vector) with the intercept, else ``X``."""
    if not intercept:
        return X
    return jnp.concatenate([X, jnp.ones(X.shape[:-1] + (1,), X.dtype)], axis=-1)


def init(size: int, lam: jax.Array, dtype) -> Ridge:
    """``A_1^{-1} = I / lam``, ``b_1 = 0``."""
    return Ridge(jnp.eye(size, dtype=dtype) / lam, jnp.zeros((size,), dtype))


def reward(rewards: jax.Array, y: jax.Array) -> jax.Array:
    """The scalar reward ``r_y`` of outcome ``y`` (``r_0 = 0``)."""
    return jnp.concatenate([jnp.zeros((1,), rewards.dtype), rewards])[y]


def sherman_morrison(A_inv: jax.Array, z: jax.Array, c: jax.Array | float = 1.0) -> jax.Array:
    """``(A + c z z^T)^{-1} = A^{-1} - c u u^T / (1 + c z^T u)``, ``u = A^{-1} z``, symmetrised."""
    u = A_inv @ z
    new = A_inv - c * jnp.outer(u, u) / (1.0 + c * (z @ u))
    return 0.5 * (new + new.T)


def update(ridge: Ridge, z: jax.Array, r: jax.Array) -> tuple[Ridge, jax.Array]:
    """The rank-one update by ``(z, r)`` and the new ``theta = A^{-1} b``."""
    A_inv = sherman_morrison(ridge.A_inv, z)
    b = ridge.b + r * z
    return Ridge(A_inv, b), A_inv @ b


def observe(state: Any, x: jax.Array, y: jax.Array, intercept: bool):
    """:func:`update` of a ridge learner's ``state`` by ``(z, r_y)``: ``(Ridge, full theta,
    feature weights (d,), intercept)`` (the intercept stays 0 without one)."""
    z = features(x.astype(state.b.dtype), intercept)
    new, theta = update(Ridge(state.A_inv, state.b), z, reward(state.hparams.rewards, y))
    d = x.shape[-1]
    return new, theta, theta[:d], theta[d] if intercept else state.bias
