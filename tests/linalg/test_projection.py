"""Lemma 2 (eq. 23-25) against a dense solve of the QCQP min ||w - w'||_Z^2 s.t. ||w|| <= S."""

import jax
import numpy as np
import pytest

from bandits_jax.linalg import projection, roots


def _dense_qcqp(Z, wp, S):
    """KKT by dense linear algebra: w(nu) = (Z + nu I)^{-1} Z wp, ||w(nu)|| = S by bisection."""
    if np.linalg.norm(wp) <= S:
        return wp, 0.0
    I = np.eye(len(wp))
    w_of = lambda nu: np.linalg.solve(Z + nu * I, Z @ wp)  # noqa: E731
    lo, hi = 0.0, 1.0
    while np.linalg.norm(w_of(hi)) > S:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.linalg.norm(w_of(mid)) > S else (lo, mid)
    return w_of(hi), hi


@jax.jit
def _project(wp, Vt, mu, lam, S):
    a = Vt.T @ wp
    sol = projection.dual_root(wp @ wp, a, mu, lam, S)
    alpha, c = projection.project_coeffs(a, mu, lam, sol.nu)
    return alpha * wp + Vt @ c, sol


@pytest.mark.parametrize("scale", [1.001, 1.5, 50.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_projection_matches_dense_qcqp(scale, seed):
    rng = np.random.default_rng(seed)
    D, r, lam, S = 10, 4, 0.3, 2.0
    Vt, _ = np.linalg.qr(rng.normal(size=(D, r)))
    mu = np.array([1e3, 10.0, 0.5, 0.0])
    wp = rng.normal(size=D)
    wp *= scale * S / np.linalg.norm(wp)
    Z = lam * np.eye(D) + (Vt * mu) @ Vt.T
    w, sol = _project(wp, Vt, mu, lam, S)
    w_ref, nu_ref = _dense_qcqp(Z, wp, S)
    assert bool(sol.active) and int(sol.status) == roots.CONVERGED
    np.testing.assert_allclose(np.linalg.norm(w), S, rtol=1e-12)
    np.testing.assert_allclose(w, w_ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(float(sol.nu), nu_ref, rtol=1e-6)


def test_inside_ball_is_identity():
    rng = np.random.default_rng(3)
    Vt, _ = np.linalg.qr(rng.normal(size=(6, 2)))
    wp = 0.5 * rng.normal(size=6) / 10
    w, sol = _project(wp, Vt, np.array([2.0, 1.0]), 1.0, 1.0)
    assert not bool(sol.active) and int(sol.status) == roots.INACTIVE
    np.testing.assert_allclose(w, wp, rtol=0, atol=0)
