"""Lemma 2's projection (He et al., eq. 23-25) against scipy's generic constrained solver, with its
KKT conditions checked independently, through the public entry points: eq. (25) in a dense
eigendecomposition (``Vt = Q``, ``mu = e - lam``), in EOFD-MLogB's low-rank
``Z = lam I + Vt diag(mu) Vt^T`` with ``m < Kd`` columns (the residual term of eq. 25), and
``project_dense`` (OFUL-MLogB's: ``solve_dual`` with ``f`` by one Cholesky factorisation a step).

The problem is ``min_w F(w) = ||w - w'||_Z^2 s.t. ||w|| <= S``. Its KKT conditions:
``Z (w - w') + nu w = 0``, ``nu >= 0``, ``nu (S^2 - ||w||^2) = 0``. The Lagrangian
``F(v) + nu* (||v||^2 - S^2)`` is a quadratic with Hessian ``2 (Z + nu* I)`` minimised at the
optimum ``w*``, so every feasible ``v`` has ``F(v) - F(w*) >= ||v - w*||^2_{Z + nu* I}``: a
feasible scipy answer bounds its own distance to ``w*``. Scipy is an SQP method started far away;
the KKT checks are at rounding level, with tolerances derived from eps, D and the conditioning.
"""

import functools
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from scipy.optimize import NonlinearConstraint, minimize

from bandits_jax.linalg import projection
from bandits_jax.status import CONVERGED, INACTIVE
from tests import xla_defaults

EPS = np.finfo(np.float64).eps
# ||w'|| / S per instance: far out, moderately out, barely out (nu ~ 1e-9 lam), barely in, in.
RATIOS = (30.0, 1.5, 1.0 + 1e-9, 1.0 - 1e-12, 0.5)


# --- The JAX side: the public entry points, one compiled program per shape (lax.map keeps the
# unbatched lax.cond of solve_dual, i.e. what a single call runs). ---


def _dense_project(Z, wp, lam, S):
    """OFUL-MLogB's route: ``eigh`` of ``Z``, then Lemma 2 with ``Vt = Q``, ``mu = e - lam``."""
    e, Q = jnp.linalg.eigh(Z)
    mu = jnp.maximum(e - lam, 0.0)
    a = Q.T @ wp
    sol = projection.dual_root(wp @ wp, a, mu, lam, S)
    alpha, c = projection.project_coeffs(a, mu, lam, sol.nu)
    return alpha * wp + Q @ c, sol


def _lowrank_project(Vt, mu, wp, lam, S):
    """EOFD-MLogB's representation: ``m < D`` orthonormal columns, the rest of w' outside."""
    a = Vt.T @ wp
    sol = projection.dual_root(wp @ wp, a, mu, lam, S)
    alpha, c = projection.project_coeffs(a, mu, lam, sol.nu)
    return alpha * wp + Vt @ c, sol


def _cholesky_project(Z, wp, lam, S):
    """``project_dense``: ``f(nu) = ||w(nu)||^2``, ``w(nu) = (Z + nu I)^{-1} Z w'`` by one
    Cholesky factorisation a root step (eq. 23-24 without an eigendecomposition)."""
    del lam
    return projection.project_dense(Z, wp, Z @ wp, S)


_ROUTES = {"dense": _dense_project, "lowrank": _lowrank_project, "cholesky": _cholesky_project}


@functools.cache
def _mapped(route):
    fn = _ROUTES[route]
    return xla_defaults.jit(lambda args: lax.map(lambda x: fn(*x), args))


# --- Instances ---


def _instance(rng, D, m, ratio, log_cond):
    """``Z = lam I + Vt diag(mu) Vt^T`` with ``cond(Z) = 10**log_cond`` on span(Vt) (one weight
    exactly 0, as in FD's early rounds), S in [0.1, 10], ``||w'|| = ratio S``."""
    lam = 10.0 ** rng.uniform(-3, 0)
    Vt, _ = np.linalg.qr(rng.normal(size=(D, m)))
    mu = lam * (np.geomspace(1.0, 10.0**log_cond, m) - 1.0)
    rng.shuffle(mu)
    S = 10.0 ** rng.uniform(-1, 1)
    wp = rng.normal(size=D)
    wp *= ratio * S / np.linalg.norm(wp)
    return lam, Vt, mu, S, wp


