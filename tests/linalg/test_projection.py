"""Lemma 2 (eq. 23-25) against a dense solve of the QCQP min ||w - w'||_Z^2 s.t. ||w|| <= S."""

import jax
import jax.numpy as jnp
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


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("D", [1, 12, 160])
def test_ball_margin_covers_lemma2_to_rounding(dtype, D):
    """``projection.ball_margin`` against the norm of Lemma 2's result computed independently,
    in numpy's long double from the very numbers the projection saw: over 200 random projections
    (a sketch ``Vt`` of rank D/3 and a full one, as OFUL's, ``w'`` 1e-7 to 30 relative outside)
    none ends outside by more than the margin, the representation's share (``||w||`` against
    ``sqrt(f(nu))``, both long double) is within its ``4 sqrt(D) eps`` and the root's share
    reaches past ``4 eps`` (so the margin's ``ROOT_TOL = 8`` is needed)."""
    eps = float(jnp.finfo(dtype).eps)
    margin = projection.ball_margin(D, dtype)
    assert margin == pytest.approx((projection.ROOT_TOL + 4.0 * np.sqrt(D)) * eps, rel=1e-12)
    rng = np.random.default_rng(D)
    n, lam, S = 100, 0.5, 2.0
    worst_total, worst_rep = 0.0, 0.0
    for r in (max(1, D // 3), D):
        pool = [np.linalg.qr(rng.normal(size=(D, r)))[0] for _ in range(2)]  # few LAPACK calls
        Vt = np.stack([pool[i % 2] for i in range(n)])
        mu = 10.0 ** rng.uniform(-2, 3, size=(n, r))
        wp = rng.normal(size=(n, D))
        outside = 1 + 10.0 ** rng.uniform(-7, 1.5, size=(n, 1))
        wp *= S * outside / np.linalg.norm(wp, axis=1, keepdims=True)
        args = [np.asarray(v, dtype) for v in (wp, Vt, mu)]
        w, sol = jax.vmap(_project, (0, 0, 0, None, None))(*args, dtype(lam), dtype(S))
        status = np.asarray(sol.status)  # INACTIVE: w' rounded into the ball (float32, 1e-7)
        assert np.all((status == roots.CONVERGED) | (status == roots.INACTIVE))
        assert np.mean(status == roots.CONVERGED) > 0.9
        ld = [np.asarray(v).astype(np.longdouble) for v in (w, *args, sol.nu)]
        w_ld, wp_ld, Vt_ld, mu_ld, nu_ld = ld
        norm = np.sqrt(np.sum(w_ld**2, axis=1))
        # f(nu) of eq. (25) in long double on the projection's own inputs.
        a = np.einsum("ndr,nd->nr", Vt_ld, wp_ld)
        c = mu_ld + np.longdouble(lam)
        r0 = np.maximum(np.sum(wp_ld**2, axis=1) - np.sum(a * a, axis=1), 0)
        p = np.longdouble(lam) + nu_ld
        f = r0 * np.longdouble(lam) ** 2 / p**2 + np.sum(a**2 * c**2 / (c + nu_ld[:, None]) ** 2, 1)
        worst_total = max(worst_total, float(np.max(norm / S - 1)))
        worst_rep = max(worst_rep, float(np.max(np.abs(norm / np.sqrt(f) - 1))))
    assert worst_total <= margin, (worst_total / eps, margin / eps)
    assert worst_rep <= 4.0 * np.sqrt(D) * eps, worst_rep / eps
    assert worst_total > 4.0 * eps, worst_total / eps
