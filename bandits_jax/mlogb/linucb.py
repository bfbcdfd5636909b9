"""LinUCB: ridge regression on the action features, the standard peer of the MLogB learners.

Li, Chu, Langford and Schapire (2010), "A contextual-bandit approach to personalized news article
recommendation" (LinUCB with one shared parameter, i.e. the ``A = lam I + sum x x^T`` form of
Abbasi-Yadkori, Pal and Szepesvari 2011, OFUL for linear bandits). The model ignores the
multinomial structure: the observed outcome ``y`` becomes the scalar reward ``r_y``. With
``z = [x, 1]`` (``intercept=True``, the default: an appended constant feature, as a standard
LinUCB with a constant column has it) or ``z = x`` and the ridge state of :mod:`.ridge`,

    index(x) = theta_t^T z + alpha ||z||_{A_t^{-1}}   (estimate + bonus),

the squared norm clamped at 0. Without the intercept the ridge estimate is biased wherever the
mean reward is far from 0 (a logistic stream's is near 1/2).

The state holds ``theta``'s d feature weights (``state.theta``) and the intercept
(``state.bias``, 0 without one); ``state.W`` is the (K, d) view every MLogB state has (row 0 is
``theta``, the other rows 0: one parameter vector for every K).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.checks import check_float
from bandits_jax.learner_base import Learner, accept, finite_floats, fresh_state, no_failures
from bandits_jax.mlogb import ridge
from bandits_jax.mlogb.hparams import check_rewards
from bandits_jax.mlogb.learner import (
    check_actions,
    check_hparams,
    check_static,
    check_update_args,
    from_score_parts,
)


class LinUCBHyperparams(NamedTuple):
    """Hyperparameters of :func:`linucb` (leading axes, if any, are grid axes).

    Attributes:
      lam: ridge regulariser ``lam > 0`` (``A_1 = lam I``).
      alpha: bonus multiplier ``alpha >= 0`` (0 is greedy ridge regression).
      rewards: (..., K) outcome rewards ``r_1..r_K`` (``r_0 = 0``).
    """

    lam: jax.Array
    alpha: jax.Array
    rewards: jax.Array


class LinUCBState(NamedTuple):
    """State of :func:`linucb` (``D = d + 1`` with the intercept, ``d`` without).

    Attributes:
      theta: (d,) the feature weights of ``theta_t = A_t^{-1} b_t``.
      bias: () the intercept, ``theta_t``'s last entry (0 without an intercept).
      A_inv: (D, D) ``A_t^{-1}``. b: (D,) ``sum r_{y_s} z_s``. t: completed updates (int32).
      hparams: :class:`LinUCBHyperparams`.
      status, num_failures: the last update's status and the rejected updates so far.
    """

    theta: jax.Array
    bias: jax.Array
    A_inv: jax.Array
    b: jax.Array
    t: jax.Array
    hparams: LinUCBHyperparams
    status: jax.Array
    num_failures: jax.Array

    @property
    def W(self) -> jax.Array:
        """The (K, d) view every MLogB state has: row 0 is :attr:`theta`, the other rows 0."""
        K = self.hparams.rewards.shape[-1]
        rows = jnp.zeros(self.theta.shape[:-1] + (K, self.theta.shape[-1]), self.theta.dtype)
        return rows.at[..., 0, :].set(self.theta)


def linucb_hyperparams(*, lam, alpha, rewards=None, dtype=None) -> LinUCBHyperparams:
    """Builds :class:`LinUCBHyperparams`, validated eagerly.

    Args:
      lam: finite ``> 0``; alpha: finite ``>= 0``; scalars or arrays (broadcast to grid axes).
      rewards: (K,) or (..., K) non-negative rewards; ``None`` means ``[1.]`` (K = 1).
      dtype: floating dtype of the state (default: JAX's default float).

    Raises:
      ValueError: naming the offending argument.
    """
    dtype = jnp.dtype(dtype) if dtype is not None else jnp.zeros(()).dtype
    lam_a = check_float("lam", lam)
    alpha_a = check_float("alpha", alpha, low_open=False)
    r = check_rewards(rewards)
    batch = np.broadcast_shapes(lam_a.shape, alpha_a.shape, r.shape[:-1])
    return LinUCBHyperparams(
        lam=jnp.asarray(np.broadcast_to(lam_a, batch), dtype),
        alpha=jnp.asarray(np.broadcast_to(alpha_a, batch), dtype),
        rewards=jnp.asarray(np.broadcast_to(r, batch + r.shape[-1:]), dtype),
    )


def _init(K: int, d: int, intercept: bool, hp: LinUCBHyperparams) -> LinUCBState:
    check_hparams(hp, K, ("lam", "alpha"))
    dtype = hp.lam.dtype
    A_inv, b = ridge.init(d + 1 if intercept else d, hp.lam, dtype)
    state = LinUCBState(
        theta=jnp.zeros((d,), dtype), bias=jnp.zeros((), dtype), A_inv=A_inv, b=b,
        t=jnp.zeros((), jnp.int32), hparams=hp, **no_failures(),
    )  # fmt: skip
    return fresh_state(state)


def _score_parts(d: int, intercept: bool, state: LinUCBState, actions: jax.Array):
    """``(theta^T z, alpha ||z||_{A^{-1}})``."""
    check_actions(actions, d)
    X = actions.astype(state.theta.dtype)
    Z = ridge.features(X, intercept)
    sq = jnp.sum((Z @ state.A_inv) * Z, axis=1)
    est = X @ state.theta + state.bias
    return est, state.hparams.alpha * jnp.sqrt(jnp.maximum(sq, 0.0))


def _update(K: int, intercept: bool, state: LinUCBState, x: jax.Array, y: jax.Array):
    """The ridge state's rank-one update by ``(z, r_y)``."""
    check_update_args(x, y, K, state.theta.shape[-1])
    (A_inv, b), _, theta, bias = ridge.observe(state, x, y, intercept)
    new = state._replace(theta=theta, bias=bias, A_inv=A_inv, b=b, t=state.t + 1)
    return accept(state, new, finite_floats(new))


def linucb(*, num_outcomes: int, dim: int, intercept: bool = True) -> Learner:
    """LinUCB on the action features with scalar rewards ``r_y``.

    Args:
      num_outcomes: K >= 1 (only the scalar reward ``r_y`` of the outcome is used); dim: d.
      intercept: regress on ``[x, 1]`` (an appended constant feature, regularised by ``lam``);
        ``False`` regresses on ``x`` alone (no intercept).

    Returns:
      An :class:`~bandits_jax.learner_base.Learner` whose ``init`` takes
      :func:`linucb_hyperparams`. ``score_parts`` returns ``(theta^T z, alpha ||z||_{A^{-1}})``
      with ``z = [x, 1]`` (or ``x``); ``scores`` their sum (the optimistic reward).
    """
    K, d = check_static(num_outcomes, dim)
    icpt = ridge.check_intercept("linucb", intercept)
    return from_score_parts(
        K, d, functools.partial(_init, K, d, icpt), functools.partial(_score_parts, d, icpt),
        functools.partial(_update, K, icpt), hyperparams=linucb_hyperparams,
    )  # fmt: skip