def _batch(route, K, d, m, log_cond, seed):
    rng = np.random.default_rng(seed)
    D = K * d
    inst = [_instance(rng, D, m, r, log_cond) for r in RATIOS]
    lam, Vt, mu, S, wp = (np.stack(x) for x in zip(*inst, strict=True))
    Z = lam[:, None, None] * np.eye(D) + np.einsum("bij,bj,bkj->bik", Vt, mu, Vt)
    Z = 0.5 * (Z + np.swapaxes(Z, 1, 2))
    args = (Vt, mu, wp, lam, S) if route == "lowrank" else (Z, wp, lam, S)
    w, sol = _mapped(route)(tuple(jnp.asarray(x) for x in args))
    return Z, wp, lam, S, np.asarray(w), sol


# --- The generic solver ---


def _scipy_projection(Z, wp, S):
    """SLSQP on ``F`` in ``u = w / S`` (so ``||u|| <= 1``; objective divided by ``lambda_max S^2``)
    from ``u0 = 10 (1, ..., 1) / sqrt(D)`` (ten radii out, unrelated to w'), run until it makes no
    progress (``ftol`` below any attainable change); the answer scaled back into the ball if it
    ends a rounding outside, so that it is feasible."""
    Zs, up = Z / np.linalg.eigvalsh(Z)[-1], wp / S
    res = minimize(
        lambda u: (u - up) @ Zs @ (u - up),
        np.full_like(up, 10.0 / np.sqrt(up.size)),
        jac=lambda u: 2.0 * Zs @ (u - up),
        method="SLSQP",
        constraints=NonlinearConstraint(lambda u: u @ u, -np.inf, 1.0, jac=lambda u: 2.0 * u[None]),
        options=dict(ftol=1e-30, maxiter=2000),
    )
    # 0: converged; 8: the line search found no descent (the rounding floor); not 9 (maxiter).
    assert res.status in (0, 8), res.message
    v = res.x * S
    return v * min(1.0, S / np.linalg.norm(v))


def _F(Z, wp, w):
    r = w - wp
    return r @ Z @ r


# --- The checks ---

CASES = [  # route, K, d (D = K d), m (columns of Vt), log10 cond(Z)
    ("dense", 1, 2, 2, 2),
    ("dense", 2, 3, 6, 8),
    ("dense", 4, 5, 20, 4),
    ("dense", 3, 10, 30, 8),
    ("lowrank", 2, 3, 2, 6),
    ("lowrank", 4, 5, 8, 8),
    ("lowrank", 3, 10, 12, 3),
    ("cholesky", 2, 6, 12, 6),
    ("cholesky", 4, 5, 20, 8),
]


