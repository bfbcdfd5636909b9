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

from bandits_jax.checks import check_float, check_int
from bandits_jax.mlogb.confidence import BETA_MODES


class MLogBHyperparams(NamedTuple):
    """Hyperparameters (all arrays; leading axes, if any, are grid axes).

    Attributes:
      lam: regulariser ``lambda > 0`` (``H_1 = lam I``).
      eta: ONS step size ``eta > 0``.
      S: radius of the parameter ball ``||W||_F <= S``.
      rewards: (..., K) outcome rewards ``r_1..r_K`` (``r_0 = 0``).
      beta: the fixed radius (mode ``fixed``) or a scale factor (modes ``theory``/``order``).
      beta_mode: int32, 0 fixed, 1 theory (eq. 36), 2 order (eq. 27).
      delta: confidence level in (0, 1).
      action_bound: ``D >= sup ||x||`` (Assumption 1).
      lipschitz: ``L`` of Assumption 2 (upper bound on ``grad sigma``).
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


def _cast(name: str, value: np.ndarray, dtype: np.dtype, *, low: float, low_open: bool):
    """Casts to ``dtype`` and checks the cast values: finite and above ``low``."""
    with np.errstate(over="ignore", under="ignore"):
        c = np.asarray(value, dtype=float).astype(dtype)
    bad = ~np.isfinite(c) | ((c <= low) if low_open else (c < low))
    if np.any(bad):
        want = f"> {low:g}" if low_open else f">= {low:g}"
        raise ValueError(
            f"{name} must be finite and {want} in {dtype.name}, got {value!r} "
            f"({np.asarray(c).ravel()[np.argmax(np.ravel(bad))]!r} after the cast to {dtype.name})"
        )
    return c


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
      beta: a float (fixed ``beta_t = beta``, used as ``sqrt(beta)`` and ``beta`` in eq. 19),
        ``"theory"`` (eq. 36 tracked online) or ``"order"`` (eq. 27).
      beta_scale: multiplies the theory/order radius.
      delta: confidence level in (0, 1).
      action_bound: bound ``D`` on action norms; lipschitz: ``L`` in [0, 1].
      dtype: floating dtype of the state (default: JAX's default float, float32 unless
        ``jax_enable_x64`` is on). float32 is the faster choice for large sweeps; use float64 to
        compare with a reference implementation or with another run to the last bits (the
        command and the exactness tests run in float64).

    Raises:
      ValueError: naming the offending argument.
    """
    dtype = state_dtype(dtype)
    lam_a, eta_a, S_a = check_float("lam", lam), check_float("eta", eta), check_float("S", S)
    r = check_rewards(rewards)
    if isinstance(beta, str):
        if beta not in ("theory", "order"):
            raise ValueError(f"beta must be a float, 'theory' or 'order', got {beta!r}")
        mode = BETA_MODES[beta]
        beta_v = check_float("beta_scale", beta_scale)
        beta_name = "beta_scale"
    else:
        mode = BETA_MODES["fixed"]
        beta_v = np.asarray(beta, dtype=float)
        if not np.all(np.isfinite(beta_v)) or np.any(beta_v < 0):
            raise ValueError(f"beta must be finite and >= 0, got {beta!r}")
        beta_name = "beta"
    d = np.asarray(delta, dtype=float)
    if not np.all((d > 0) & (d < 1)):  # NaN fails too
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    D = check_float("action_bound", action_bound)
    L = np.asarray(lipschitz, dtype=float)
    if not np.all((L >= 0) & (L <= 1)):  # NaN fails too
        raise ValueError(f"lipschitz must lie in [0, 1], got {lipschitz!r}")
    # Validate the values the state will hold (float32: 1e-300 -> 0, 1e300 -> inf).
    lam_a = _cast("lam", lam_a, dtype, low=0.0, low_open=True)
    eta_a = _cast("eta", eta_a, dtype, low=0.0, low_open=True)
    S_a = _cast("S", S_a, dtype, low=0.0, low_open=True)
    D = _cast("action_bound", D, dtype, low=0.0, low_open=True)
    r = _cast("rewards", r, dtype, low=0.0, low_open=False)
    beta_v = _cast(beta_name, beta_v, dtype, low=0.0, low_open=mode != BETA_MODES["fixed"])
    d = _cast("delta", d, dtype, low=0.0, low_open=True)
    if np.any(d >= 1):
        raise ValueError(
            f"delta must lie in (0, 1) in {dtype.name}, got {delta!r} (1 after the cast)"
        )
    scalars = np.broadcast_arrays(lam_a, eta_a, S_a, beta_v, d, D, L, r[..., 0])
    batch = scalars[0].shape
    f = lambda a: jnp.asarray(np.broadcast_to(a, batch), dtype)  # noqa: E731
    return MLogBHyperparams(
        lam=f(lam_a),
        eta=f(eta_a),
        S=f(S_a),
        rewards=jnp.asarray(np.broadcast_to(r, batch + r.shape[-1:]), dtype),
        beta=f(beta_v),
        beta_mode=jnp.full(batch, mode, jnp.int32),
        delta=f(d),
        action_bound=f(D),
        lipschitz=f(L),
    )


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
    """Section 4's tuning: ``lam0 = sqrt(K) alpha S``, ``eta0 = S/2 + ln(K+1)/4``,
    ``(lam, eta) = ((sqrt(K) d)^l lam0, (sqrt(K) d)^e eta0)``, ``m = floor(K d / 10)``,
    ``delta = 1/T``, with ``alpha = 2(1 + S D) + ln(K+1)`` (Theorem 1).

    ``l`` and ``e`` may be arrays (the paper's grid is ``{-0.5, ..., 1}^2``): the result is then a
    batched hyperparameter set. Errata 8: ``eta0`` is not Theorem 1's ``eta = alpha/2``.
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
