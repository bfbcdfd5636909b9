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


def _positive(name: str, value) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return arr


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
      dtype: floating dtype of the state (default: JAX's default float).

    Raises:
      ValueError: naming the offending argument.
    """
    dtype = jnp.dtype(dtype) if dtype is not None else jnp.zeros(()).dtype
    lam_a, eta_a, S_a = _positive("lam", lam), _positive("eta", eta), _positive("S", S)
    if rewards is None:
        rewards = [1.0]
    r = np.asarray(rewards, dtype=float)
    if r.ndim < 1 or r.shape[-1] < 1:
        raise ValueError(f"rewards must have shape (K,) with K >= 1, got shape {r.shape}")
    if not np.all(np.isfinite(r)) or np.any(r < 0):
        raise ValueError(f"rewards must be finite and >= 0, got {rewards!r}")
    if isinstance(beta, str):
        if beta not in ("theory", "order"):
            raise ValueError(f"beta must be a float, 'theory' or 'order', got {beta!r}")
        mode = BETA_MODES[beta]
        beta_v = _positive("beta_scale", beta_scale)
    else:
        mode = BETA_MODES["fixed"]
        beta_v = np.asarray(beta, dtype=float)
        if not np.all(np.isfinite(beta_v)) or np.any(beta_v < 0):
            raise ValueError(f"beta must be finite and >= 0, got {beta!r}")
    d = np.asarray(delta, dtype=float)
    if np.any(d <= 0) or np.any(d >= 1):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    D = _positive("action_bound", action_bound)
    L = np.asarray(lipschitz, dtype=float)
    if np.any(L < 0) or np.any(L > 1):
        raise ValueError(f"lipschitz must lie in [0, 1], got {lipschitz!r}")
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
    K, d = int(num_outcomes), int(dim)
    if K < 1:
        raise ValueError(f"num_outcomes must be >= 1, got {num_outcomes}")
    if d < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    if horizon < 2:
        raise ValueError(f"horizon must be >= 2 (delta = 1/T < 1), got {horizon}")
    _positive("S", S)
    alpha = 2.0 * (1.0 + S * action_bound) + math.log(K + 1)
    lam0 = math.sqrt(K) * alpha * S
    eta0 = S / 2.0 + math.log(K + 1) / 4.0
    base = math.sqrt(K) * d
    l_a, e_a = np.broadcast_arrays(np.asarray(l, float), np.asarray(e, float))
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
