"""A synthetic MLogB stream whose action covariance has a heavy (polynomial) spectral tail.

Frequent Directions' weak case (Wen et al., "Matrix Sketching in Bandits: Current Pitfalls and
New Framework", ICLR 2026, arXiv 2410.10258): when the action covariance has no small
effective rank, a rank-m sketch discards mass every round and EOFD-MLogB's sketching error
``rho_{1:T}`` (He et al., Theorem 2's ``Delta_T = 1 + rho_{1:T}/lam``) grows linearly in T.

``init(key)`` draws ``W*`` exactly as :func:`bandits_jax.envs.synthetic_mlogb.synthetic_mlogb`
does from the same key (Gaussian ``K x d`` scaled to ``||W*||_F = S``) and a uniformly random
orthonormal basis ``Q`` (d x d, QR of a Gaussian matrix from ``fold_in(key, 1)``), fixed for the
trial. Each round draws ``max_actions`` actions::

    x = Q diag(lam)^{1/2} g / ||diag(lam)^{1/2} g||,   lam_i = i^{-decay} (i = 1..d),
    g ~ N(0, I_d),

of which a uniform number in ``[min_actions, max_actions]`` is shown (mask): unit actions
(``||x|| = 1``, as in the other streams), from the angular central Gaussian law with shape
``Q diag(lam) Q^T``. Their covariance is exactly (the normalisation changes the spectrum; with
``1/a = int_0^inf e^{-ta} dt`` and ``E[g^2 e^{-s g^2}] = (1 + 2s)^{-3/2}``)::

    E[x x^T] = Q diag(mu) Q^T,
    mu_i = int_0^inf lam_i / (1 + 2 t lam_i) prod_j (1 + 2 t lam_j)^{-1/2} dt,   sum_i mu_i = 1,

(:func:`action_spectrum`). ``mu`` is ordered like ``lam``, and ``mu_i`` is proportional to
``lam_i`` only in the limit ``sum lam^2 << (sum lam)^2``: the normalisation damps the head a
little, so ``mu`` is somewhat flatter than ``lam / sum(lam)`` (values: ``docs/evidence.md``,
"envs.heavy_tail_mlogb"). ``decay = 0`` is the isotropic stream (uniform on the sphere, as
Section 4's, rotated by ``Q``). Outcomes, rewards and the round structure are those of the
Section 4 stream (shared code).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.envs.synthetic_mlogb import (
    MLogBEnvFunctions,
    _build_env,
    _check_common,
    _check_int,
    _check_number,
)
from bandits_jax.linalg import lapack

__all__ = ["HeavyTailState", "action_spectrum", "heavy_tail_mlogb", "shape_spectrum"]


class HeavyTailState(NamedTuple):
    """Environment state: ``W*`` (K, d), rewards (K,), the orthonormal basis ``Q`` (d, d) whose
    column i carries the covariance eigenvalue ``mu_i`` (:func:`action_spectrum`)."""

    W_star: jax.Array
    rewards: jax.Array
    basis: jax.Array


def shape_spectrum(dim: int, decay: float) -> np.ndarray:
    """``lam_i = i^{-decay}`` (i = 1..d), the shape matrix's eigenvalues (float64, descending)."""
    return np.arange(1, dim + 1, dtype=np.float64) ** -float(decay)


def action_spectrum(dim: int, decay: float, *, points: int = 4001) -> np.ndarray:
    """The eigenvalues ``mu`` of the action covariance ``E[x x^T] = Q diag(mu) Q^T`` (module
    docstring; descending, summing to 1), float64.

    The integral is taken on ``t = e^u``, ``u in [-40, 40]``, by the trapezoid rule (the
    integrand is smooth and decays at both ends, where the rule converges geometrically).
    """
    d = _check_int("dim", dim)
    lam = shape_spectrum(d, _check_number("decay", decay, positive=False))
    u = np.linspace(-40.0, 40.0, int(points))
    t = np.exp(u)[:, None]
    log_prod = -0.5 * np.sum(np.log1p(2.0 * t * lam), axis=1, keepdims=True)
    f = lam / (1.0 + 2.0 * t * lam) * np.exp(log_prod) * t  # dt = t du
    return np.trapezoid(f, u, axis=0)


def heavy_tail_mlogb(
    *,
    num_outcomes: int,
    dim: int,
    decay: float,
    S: float = 1.0,
    rewards=None,
    min_actions: int = 10,
    max_actions: int = 30,
    dtype=None,
) -> MLogBEnvFunctions:
    """Builds the heavy-tailed action stream (see module docstring).

    Args:
      num_outcomes: ``K >= 1``.
      dim: ``d >= 1``.
      decay: ``>= 0``, the shape's eigenvalues ``i^{-decay}`` (0: isotropic; 1 and below: a
        tail that keeps a constant or growing share of the trace beyond any fixed rank as d
        grows).
      S: ``||W*||_F > 0``.
      rewards: ``(K,)`` rewards of outcomes 1..K (default ``linspace(1/K, 1, K)``).
      min_actions: fewest actions shown per round.
      max_actions: most actions per round (the padded size).
      dtype: float dtype of the state and actions; default JAX's default float.

    Returns:
      An :class:`~bandits_jax.envs.synthetic_mlogb.MLogBEnvFunctions` with
      :class:`HeavyTailState` states.

    Raises:
      ValueError: ``heavy_tail_mlogb: <argument> ...``, an argument out of range (NaN and
        infinities included).
    """
    try:
        c = _check_common(num_outcomes, dim, S, rewards, min_actions, max_actions, dtype)
        decay = _check_number("decay", decay, positive=False)
    except ValueError as err:
        raise ValueError(f"heavy_tail_mlogb: {err}") from None
    root = np.sqrt(shape_spectrum(c.d, decay))  # host constant, cast per trace

    def init(key: jax.Array) -> HeavyTailState:
        W = jax.random.normal(key, (c.K, c.d), c.dtype)  # as synthetic_mlogb's
        Q, _ = lapack.qr(jax.random.normal(jax.random.fold_in(key, 1), (c.d, c.d), c.dtype))
        return HeavyTailState(W * (c.S / jnp.linalg.norm(W)), jnp.asarray(c.rewards, c.dtype), Q)

    def draw_actions(state: HeavyTailState, key: jax.Array) -> jax.Array:
        g = jax.random.normal(key, (c.max_actions, c.d), c.dtype)
        return (g * jnp.asarray(root, c.dtype)) @ state.basis.T  # normalised by _build_env

    return _build_env(c, init, draw_actions)
