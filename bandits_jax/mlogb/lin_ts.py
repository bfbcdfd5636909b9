"""Linear Thompson sampling: LinUCB's ridge posterior sampled once a round (a standard baseline).

Agrawal and Goyal (2013), "Thompson sampling for contextual bandits with linear payoffs"
(Algorithm 1, with one shared parameter), as Open Bandit Pipeline's ``LinTS`` has it, on the ridge
state of :mod:`.ridge` (``z = [x, 1]`` with ``intercept=True``, the default, or ``z = x``;
``D = len(z)``; the outcome ``y`` becomes the scalar reward ``r_y``):

    theta~_t = theta_t + v L_t xi_t,   L_t L_t^T = A_t^{-1} (lower Cholesky),  xi_t ~ N(0, I_D),

so ``theta~_t ~ N(theta_t, v^2 A_t^{-1})``, one draw a round shared by every action (``L_t`` a
Cholesky factorisation each update, O(D^3 / 3)). The score ``theta~_t^T z`` is split as
``(theta_t^T z, (theta~_t - theta_t)^T z)``: the runner's argmax of their sum is the Thompson
choice. ``v`` (>= 0; 0 is greedy ridge regression) scales the posterior as LinUCB's ``alpha``.

The draws. ``select`` takes no key, so the state carries one (``state.key``, raw key data, first
``jax.random.key(seed)``); the sample is drawn by ``init`` and each accepted ``update`` and kept
(``state.sample``), so ``select`` and ``scores`` called twice on one state agree. With
``k_{t+1} = split(k_t)[0]``, ``m`` the top 23 bits of ``bits(split(k_t)[1], (D,), uint32)`` and
``w = (2 m + 1 - 2^23) 2^-23`` (an even grid on (-1, 1), exact in float32 and float64),
``xi_t = sqrt(2) erfinv(w)`` in the state's dtype: a float32 and a float64 run of one seed draw
the same normals up to float32's rounding (``tests/precision_cases.py``), and a float64 run's
draws do not move with XLA's compiler options. A rejected update keeps the previous state, its
key and sample included.

The state holds ``theta_t``'s d feature weights (``state.theta``) and the intercept
(``state.bias``, 0 without one); ``state.W`` is the (K, d) view, as in :mod:`.linucb`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bandits_jax.checks import cast_checked, check_float, named
from bandits_jax.learner_base import Learner, accept, finite_floats, fresh_state, no_failures
from bandits_jax.linalg import lapack
from bandits_jax.mlogb import ridge
from bandits_jax.mlogb.hparams import check_rewards, state_dtype
from bandits_jax.mlogb.learner import (
    check_actions,
    check_hparams,
    check_static,
    check_update_args,
    from_score_parts,
)

__all__ = ["LinTSHyperparams", "LinTSState", "lin_ts", "lin_ts_hyperparams", "standard_normals"]


class LinTSHyperparams(NamedTuple):
    """Hyperparameters of :func:`lin_ts` (leading axes, if any, are grid axes).

    Attributes:
      lam: ridge regulariser ``lam > 0`` (``A_1 = lam I``).
      v: posterior scale ``v >= 0`` (``theta~ ~ N(theta, v^2 A^{-1})``; 0 is greedy).
      seed: uint32 seed of the state's PRNG key.
      rewards: (..., K) outcome rewards ``r_1..r_K`` (``r_0 = 0``).
    """

    lam: jax.Array
    v: jax.Array
    seed: jax.Array
    rewards: jax.Array


class LinTSState(NamedTuple):
    """State of :func:`lin_ts` (``D = d + 1`` with the intercept, ``d`` without).

    Attributes:
      theta: (d,) the feature weights of ``theta_t = A_t^{-1} b_t``.
      bias: () the intercept, ``theta_t``'s last entry (0 without an intercept).
      A_inv: (D, D) ``A_t^{-1}``. b: (D,) ``sum r_{y_s} z_s``.
      sample: (D,) this round's draw ``theta~_t``. key: raw PRNG key data ``k_t``.
      t: completed updates (int32). hparams: :class:`LinTSHyperparams`.
      status, num_failures: the last update's status and the rejected updates so far.
    """

    theta: jax.Array
    bias: jax.Array
    A_inv: jax.Array
    b: jax.Array
    sample: jax.Array
    key: jax.Array
    t: jax.Array
    hparams: LinTSHyperparams
    status: jax.Array
    num_failures: jax.Array

    @property
    def W(self) -> jax.Array:
        """The (K, d) view every MLogB state has: row 0 is :attr:`theta`, the other rows 0."""
        K = self.hparams.rewards.shape[-1]
        rows = jnp.zeros(self.theta.shape[:-1] + (K, self.theta.shape[-1]), self.theta.dtype)
        return rows.at[..., 0, :].set(self.theta)


def check_seed(fn: str, seed: object) -> np.ndarray:
    """An int (or int array) in ``[0, 2**32)`` as a numpy array; bools and floats are refused."""
    s = np.asarray(seed)
    if (
        not np.issubdtype(s.dtype, np.integer)
        or s.dtype == np.bool_
        or np.any(s < 0)
        or np.any(s >= 2**32)
    ):
        raise ValueError(f"{fn}: seed must be an int (or int array) in [0, 2**32), got {seed!r}")
    return s


def lin_ts_hyperparams(*, lam, v=1.0, seed=0, rewards=None, dtype=None) -> LinTSHyperparams:
    """Builds :class:`LinTSHyperparams`, validated eagerly.

    Args:
      lam: finite ``> 0``; v: finite ``>= 0``; seed: an int in ``[0, 2**32)``; scalars or
        arrays (broadcast to grid axes: a grid of seeds is a batch of independent runs).
      rewards: (K,) or (..., K) non-negative rewards; ``None`` means ``[1.]`` (K = 1).
      dtype: float32 or float64 (default: JAX's default float).

    Raises:
      ValueError: naming the function and the offending argument.
    """
    return LinTSHyperparams(**ts_fields("lin_ts_hyperparams", lam, v, seed, rewards, dtype))


def ts_fields(
    fn: str, lam: object, v: object, seed: object, rewards: object, dtype: object
) -> dict:
    """The Thompson-sampling hyperparameters ``lam``, ``v``, ``seed``, ``rewards`` of builder
    ``fn``, validated eagerly and broadcast to their common grid axes (errors name ``fn``)."""
    dtype = named(fn, state_dtype, dtype)
    lam_a = cast_checked(fn, "lam", named(fn, check_float, "lam", lam), dtype, True)
    v_a = cast_checked(fn, "v", named(fn, check_float, "v", v, low_open=False), dtype, False)
    s = check_seed(fn, seed)
    r = cast_checked(fn, "rewards", named(fn, check_rewards, rewards), dtype, False)
    try:
        batch = np.broadcast_shapes(lam_a.shape, v_a.shape, s.shape, r.shape[:-1])
    except ValueError:
        raise ValueError(
            f"{fn}: lam, v, seed and rewards[..., 0] must broadcast, got shapes "
            f"{lam_a.shape}, {v_a.shape}, {s.shape}, {r.shape[:-1]}"
        ) from None
    return dict(
        lam=jnp.asarray(np.broadcast_to(lam_a, batch), dtype),
        v=jnp.asarray(np.broadcast_to(v_a, batch), dtype),
        seed=jnp.asarray(np.broadcast_to(s, batch), jnp.uint32),
        rewards=jnp.asarray(np.broadcast_to(r, batch + r.shape[-1:]), dtype),
    )


def standard_normals(key_data: jax.Array, shape: tuple[int, ...], dtype) -> jax.Array:
    """The standard normals of the round whose key is ``key_data`` (module docstring):
    ``sqrt(2) erfinv(w)`` in ``dtype``, ``w = (2 m + 1 - 2^23) 2^-23`` with ``m`` the top 23 bits
    of ``bits(split(k)[1], shape, uint32)``."""
    _, sub = jax.random.split(jax.random.wrap_key_data(key_data))
    m = (jax.random.bits(sub, shape, jnp.uint32) >> 9).astype(jnp.int32)
    w = (2 * m + (1 - 2**23)).astype(dtype) * (2.0**-23)  # exact in float32 and float64
    return jnp.sqrt(jnp.asarray(2.0, dtype)) * lax.erf_inv(w)


def next_key(key_data: jax.Array) -> jax.Array:
    """``k_{t+1} = split(k_t)[0]`` as raw key data."""
    nxt, _ = jax.random.split(jax.random.wrap_key_data(key_data))
    return jax.random.key_data(nxt)


def _draw(A_inv: jax.Array, theta: jax.Array, v: jax.Array, key: jax.Array) -> jax.Array:
    """``theta + v L xi``, ``L L^T = A_inv`` (lower Cholesky), ``xi`` from ``key``."""
    L = lapack.cholesky(A_inv)
    return theta + v * (L @ standard_normals(key, theta.shape, theta.dtype))


def _init(K: int, d: int, intercept: bool, hp: LinTSHyperparams) -> LinTSState:
    check_hparams(hp, K, ("lam", "v", "seed"))
    dtype = hp.lam.dtype
    A_inv, b = ridge.init(d + 1 if intercept else d, hp.lam, dtype)
    key = jax.random.key_data(jax.random.key(hp.seed))
    state = LinTSState(
        theta=jnp.zeros((d,), dtype), bias=jnp.zeros((), dtype), A_inv=A_inv, b=b,
        sample=_draw(A_inv, jnp.zeros_like(b), hp.v, key), key=key, t=jnp.zeros((), jnp.int32),
        hparams=hp, **no_failures(),
    )  # fmt: skip
    return fresh_state(state)


def _score_parts(d: int, intercept: bool, state: LinTSState, actions: jax.Array):
    """``(theta_t^T z, (theta~_t - theta_t)^T z)``."""
    check_actions(actions, d)
    Z = ridge.features(actions.astype(state.theta.dtype), intercept)
    theta = jnp.concatenate([state.theta, state.bias[None]]) if intercept else state.theta
    return Z @ theta, Z @ (state.sample - theta)


def _update(K: int, intercept: bool, state: LinTSState, x: jax.Array, y: jax.Array):
    """The ridge state's rank-one update by ``(z, r_y)``, then the next round's draw."""
    check_update_args(x, y, K, state.theta.shape[-1])
    (A_inv, b), full, theta, bias = ridge.observe(state, x, y, intercept)
    key = next_key(state.key)
    sample = _draw(A_inv, full, state.hparams.v, key)
    new = state._replace(theta=theta, bias=bias, A_inv=A_inv, b=b, sample=sample, key=key,
                         t=state.t + 1)  # fmt: skip
    return accept(state, new, finite_floats(new))


def lin_ts(*, num_outcomes: int, dim: int, intercept: bool = True) -> Learner:
    """Linear Thompson sampling on the action features with scalar rewards ``r_y``.

    Args:
      num_outcomes: K >= 1 (only the scalar reward ``r_y`` of the outcome is used); dim: d.
      intercept: regress on ``[x, 1]`` (an appended constant feature, regularised by ``lam``);
        ``False`` regresses on ``x`` alone.

    Returns:
      An :class:`~bandits_jax.learner_base.Learner` whose ``init`` takes
      :func:`lin_ts_hyperparams`. ``score_parts`` returns
      ``(theta_t^T z, (theta~_t - theta_t)^T z)``; ``scores`` their sum ``theta~_t^T z``.

    Raises:
      ValueError: naming ``lin_ts`` and the offending argument.
    """
    K, d = named("lin_ts", check_static, num_outcomes, dim)
    icpt = ridge.check_intercept("lin_ts", intercept)
    return from_score_parts(
        K, d, functools.partial(_init, K, d, icpt), functools.partial(_score_parts, d, icpt),
        functools.partial(_update, K, icpt), hyperparams=lin_ts_hyperparams,
    )  # fmt: skip
