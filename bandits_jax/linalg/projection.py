"""Projection onto ``{w : ||w||_2 <= S}`` in the norm of ``Zt = lam I + Vt diag(mu) Vt^T``.

EOFD-MLogB (He et al.), Lemma 2, eq. (23)-(25). The KKT conditions of
``min ||w - w'||_{Zt}^2 s.t. ||w|| <= S`` give ``w = (Zt + nu I)^{-1} Zt w'``, i.e. eq. (23):

    w = lam/(lam+nu) w' + nu/(lam+nu) Vt diag(mu / (lam+nu+mu)) Vt^T w',

with ``nu > 0`` the root of ``f(nu) = S^2`` (eq. 24), where (eq. 25, zero-weight columns of
``Vt`` never matter)

    f(nu) = r0 lam^2/(lam+nu)^2 + sum_i a_i^2 (mu_i+lam)^2/(mu_i+lam+nu)^2,
    a = Vt^T w',  r0 = max(||w'||^2 - ||a||^2, 0)   (errata 2: clip the cancellation).

Errata 3: Newton runs on ``psi(nu) = S / sqrt(f(nu)) - 1`` (increasing and concave, so from
``nu = 0`` it climbs monotonically to the root) in the bracket
``[0, (max mu + lam)(||w'||/S - 1)]`` with bisection as a fallback, converging on ``||w||``.
A root that is not ``CONVERGED`` or lies outside the ball by more than ``ROOT_TOL`` eps is
replaced by the bracket's feasible end, so ``||w|| <= S`` up to :func:`ball_margin`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax.linalg import lapack
from bandits_jax.linalg.roots import RootResult, bracketed_newton
from bandits_jax.status import CONVERGED, INACTIVE

#: Lemma 2's root is accepted at ``psi(nu) >= -ROOT_TOL eps`` (also the Newton loop's ``ftol``).
ROOT_TOL = 8.0
#: Rounding of Lemma 2's representation of ``||w||``, in ``sqrt(K d) eps`` (:func:`ball_margin`).
ROUNDING_PER_SQRT_DIM = 4.0


def ball_margin(size: int, dtype) -> float:
    """Relative margin ``(ROOT_TOL + ROUNDING_PER_SQRT_DIM sqrt(K d)) eps`` by which a projected
    ``w`` of ``size = K d`` entries may leave the ball through rounding: the root's tolerance and
    ``sqrt(K d) eps`` (Higham & Mary's probabilistic bound) for each of ``f(nu)``, the assembly
    of ``w`` and the check's ``||w||``."""
    return (ROOT_TOL + ROUNDING_PER_SQRT_DIM * math.sqrt(size)) * float(jnp.finfo(dtype).eps)


class DualSolution(NamedTuple):
    """Dual variable of Lemma 2 and its diagnostics.

    Attributes:
      nu: the root (0 when the projection is inactive, ``||w'|| <= S``).
      status: ``CONVERGED``/``MAX_STEPS``/``NONFINITE``/``INACTIVE`` (int32).
    """

    nu: jax.Array
    active: jax.Array
    steps: jax.Array
    status: jax.Array


def effective_norm_sq(w_sq: jax.Array, S: jax.Array) -> jax.Array:
    """``||w'||^2`` when the projection is active, else ``S^2`` (the loop then stops at once)."""
    return jnp.where(w_sq > S**2, w_sq, S**2)


def solve_dual(
    f_and_df: Callable[[jax.Array], tuple[jax.Array, jax.Array]],
    w_sq: jax.Array,
    S: jax.Array,
    curvature: jax.Array,
    *,
    max_steps: int = 50,
) -> DualSolution:
    """Finds ``nu >= 0`` with ``f(nu) = S^2`` for any representation of eq. (25)'s ``f``.

    Args:
      f_and_df: ``nu -> (f(nu), f'(nu))`` with ``f(0) = effective_norm_sq(w_sq, S)``.
      w_sq: ``||w'||^2``.
      curvature: an upper bound on the largest eigenvalue of ``Zt`` (brackets the root).
    """
    dtype = jnp.result_type(w_sq, S, curvature)
    eps = jnp.finfo(dtype).eps
    active = w_sq > S**2

    def psi(nu):
        f, df = f_and_df(nu)
        root_f = jnp.sqrt(f)
        return S / root_f - 1.0, -0.5 * S * df / (f * root_f)

    hi = curvature * (jnp.sqrt(effective_norm_sq(w_sq, S)) / S - 1.0)
    zero = jnp.zeros((), dtype)

    def newton(hi):
        tol = dict(ftol=ROOT_TOL * eps, xtol=4 * eps)
        return bracketed_newton(psi, zero, hi, zero, max_steps=max_steps, **tol)

    def skip(hi):
        i0 = jnp.zeros((), jnp.int32)
        return RootResult(zero, zero, i0, jnp.full((), int(INACTIVE), jnp.int32), zero, zero)

    # Unbatched calls skip the loop when the ball is not left; under vmap the selects decide.
    res = lax.cond(active, newton, skip, hi)
    # Keep x only when converged and feasible (psi >= -tol), else the bracket's feasible end.
    good = (res.status == CONVERGED) & (res.fx >= -ROOT_TOL * eps)
    nu = jnp.where(active, jnp.where(good, res.x, res.hi), 0.0)
    status = jnp.where(active, res.status, INACTIVE).astype(jnp.int32)
    steps = jnp.where(active, res.steps, 0).astype(jnp.int32)
    return DualSolution(nu=nu, active=active, steps=steps, status=status)


def dual_root(
    w_sq: jax.Array,
    a: jax.Array,
    mu: jax.Array,
    lam: jax.Array,
    S: jax.Array,
    *,
    max_steps: int = 50,
) -> DualSolution:
    """Solves eq. (24) for ``nu`` given ``||w'||^2``, ``a = Vt^T w'`` and ``mu`` (eq. 25)."""
    r0 = jnp.maximum(effective_norm_sq(w_sq, S) - jnp.sum(a * a), 0.0)
    a2 = a * a
    c = mu + lam

    def f_and_df(nu):
        p = lam + nu
        q = c + nu
        f = r0 * lam**2 / p**2 + jnp.sum(a2 * c**2 / q**2)
        df = -2.0 * r0 * lam**2 / p**3 - 2.0 * jnp.sum(a2 * c**2 / q**3)
        return f, df

    curvature = jnp.maximum(jnp.max(c), lam) if mu.size else lam
    return solve_dual(f_and_df, w_sq, S, curvature, max_steps=max_steps)


def project_coeffs(
    a: jax.Array, mu: jax.Array, lam: jax.Array, nu: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Eq. (23) in two parts: returns ``(alpha, c)`` with ``w_new = alpha w' + Vt c``."""
    p = lam + nu
    return lam / p, (nu / p) * (mu / (p + mu)) * a


def project_dense(
    Z: jax.Array, w_prime: jax.Array, z: jax.Array, S: jax.Array, *, max_steps: int = 50
) -> tuple[jax.Array, DualSolution]:
    """Lemma 2 for a dense symmetric positive-definite ``Z`` (n x n): returns ``(w, solution)``,
    ``w = (Z + nu I)^{-1} Z w'`` the projection of ``w'`` onto ``||w|| <= S`` in the Z-norm.

    ``z = Z w'`` (given, so that callers with ``w' = w - Z^{-1} g`` pass ``Z w - g`` exactly).
    Each Newton step on eq. (24) factors ``Z + nu I`` once: ``f(nu) = ||w(nu)||^2`` and
    ``f'(nu) = -2 ||L^{-1} w(nu)||^2`` (``L L^T = Z + nu I``), batched Cholesky solves in place
    of an eigendecomposition (one batch on every platform). The bracket's curvature is
    Gershgorin's bound on ``lambda_max(Z)``.
    """
    eye = jnp.eye(Z.shape[0], dtype=Z.dtype)

    def solve(nu):
        L = lapack.cholesky(Z + nu * eye)
        return L, lapack.cho_solve(L, z)

    def f_and_df(nu):
        L, w = solve(nu)
        v = lapack.lower_solve(L, w)
        return w @ w, -2.0 * (v @ v)

    curvature = jnp.max(jnp.sum(jnp.abs(Z), axis=1))
    sol = solve_dual(f_and_df, w_prime @ w_prime, S, curvature, max_steps=max_steps)
    return jnp.where(sol.active, solve(sol.nu)[1], w_prime), sol
