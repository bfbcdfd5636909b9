"""LinUCB: ridge regression on the action features, the standard peer of the MLogB learners.

Li, Chu, Langford and Schapire (2010), LinUCB with one shared parameter (the ``A = lam I +
sum z z^T`` form of Abbasi-Yadkori, Pal and Szepesvari 2011). The model ignores the multinomial
structure: the outcome ``y`` becomes the scalar reward ``r_y``. With ``z = [x, 1]``
(``intercept=True``; without it the estimate is biased where the mean reward is far from 0) or
``z = x`` and the ridge state of :mod:`.ridge`,

    index(x) = theta_t^T z + alpha ||z||_{A_t^{-1}}   (estimate + bonus).

The state holds the feature weights (``state.theta``), the intercept (``state.bias``) and the
(K, d) view ``W`` (row 0 ``theta``, the other rows 0).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax.checks import check_float
from bandits_jax.learner_base import Learner, accept, fresh_state, no_failures
from bandits_jax.mlogb import learner, ridge
from bandits_jax.mlogb.hparams import grid_arrays


class LinUCBHyperparams(NamedTuple):
    """Hyperparameters of :func:`linucb` (leading axes, if any, are grid axes): the ridge
    ``lam > 0``, the bonus multiplier ``alpha >= 0`` and the (..., K) ``rewards``."""

    lam: jax.Array
    alpha: jax.Array
    rewards: jax.Array


class LinUCBState(NamedTuple):
    """State of :func:`linucb` (``D = d + 1`` with the intercept, ``d`` without).

    Attributes:
      theta: (d,) the feature weights of ``theta_t``; bias: its intercept (0 without one).
      A_inv: (D, D) ``A_t^{-1}``. b: (D,) ``sum r_{y_s} z_s``. t: completed updates (int32).
      hparams: :class:`LinUCBHyperparams`.
    """

    theta: jax.Array
    bias: jax.Array
    A_inv: jax.Array
    b: jax.Array
    t: jax.Array
    hparams: LinUCBHyperparams
    status: jax.Array
    num_failures: jax.Array

    W = property(ridge.weights)


def linucb_hyperparams(*, lam, alpha, rewards=None, dtype=None) -> LinUCBHyperparams:
    """Builds :class:`LinUCBHyperparams`, validated eagerly.

    Args:
      lam: finite ``> 0``; alpha: finite ``>= 0``; scalars or arrays (broadcast to grid axes).
      rewards: (K,) or (..., K), ``>= 0`` (``None``: ``[1.]``). dtype: default JAX's float.
    """
    fn, dtype = "linucb_hyperparams", jnp.dtype(dtype) if dtype is not None else jnp.zeros(()).dtype
    lam, alpha = check_float("lam", lam), check_float("alpha", alpha, low_open=False)
    return LinUCBHyperparams(**grid_arrays(fn, dtype, rewards, lam=lam, alpha=alpha))


def _init(K: int, d: int, intercept: bool, hp: LinUCBHyperparams) -> LinUCBState:
    learner.check_hparams(hp, K, ("lam", "alpha"))
    dtype = hp.lam.dtype
    A_inv, b = ridge.init(d + 1 if intercept else d, hp.lam, dtype)
    state = LinUCBState(
        theta=jnp.zeros((d,), dtype), bias=jnp.zeros((), dtype), A_inv=A_inv, b=b,
        t=jnp.zeros((), jnp.int32), hparams=hp, **no_failures(),
    )  # fmt: skip
    return fresh_state(state)


def _score_parts(d: int, intercept: bool, state: LinUCBState, actions: jax.Array):
    """``(theta^T z, alpha ||z||_{A^{-1}})``."""
    learner.check_actions(actions, d)
    X = actions.astype(state.theta.dtype)
    Z = ridge.features(X, intercept)
    sq = jnp.sum((Z @ state.A_inv) * Z, axis=1)
    est = X @ state.theta + state.bias
    return est, state.hparams.alpha * jnp.sqrt(jnp.maximum(sq, 0.0))


def _update(K: int, intercept: bool, state: LinUCBState, x: jax.Array, y: jax.Array):
    """The ridge state's rank-one update by ``(z, r_y)``."""
    learner.check_update_args(x, y, K, state.theta.shape[-1])
    z = ridge.features(x.astype(state.b.dtype), intercept)
    r = ridge.reward(state.hparams.rewards, y)
    (A_inv, b), full, ok = ridge.update(ridge.Ridge(state.A_inv, state.b), z, r)
    theta, bias = ridge.split(full, x.shape[-1], intercept, state.bias)
    new = state._replace(theta=theta, bias=bias, A_inv=A_inv, b=b, t=state.t + 1)
    return accept(state, new, ok, written=("A_inv",))


def linucb(*, num_outcomes: int, dim: int, intercept: bool = True) -> Learner:
    """LinUCB on the action features with scalar rewards ``r_y``.

    Args:
      intercept: regress on ``[x, 1]`` (the constant regularised by ``lam``), else on ``x``.

    Returns:
      A :class:`~bandits_jax.learner_base.Learner` whose ``init`` takes
      :func:`linucb_hyperparams`.
    """
    K, d = learner.check_static(num_outcomes, dim)
    icpt = ridge.check_intercept("linucb", intercept)
    return learner.from_score_parts(
        K, d, functools.partial(_init, K, d, icpt), functools.partial(_score_parts, d, icpt),
        functools.partial(_update, K, icpt), hyperparams=linucb_hyperparams,
    )  # fmt: skip
