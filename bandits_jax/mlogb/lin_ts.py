"""Linear Thompson sampling: LinUCB's ridge posterior sampled once a round (a standard baseline).

Agrawal and Goyal (2013), Algorithm 1 with one shared parameter, as Open Bandit Pipeline's
``LinTS``, on :mod:`.ridge`'s model (``z = [x, 1]`` or ``x``, ``D = len(z)``, reward ``r_y``):

    theta~_t = theta_t + v R_t xi_t,   R_t R_t^T = A_t^{-1},   xi_t ~ N(0, I_D),

one draw a round for every action, split as ``(theta_t^T z, (theta~_t - theta_t)^T z)``. The
square root ``R_t`` is kept in O(D^2) a round, no factorisation (Potter's square-root update):
``R_1 = I / sqrt(lam)``, ``R_{t+1} = R_t - k u a^T`` with ``a = R_t^T z``, ``u = R_t a``,
``k = 1 / (c + sqrt(c))``, ``c = 1 + a^T a``; and ``theta_{t+1} = R_{t+1} R_{t+1}^T b_{t+1}``.
The update is finite exactly when ``c`` and ``r_y`` are (the guard reads them). The state
carries the key (``k_{t+1} = split(k_t)[0]``) and the draw, made by ``init`` and each accepted
``update``: with ``m`` the top 23 bits of ``bits(split(k_t)[1], (D,), uint32)``,
``xi_t = sqrt(2) erfinv((2 m + 1 - 2^23) 2^-23)``, the same normals in float32 and float64 to
float32's rounding.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.checks import named
from bandits_jax.learner_base import Learner, accept, fresh_state, no_failures
from bandits_jax.linalg import inplace
from bandits_jax.mlogb import learner, ridge
from bandits_jax.mlogb.hparams import check_seed, checked, grid_arrays, state_dtype

__all__ = ["LinTSHyperparams", "LinTSState", "lin_ts", "lin_ts_hyperparams", "standard_normals"]


class LinTSHyperparams(NamedTuple):
    """Hyperparameters of :func:`lin_ts` (leading axes, if any, are grid axes): the ridge
    ``lam > 0``, the posterior scale ``v >= 0``, the uint32 ``seed`` and the (..., K) ``rewards``
    ``r_1..r_K`` (``r_0 = 0``)."""

    lam: jax.Array
    v: jax.Array
    seed: jax.Array
    rewards: jax.Array


class LinTSState(NamedTuple):
    """State of :func:`lin_ts` (``D = d + 1`` with the intercept, ``d`` without).

    Attributes:
      theta: (d,) the feature weights of ``theta_t``; bias: its intercept (0 without one).
      root: (D, D) ``R_t``, ``R_t R_t^T = A_t^{-1}``. b: (D,) ``sum r_{y_s} z_s``.
      sample: (D,) this round's draw ``theta~_t``. key: raw PRNG key data ``k_t``.
      t: completed updates (int32). hparams: :class:`LinTSHyperparams`.
    """

    theta: jax.Array
    bias: jax.Array
    root: jax.Array
    b: jax.Array
    sample: jax.Array
    key: jax.Array
    t: jax.Array
    hparams: LinTSHyperparams
    status: jax.Array
    num_failures: jax.Array

    W = property(ridge.weights)


def lin_ts_hyperparams(*, lam, v=1.0, seed=0, rewards=None, dtype=None) -> LinTSHyperparams:
    """Builds :class:`LinTSHyperparams`, validated eagerly.

    Args:
      lam: finite ``> 0``; v: finite ``>= 0``; seed: an int in ``[0, 2**32)``; scalars or arrays
        (broadcast to grid axes). rewards: (K,) or (..., K), ``>= 0`` (``None``: ``[1.]``).
      dtype: float32 or float64 (default: JAX's).
    """
    return LinTSHyperparams(**ts_fields("lin_ts_hyperparams", lam, v, seed, rewards, dtype))


def ts_fields(
    fn: str, lam: object, v: object, seed: object, rewards: object, dtype: object
) -> dict:
    """The validated Thompson-sampling fields on their grid axes (errors name ``fn``)."""
    dtype = named(fn, state_dtype, dtype)
    lam, v = checked(fn, "lam", lam, dtype), checked(fn, "v", v, dtype, positive=False)
    return grid_arrays(fn, dtype, rewards, lam=lam, v=v, seed=check_seed(fn, seed))


def standard_normals(key_data: jax.Array, shape: tuple[int, ...], dtype) -> jax.Array:
    """The standard normals ``sqrt(2) erfinv(w)`` of the round with key ``key_data`` (module
    docstring)."""
    _, sub = jax.random.split(jax.random.wrap_key_data(key_data))
    m = (jax.random.bits(sub, shape, jnp.uint32) >> 9).astype(jnp.int32)
    w = (2 * m + (1 - 2**23)).astype(dtype) * (2.0**-23)  # exact in float32 and float64
    return jnp.sqrt(jnp.asarray(2.0, dtype)) * lax.erf_inv(w)


def _init(K: int, d: int, intercept: bool, hp: LinTSHyperparams) -> LinTSState:
    learner.check_hparams(hp, K, ("lam", "v", "seed"))
    dtype = hp.lam.dtype
    D = d + 1 if intercept else d
    root = jnp.eye(D, dtype=dtype) * lax.rsqrt(hp.lam)
    key = jax.random.key_data(jax.random.key(hp.seed))
    sample = hp.v * (root @ standard_normals(key, (D,), dtype))
    state = LinTSState(
        theta=jnp.zeros((d,), dtype), bias=jnp.zeros((), dtype), root=root,
        b=jnp.zeros((D,), dtype), sample=sample, key=key, t=jnp.zeros((), jnp.int32), hparams=hp,
        **no_failures(),
    )  # fmt: skip
    return fresh_state(state)


def _score_parts(d: int, intercept: bool, state: LinTSState, actions: jax.Array):
    """``(theta_t^T z, (theta~_t - theta_t)^T z)``."""
    learner.check_actions(actions, d)
    Z = ridge.features(actions.astype(state.theta.dtype), intercept)
    theta = jnp.concatenate([state.theta, state.bias[None]]) if intercept else state.theta
    return Z @ theta, Z @ (state.sample - theta)


def _update(K: int, intercept: bool, state: LinTSState, x: jax.Array, y: jax.Array):
    """The square root's rank-one update by ``(z, r_y)``, then the next round's draw, in two
    passes over ``R_t`` (``R_t^T [z, b]``, then ``R_t [a, c, e]``) and the update's one write."""
    learner.check_update_args(x, y, K, state.theta.shape[-1])
    R, v = state.root, state.hparams.v
    z = ridge.features(x.astype(R.dtype), intercept)
    r = ridge.reward(state.hparams.rewards, y)
    b = state.b + r * z
    key = learner.next_key(state.key)
    ag = R.T @ jnp.stack([z, b], axis=1)
    a, g = ag[:, 0], ag[:, 1]
    den = 1.0 + a @ a
    k = 1.0 / (den + jnp.sqrt(den))
    c = g - k * a * (a @ g)  # R_{t+1}^T b
    e = c + v * standard_normals(key, c.shape, c.dtype)
    pre = R @ jnp.stack([a, c, e], axis=1)  # R_t [a, c, e]; R_{t+1} y = R_t y - k u (a^T y)
    u = pre[:, 0]
    full, sample = pre[:, 1] - k * u * (a @ c), pre[:, 2] - k * u * (a @ e)
    theta, bias = ridge.split(full, x.shape[-1], intercept, state.bias)
    ok = jnp.isfinite(den) & jnp.isfinite(r)
    new = state._replace(theta=theta, bias=bias, root=inplace.subtract_outer(R, k * u, a, ok), b=b,
                         sample=sample, key=key, t=state.t + 1)  # fmt: skip
    return accept(state, new, ok, written=("root",))


def lin_ts(*, num_outcomes: int, dim: int, intercept: bool = True) -> Learner:
    """Linear Thompson sampling on the action features with scalar rewards ``r_y``.

    Args:
      intercept: regress on ``[x, 1]`` (the constant regularised by ``lam``), else on ``x``.

    Returns:
      A :class:`~bandits_jax.learner_base.Learner` whose ``init`` takes
      :func:`lin_ts_hyperparams`.
    """
    K, d = named("lin_ts", learner.check_static, num_outcomes, dim)
    icpt = ridge.check_intercept("lin_ts", intercept)
    return learner.from_score_parts(
        K, d, functools.partial(_init, K, d, icpt), functools.partial(_score_parts, d, icpt),
        functools.partial(_update, K, icpt), hyperparams=lin_ts_hyperparams,
    )  # fmt: skip
