"""Ridge regression on action features: LinUCB's and LinTS's state.

With one shared parameter (the ``A = lam I + sum z z^T`` form of Abbasi-Yadkori, Pal and
Szepesvari 2011), the outcome ``y`` as the scalar reward ``r_y`` (``r_0 = 0``) and the features
``z = [x, 1]`` (an intercept, regularised by ``lam``) or ``z = x``:

    A_t = lam I + sum_{s<t} z_s z_s^T,   b_t = sum_{s<t} r_{y_s} z_s,   theta_t = A_t^{-1} b_t.

LinUCB keeps ``A_t^{-1}`` by Sherman-Morrison in two passes over it a round:
``A_t^{-1} [z, b_{t+1}]`` in one matrix product, then ``A_{t+1}^{-1} = A_t^{-1} - w w^T`` with
``w = u / sqrt(1 + z^T u)``, ``u = A_t^{-1} z`` (each entry one product ``w_i w_j``: exactly
symmetric, no re-symmetrisation), and ``theta_{t+1} = A_t^{-1} b_{t+1} - w (w^T b_{t+1})`` (``b``
an exact running sum). The step is finite exactly when ``1 + z^T u`` and ``r`` are (a non-finite
``u`` or ``z`` makes it so): the rejected-step guard reads these two numbers, never the (D, D)
state.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bandits_jax.linalg import inplace


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
    """``(A + c z z^T)^{-1} = A^{-1} - w w^T``, ``w = u sqrt(c / (1 + c z^T u))``, ``u = A^{-1} z``
    (``c >= 0``; exactly symmetric for a symmetric ``A^{-1}``)."""
    u = A_inv @ z
    w = u * jnp.sqrt(c / (1.0 + c * (z @ u)))
    return A_inv - jnp.outer(w, w)


def update(ridge: Ridge, z: jax.Array, r: jax.Array) -> tuple[Ridge, jax.Array, jax.Array]:
    """The rank-one update by ``(z, r)``: ``(Ridge, theta = A^{-1} b, ok)``, ``ok`` whether the
    step is finite (module docstring); where not ``ok``, ``A^{-1}`` is left as it was (written in
    place, :func:`~bandits_jax.linalg.inplace.subtract_outer`)."""
    b = ridge.b + r * z
    ub = ridge.A_inv @ jnp.stack([z, b], axis=1)  # one pass over A^{-1}
    u, Ab = ub[:, 0], ub[:, 1]
    den = 1.0 + z @ u
    w = u * lax.rsqrt(den)
    ok = jnp.isfinite(den) & jnp.isfinite(r)
    return Ridge(inplace.subtract_outer(ridge.A_inv, w, w, ok), b), Ab - w * (w @ b), ok


def split(theta: jax.Array, d: int, intercept: bool, bias: jax.Array) -> tuple[jax.Array, ...]:
    """``(feature weights (d,), intercept)`` of a full ``theta`` (``bias`` without an intercept)."""
    return theta[:d], theta[d] if intercept else bias
