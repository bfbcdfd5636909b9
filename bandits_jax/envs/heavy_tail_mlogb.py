"""A synthetic MLogB stream whose action covariance has a heavy (polynomial) spectral tail.

Frequent Directions' weak case (Wen et al., "Matrix Sketching in Bandits: Current Pitfalls and
New Framework", ICLR 2026, arXiv 2410.10258): without a small effective rank, a rank-m sketch
discards mass every round and EOFD-MLogB's ``rho_{1:T}`` (He et al., Theorem 2) grows linearly.

``W*`` is drawn as :func:`~bandits_jax.envs.synthetic_mlogb.synthetic_mlogb` draws it from the
same key, ``Q`` (d x d) is a random orthonormal basis from ``fold_in(key, 1)``, and each round's
unit actions ``x = Q diag(lam)^{1/2} g / ||diag(lam)^{1/2} g||`` (``lam_i = i^{-decay}``,
``g ~ N(0, I_d)``) have exactly (:func:`action_spectrum`) ``E[x x^T] = Q diag(mu) Q^T`` with::

    mu_i = int_0^inf lam_i / (1 + 2 t lam_i) prod_j (1 + 2 t lam_j)^{-1/2} dt,   sum_i mu_i = 1,

somewhat flatter than ``lam / sum(lam)``; ``decay = 0`` is the isotropic stream.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.checks import check_int
from bandits_jax.envs.synthetic_mlogb import (
    BasisState,
    MLogBEnvFunctions,
    build_env,
    check_number,
    check_stream,
)
from bandits_jax.linalg import lapack


def shape_spectrum(dim: int, decay: float) -> np.ndarray:
    """``lam_i = i^{-decay}`` (i = 1..d), the shape matrix's eigenvalues (float64, descending)."""
    return np.arange(1, dim + 1, dtype=np.float64) ** -float(decay)


def action_spectrum(dim: int, decay: float, *, points: int = 4001) -> np.ndarray:
    """The action covariance's eigenvalues ``mu`` (descending, summing to 1): the module
    docstring's integral on ``t = e^u``, ``u in [-40, 40]``, by the trapezoid rule."""
    d = check_int("dim", dim)
    lam = shape_spectrum(d, check_number("decay", decay, positive=False))
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
    """Builds the heavy-tailed action stream (module docstring); other arguments as
    :func:`~bandits_jax.envs.synthetic_mlogb.synthetic_mlogb`, states :class:`BasisState`.

    Args:
      decay: ``>= 0``, the shape's eigenvalues ``i^{-decay}`` (0: isotropic; at most 1: the tail
        beyond any fixed rank keeps a constant or growing share of the trace as d grows).

    Raises:
      ValueError: ``heavy_tail_mlogb: <argument> ...``, an argument out of range.
    """
    try:
        c = check_stream(num_outcomes, dim, S, rewards, min_actions, max_actions, dtype)
        decay = check_number("decay", decay, positive=False)
    except ValueError as err:
        raise ValueError(f"heavy_tail_mlogb: {err}") from None
    root = np.sqrt(shape_spectrum(c.d, decay))  # host constant, cast per trace

    def init(key: jax.Array) -> BasisState:
        W = jax.random.normal(key, (c.K, c.d), c.dtype)  # as synthetic_mlogb's
        Q, _ = lapack.qr(jax.random.normal(jax.random.fold_in(key, 1), (c.d, c.d), c.dtype))
        return BasisState(c.scaled(W), jnp.asarray(c.rewards, c.dtype), Q)

    def draw_actions(state: BasisState, key: jax.Array) -> jax.Array:
        g = jax.random.normal(key, (c.max_actions, c.d), c.dtype)
        return (g * jnp.asarray(root, c.dtype)) @ state.basis.T  # normalised by build_env

    return build_env(c, init, draw_actions)