@pytest.mark.parametrize("route,K,d,m,log_cond", CASES)
def test_matches_scipy_and_satisfies_kkt(route, K, d, m, log_cond):
    """Compares with scipy's SLSQP (a generic constrained solver) and checks the KKT conditions
    in numpy with the dense ``Z``, on active (``||w'|| > S``) and inactive instances."""
    seed = zlib.crc32(f"{route}-{K}-{d}-{m}".encode())
    Z, wp, lam, S, w, sol = _batch(route, K, d, m, log_cond, seed)
    nu, status = np.asarray(sol.nu), np.asarray(sol.status)
    D = K * d
    for i, ratio in enumerate(RATIOS):
        Zi, wpi, Si, wi, nui = Z[i], wp[i], S[i], w[i], nu[i]
        lmax = np.linalg.eigvalsh(Zi)[-1]
        # Rounding of w = alpha w' + Vt c: the two D-term products Vt^T w' and Vt c (Higham's
        # gamma_D ~ D eps each, ||Vt|| = 1; the two terms of eq. 23 never cancel, both are
        # nonnegative multiples of a_i in each direction), on the dense route eigh's backward
        # error (~ D eps ||Z||), on the Cholesky route the solve's (as much); 4 D eps ||w'||.
        dw_tol = 4 * D * EPS * np.linalg.norm(wpi)
        # |psi| <= 8 eps stops the root (errata 3): ||w|| = S to 8 eps, plus w's rounding; on
        # the Cholesky route f itself carries the solve's forward error, cond(Z + nu I) D eps.
        norm_tol = 8 * EPS * Si + dw_tol
        if route == "cholesky":
            e = np.linalg.eigvalsh(Zi)
            norm_tol += (e[-1] + nui) / (e[0] + nui) * D * EPS * Si
        if ratio < 1.0:  # inactive: w' itself (bitwise), nu = 0
            assert status[i] == INACTIVE and not bool(sol.active[i])
            assert nui == 0.0
            np.testing.assert_array_equal(wi, wpi)
        else:  # active: on the sphere (complementary slackness with nu > 0)
            assert status[i] == CONVERGED and bool(sol.active[i])
            assert nui > 0.0
            assert abs(np.linalg.norm(wi) - Si) <= norm_tol
        # Stationarity: grad F(w) = 2 Z (w - w') = -2 nu w. The tangential part of the gradient
        # vanishes, its radial part points inwards (nu_hat >= 0) and equals JAX's nu. A rounding
        # dw of w moves Z (w - w') + nu w by at most (lambda_max + nu) dw.
        g = Zi @ (wi - wpi)
        n_hat = wi / np.linalg.norm(wi)
        res_tol = (lmax + nui) * dw_tol
        assert np.linalg.norm(g - (g @ n_hat) * n_hat) <= res_tol
        nu_hat = -(g @ wi) / (wi @ wi)
        assert nu_hat >= -res_tol / Si
        assert abs(nu_hat - nui) <= res_tol / Si
        assert np.linalg.norm(g + nui * wi) <= res_tol
        # Generic solver. F's rounding: a dw shift of w moves F by <= 2 ||Z (w - w')|| dw +
        # lambda_max dw^2, a radial error of the norm (norm_tol) by 2 nu S norm_tol, and each
        # quadratic form r^T Z r below rounds by ~ D eps lambda_max ||r||^2.
        v = _scipy_projection(Zi, wpi, Si)
        r_sq = sum(np.sum((x - y) ** 2) for x, y in ((wi, wpi), (v, wpi), (v, wi)))
        f_tol = (
            2 * np.linalg.norm(g) * dw_tol
            + lmax * dw_tol**2
            + 2 * nui * Si * norm_tol
            + 2 * D * EPS * lmax * r_sq
        )
        f_w, f_v = _F(Zi, wpi, wi), _F(Zi, wpi, v)
        # JAX's answer is no worse than scipy's feasible one ...
        assert f_w <= f_v + f_tol, (f_w, f_v, f_tol)
        # ... scipy reached the optimum to its rounding floor (so the comparison means
        # something: 1e3 eps of F's scale lambda_max (||w'|| + S)^2, which SLSQP attains) ...
        assert f_v - f_w <= 1e3 * EPS * lmax * (np.linalg.norm(wpi) + Si) ** 2, (f_v, f_w)
        # ... and scipy's point lies as close to JAX's as the Lagrangian's strong convexity
        # allows: F(v) - F(w*) >= ||v - w*||^2_{Z + nu I} for every feasible v.
        dist_sq = (v - wi) @ (Zi @ (v - wi) + nui * (v - wi))
        assert dist_sq <= (f_v - f_w) + f_tol, (dist_sq, f_v - f_w, f_tol)


def test_batched_call_equals_single_calls():
    """Under ``vmap`` (both branches of the dual's ``lax.cond`` run, as in a vmapped sweep) the
    projection equals the unbatched calls: bitwise w' where inactive, to rounding elsewhere."""
    K, d, m = 2, 3, 6
    seed = zlib.crc32(b"vmap-projection")
    Z, wp, lam, S, w_single, _ = _batch("dense", K, d, m, 5, seed)
    w_vmap, sol = xla_defaults.jit(jax.vmap(_dense_project))(
        *(jnp.asarray(x) for x in (Z, wp, lam, S))
    )
    w_vmap = np.asarray(w_vmap)
    for i, ratio in enumerate(RATIOS):
        if ratio < 1.0:
            assert int(sol.status[i]) == INACTIVE
            np.testing.assert_array_equal(w_vmap[i], wp[i])
        else:
            assert int(sol.status[i]) == CONVERGED
            # Two compilations of the same formulas: each within its 4 D eps ||w'|| rounding.
            np.testing.assert_allclose(
                w_vmap[i], w_single[i], rtol=0, atol=8 * K * d * EPS * np.linalg.norm(wp[i])
            )
