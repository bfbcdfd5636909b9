"""Numeric hyperparameters of the MLogB learners, as arrays (so a grid is a ``vmap``).

EOFD-MLogB (He et al.): lam, eta, S of Algorithm 2; the confidence radius beta_t of eq. (19)
(fixed, Theorem 1's eq. 36, or the order form eq. 27); Section 4's tuning recipe.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.checks import cast_checked, check_float, check_int, named
from bandits_jax.learner_base import grid
from bandits_jax.mlogb.confidence import BETA_MODES


class MLogBHyperparams(NamedTuple):
    """Hyperparameters (all arrays; leading axes, if any, are grid axes).

    Attributes:
      lam: regulariser ``lambda > 0`` (``H_1 = lam I``). eta: ONS step size ``eta > 0``.
      S: radius of the parameter ball ``||W||_F <= S``.
      rewards: (..., K) outcome rewards ``r_1..r_K`` (``r_0 = 0``).
      beta: the fixed radius, or the scale of the theory (eq. 36) or order (eq. 27) radius.
      beta_mode: int32, 0 fixed, 1 theory, 2 order. delta: confidence level in (0, 1).
      action_bound: ``D >= sup ||x||`` (Assumption 1). lipschitz: ``L`` of Assumption 2.
    """

    lam: jax.Array
    eta: jax.Array
    S: jax.Array
    rewards: jax.Array
    beta: jax.Array
    beta_mode: jax.Array
    delta: jax.Array
    action_bound: jax.Array
    lipschitz: jax.Array


def check_rewards(rewards) -> np.ndarray:
    """Outcome rewards ``r_1..r_K`` as float64, shape (K,) or (..., K), finite and ``>= 0``;
    ``None`` means ``[1.]`` (K = 1)."""
    r = np.asarray([1.0] if rewards is None else rewards, dtype=float)
    if r.ndim < 1 or r.shape[-1] < 1:
        raise ValueError(f"rewards must have shape (K,) with K >= 1, got shape {r.shape}")
    if not np.all(np.isfinite(r)) or np.any(r < 0):
        raise ValueError(f"rewards must be finite and >= 0, got {rewards!r}")
    return r


def state_dtype(dtype) -> np.dtype:
    """The state dtype: float32 or float64 (float64 needs ``jax_enable_x64``)."""
    if dtype is None:
        return jnp.zeros(()).dtype
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}") from None
    if dt not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dt.name}")
    if dt == np.float64 and not jax.config.jax_enable_x64:
        raise ValueError("dtype float64 needs jax_enable_x64 (jax.config.update), got float64")
    return dt


def check_seed(fn: str, seed: object) -> np.ndarray:
    """An int (or int array) in ``[0, 2**32)`` as a uint32 array; bools and floats are refused."""
    s = np.asarray(seed)
    if not np.issubdtype(s.dtype, np.integer) or np.any(s < 0) or np.any(s >= 2**32):
        raise ValueError(f"{fn}: seed must be an int (or int array) in [0, 2**32), got {seed!r}")
    return s.astype(np.uint32)


def checked(fn: str, name: str, value, dtype, positive: bool = True) -> np.ndarray:
    """``value`` finite and ``> 0`` (``positive``) or ``>= 0``, also once cast to ``dtype``
    (float32: 1e-300 -> 0, 1e300 -> inf); a ValueError names ``fn`` and ``name``."""
    arr = named(fn, check_float, name, value, low_open=positive)
    return cast_checked(fn, name, arr, dtype, positive)


def grid_arrays(fn: str, dtype, rewards, **fields: np.ndarray) -> dict:
    """The validated ``rewards`` (:func:`check_rewards`) and ``fields`` on their common grid axes
    (:func:`~bandits_jax.learner_base.grid`), as ``dtype`` arrays (integer fields keep their
    dtype); a ValueError names ``fn``."""
    r = cast_checked(fn, "rewards", named(fn, check_rewards, rewards), dtype, False)
    kinds = {k: a.dtype if a.dtype.kind in "iu" else dtype for k, a in fields.items()}

    def point(**values) -> dict:
        return {k: jnp.asarray(v, kinds.get(k, dtype)) for k, v in values.items()}

    return named(fn, grid, point, {**fields, "rewards": r}, rows=("rewards",))


def hyperparams(
    *,
    lam,
    eta,
    S,
    rewards=None,
    beta: float | str = 1.0,
    beta_scale: float = 1.0,
    delta=0.01,
    action_bound=1.0,
    lipschitz=1.0,
    dtype=None,
) -> MLogBHyperparams:
    """Builds :class:`MLogBHyperparams`, validated eagerly.

    Args:
      lam, eta, S: positive scalars or arrays (arrays broadcast to grid axes).
      rewards: (K,) or (..., K) non-negative rewards; ``None`` means ``[1.]`` (K = 1).
      beta: a float (fixed ``beta_t = beta``), ``"theory"`` (eq. 36 tracked online) or
        ``"order"`` (eq. 27); beta_scale multiplies the latter two.
      delta: confidence level in (0, 1). action_bound: ``D``. lipschitz: ``L`` in [0, 1].
      dtype: float32 or float64 (default: JAX's default float).
    """
    fn, dtype = "hyperparams", state_dtype(dtype)
    if isinstance(beta, str) and beta not in ("theory", "order"):
        raise ValueError(f"beta must be a float, 'theory' or 'order', got {beta!r}")
    mode = BETA_MODES[beta if isinstance(beta, str) else "fixed"]
    if mode == BETA_MODES["fixed"]:
        beta_v = checked(fn, "beta", beta, dtype, positive=False)
    else:
        beta_v = checked(fn, "beta_scale", beta_scale, dtype)
    d = named(fn, check_float, "delta", delta, high=1.0, high_open=True)
    L = named(fn, check_float, "lipschitz", lipschitz, low_open=False, high=1.0)
    positive = {
        name: checked(fn, name, v, dtype)
        for name, v in (("lam", lam), ("eta", eta), ("S", S), ("action_bound", action_bound))
    }
    d = cast_checked(fn, "delta", d, dtype, True)
    if np.any(d >= 1):
        raise ValueError(
            f"delta must lie in (0, 1) in {dtype.name}, got {delta!r} (1 after the cast)"
        )
    extra = dict(beta=beta_v, beta_mode=np.asarray(mode, np.int32), delta=d, lipschitz=L)
    return MLogBHyperparams(**grid_arrays(fn, dtype, rewards, **positive, **extra))


class Section4(NamedTuple):
    """The paper's Section 4 recipe: hyperparameters and the sketch size ``m``."""

    hparams: MLogBHyperparams
    sketch_size: int


def section4(
    *,
    num_outcomes: int,
    dim: int,
    S: float,
    horizon: int,
    l=0.75,  # noqa: E741
    e=0.75,
    rewards=None,
    beta: float | str = "theory",
    beta_scale: float = 1.0,
    action_bound: float = 1.0,
    dtype=None,
) -> Section4:
    """Section 4's tuning: ``lam0 = sqrt(K) alpha S``, ``eta0 = S/2 + ln(K+1)/4`` (errata 8),
    ``(lam, eta) = ((sqrt(K) d)^l lam0, (sqrt(K) d)^e eta0)``, ``m = floor(K d / 10)``,
    ``delta = 1/T``, ``alpha = 2(1 + S D) + ln(K+1)`` (Theorem 1); arrays ``l``, ``e`` give a grid.
    """
    K, d = check_int("num_outcomes", num_outcomes, 1), check_int("dim", dim, 1)
    horizon = check_int("horizon", horizon, 2)  # delta = 1/T < 1
    check_float("S", S)
    check_float("action_bound", action_bound)
    alpha = 2.0 * (1.0 + S * action_bound) + math.log(K + 1)
    lam0 = math.sqrt(K) * alpha * S
    eta0 = S / 2.0 + math.log(K + 1) / 4.0
    base = math.sqrt(K) * d
    l_a, e_a = np.broadcast_arrays(np.asarray(l, float), np.asarray(e, float))
    for name, v, a in (("l", l, l_a), ("e", e, e_a)):
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} must be finite, got {v!r}")
    if rewards is None:
        rewards = [1.0] if K == 1 else list(np.linspace(1.0 / K, 1.0, K))
    hp = hyperparams(
        lam=base**l_a * lam0,
        eta=base**e_a * eta0,
        S=S,
        rewards=rewards,
        beta=beta,
        beta_scale=beta_scale,
        delta=1.0 / horizon,
        action_bound=action_bound,
        dtype=dtype,
    )
    return Section4(hp, max(1, (K * d) // 10))
