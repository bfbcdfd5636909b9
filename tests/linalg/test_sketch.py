"""Block Frequent Directions (Algorithm 1) against Lemma 3/4 and the paper's full-SVD update."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.linalg import sketch
from bandits_jax.status import CONVERGED

_update = jax.jit(sketch.update)


def _paper_fd(V, mu, rho, B, m):
    """Algorithm 1 as written: SVD of [V mu^{1/2}, B]^T (eq. 14-15), numpy."""
    M = np.concatenate([V * np.sqrt(mu), B], axis=1).T
    _, s, Vh = np.linalg.svd(M, full_matrices=False)
    s2 = np.concatenate([s**2, np.zeros(max(0, m + 1 - len(s)))])
    return Vh[:m].T, s2[:m] - s2[m], rho + s2[m]


def _stream(D, k, T, seed, rank=None):
    rng = np.random.default_rng(seed)
    basis = rng.normal(size=(D, rank or D))
    return [basis @ rng.normal(size=(basis.shape[1], k)) / np.sqrt(D) for _ in range(T)]


@pytest.mark.parametrize("D,k,m", [(12, 1, 4), (12, 3, 5), (6, 2, 6), (6, 2, 20)])
def test_fd_invariants_and_paper_equivalence(D, k, m):
    state = sketch.init(D, m, jnp.float64)
    V_p, mu_p, rho_p = np.asarray(state.V), np.asarray(state.mu), 0.0
    M = np.zeros((D, D))
    for B in _stream(D, k, 15, seed=D + k + m):
        state, _, status = _update(state, B)
        assert int(status) == CONVERGED  # the default step cap is ample
        M += B @ B.T
        V_p, mu_p, rho_p = _paper_fd(V_p, mu_p, rho_p, B, min(m, D))
        V, mu, rho = (np.asarray(a) for a in state)
        np.testing.assert_allclose(V.T @ V, np.eye(V.shape[1]), atol=1e-10)
        sk = (V * mu) @ V.T
        # Lemma 3/4: sketch <= M <= sketch + rho I in the PSD order.
        assert np.linalg.eigvalsh(M - sk).min() >= -1e-9
        assert np.linalg.eigvalsh(sk + rho * np.eye(D) - M).min() >= -1e-9
        # Same sketch as the paper's full SVD (the factorisation is unique up to rotations).
        np.testing.assert_allclose(sk, (V_p * mu_p) @ V_p.T, atol=1e-9)
        np.testing.assert_allclose(rho, rho_p, atol=1e-9)
    if m >= D:
        assert float(state.rho) == 0.0
        np.testing.assert_allclose((V * mu) @ V.T, M, atol=1e-10)


def test_blocks_inside_sketch_span_are_absorbed_exactly():
    # Data of rank 3 < m: after the span is found, no mass is discarded and V stays orthonormal.
    D, m = 10, 4
    state = sketch.init(D, m, jnp.float64)
    M = np.zeros((D, D))
    for B in _stream(D, 2, 20, seed=7, rank=3):
        state, _, _ = _update(state, B)
        M += B @ B.T
    V, mu, rho = (np.asarray(a) for a in state)
    np.testing.assert_allclose(V.T @ V, np.eye(m), atol=1e-9)
    np.testing.assert_allclose((V * mu) @ V.T, M, atol=1e-9)
    assert float(rho) < 1e-9


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("case", ["random", "near_span", "graded"])
def test_extension_is_orthonormal_and_exact(k, case):
    # Both branches: the Gram route (residual large) and the explicit re-orthogonalised route
    # (X within 1e-6 of span V, where the Gram route would lose orthogonality). "graded": the
    # residual's singular values span 1e-2 .. 1e-7 of ||X||, so one Gram pass on it would leave
    # an orthogonality error of about eps / 1e-14 = 2e-2; the second pass brings it to rounding.
    rng = np.random.default_rng(k + 10 * len(case))
    D, m = 30, 6
    V, _ = np.linalg.qr(rng.normal(size=(D, m)))
    X = rng.normal(size=(D, k))
    if case == "near_span":
        X = V @ rng.normal(size=(m, k)) + 1e-6 * X
    elif case == "graded":
        P = np.eye(D) - V @ V.T
        U, _ = np.linalg.qr(P @ rng.normal(size=(D, k)))
        H, _ = np.linalg.qr(rng.normal(size=(k, k)))
        X = V @ rng.normal(size=(m, k)) + U @ np.diag(np.logspace(-2, -7, k)) @ H
    ext = jax.jit(sketch.extend)(V, X)
    Q = np.asarray(sketch.residual_basis(V, ext))
    basis = np.concatenate([V, Q], axis=1)
    # Q = (X - V C) T_pinv amplifies rounding by ||X|| / s_min: about 1e-8 when graded.
    amp = 1e4 if case == "graded" else 1.0
    orth_tol = 1e-12 * amp + 1e-9
    np.testing.assert_allclose(basis.T @ basis, np.eye(m + k), atol=orth_tol)
    if case == "graded" and k > 1:  # the second Gram pass is needed: one pass misses the bound
        C = V.T @ X
        R = X - V @ C
        R = R - V @ (V.T @ R)
        tol = np.sqrt(np.finfo(np.float64).eps) * np.linalg.norm(X)
        Q1 = R @ np.asarray(sketch._gram_basis(jnp.asarray(R.T @ R), tol)[1])
        assert np.abs(Q1.T @ Q1 - np.eye(k)).max() > orth_tol
    np.testing.assert_allclose(basis @ np.asarray(ext.coords), X, atol=1e-12)
    c = rng.normal(size=m + k)
    np.testing.assert_allclose(sketch.apply_basis(V, ext, c), basis @ c, atol=1e-12 * amp * 10)
    w = rng.normal(size=D)
    np.testing.assert_allclose(sketch.basis_coords(V, ext, w), basis.T @ w, atol=1e-9 * amp)


@pytest.mark.parametrize("budget", [np.inf, 0.5, 0.0])
def test_adaptive_truncation_rule(budget):
    # Active rank 2 of capacity 5: the new rank is the smallest r' in [2, 5] whose discarded
    # eigenvalue of G + X M X^T is <= budget (5 if none); rank = capacity is plain truncate.
    rng = np.random.default_rng(3)
    D, m, k, r = 10, 5, 2, 2
    V, _ = np.linalg.qr(rng.normal(size=(D, m)))
    mu = np.array([2.0, 1.0, 0, 0, 0])
    X, Gm = rng.normal(size=(D, k)), rng.normal(size=(k, k))
    M = Gm @ Gm.T / 2
    ext = sketch.extend(V, X)
    tr, rank = jax.jit(sketch.truncate_adaptive)(mu, ext, M, r, budget)
    s, U = np.linalg.eigh((V * mu) @ V.T + X @ M @ X.T)
    s, U = np.maximum(s[::-1], 0.0), U[:, ::-1]
    ok = [j for j in range(r, m + 1) if s[j] <= budget]
    want = ok[0] if ok else m
    assert int(rank) == want
    np.testing.assert_allclose(float(tr.sigma2), s[want], atol=1e-12)
    np.testing.assert_allclose(np.asarray(tr.mu)[want:], 0.0)
    V_new = np.asarray(sketch.apply_basis(V, ext, tr.U))
    G_ref = (U[:, :want] * (s[:want] - s[want])) @ U[:, :want].T
    np.testing.assert_allclose((V_new * np.asarray(tr.mu)) @ V_new.T, G_ref, atol=1e-10)
    full = sketch.truncate(jnp.asarray(mu), ext, jnp.asarray(M))
    tr_m, rank_m = sketch.truncate_adaptive(mu, ext, M, m, budget)
    assert int(rank_m) == m
    np.testing.assert_allclose(tr_m.mu, full.mu, atol=1e-12)
    np.testing.assert_allclose(tr_m.sigma2, full.sigma2, atol=1e-12)
