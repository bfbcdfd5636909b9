"""Ridge regression on action features, kept by Sherman-Morrison: LinUCB's and LinTS's state.

Li, Chu, Langford and Schapire (2010) and Agrawal and Goyal (2013) with one shared parameter (the
``A = lam I + sum z z^T`` form of Abbasi-Yadkori, Pal and Szepesvari 2011). The outcome ``y``
becomes the scalar reward ``r_y`` (``rewards[y-1]`` for ``y >= 1``, 0 for ``y = 0``) and the
features are ``z = [x, 1]`` (an intercept, regularised by ``lam`` like the others) or ``z = x``:

    A_t = lam I + sum_{s<t} z_s z_s^T,   b_t = sum_{s<t} r_{y_s} z_s,   theta_t = A_t^{-1} b_t.

``A_t^{-1}`` is kept by Sherman-Morrison, ``A^{-1} - u u^T / (1 + z^T u)`` with ``u = A^{-1} z``:
O(D^2) a round with matrix-vector products only (a rank-one Cholesky update is also O(D^2) but a
loop of D dependent steps, slow inside ``lax.scan``). The recursion is recursive least squares
with no forgetting, whose rounding errors do not grow geometrically; ``A^{-1}`` is re-symmetrised
each round and ``theta`` recomputed as ``A^{-1} b`` (b an exact running sum), so it carries no
error of its own recursion.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Ridge", "check_intercept", "features", "init", "observe", "reward", "update"]


class Ridge(NamedTuple):
    """``A^{-1}`` (D, D) and ``b`` (D,) (module docstring)."""

    A_inv: jax.Array
    b: jax.Array


def check_intercept(fn: str, intercept: object) -> bool:
    """``intercept`` as a bool; anything else is a ValueError naming ``fn``."""
    if not isinstance(intercept, bool | np.bool_):
        raise ValueError(f"{fn}: intercept must be a bool, got {intercept!r}")
    return bool(intercept)


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


def update(ridge: Ridge, z: jax.Array, r: jax.Array) -> tuple[Ridge, jax.Array]:
    """The rank-one update by ``(z, r)`` and the new ``theta = A^{-1} b``."""
    u = ridge.A_inv @ z
    A_inv = ridge.A_inv - jnp.outer(u, u) / (1.0 + z @ u)
    A_inv = 0.5 * (A_inv + A_inv.T)
    b = ridge.b + r * z
    return Ridge(A_inv, b), A_inv @ b


def observe(state: Any, x: jax.Array, y: jax.Array, intercept: bool):
    """One round of a ridge learner's ``state`` (fields ``A_inv``, ``b``, ``theta``, ``bias`` and
    ``hparams.rewards``): :func:`update` by ``(z, r_y)``. Returns ``(Ridge, full theta, feature
    weights (d,), intercept)`` (the intercept stays 0 without one)."""
    z = features(x.astype(state.b.dtype), intercept)
    new, theta = update(Ridge(state.A_inv, state.b), z, reward(state.hparams.rewards, y))
    d = x.shape[-1]
    return new, theta, theta[:d], theta[d] if intercept else state.bias
