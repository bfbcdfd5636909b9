"""The damped-Newton solver and the ring-buffer losses (bandits_jax.mlogb.newton) against
independent computations: scipy's minimiser of the same regularised multinomial log-loss, a
linear solve for a quadratic, dense numpy inverses for the bonus matrices; float64, compiled at
XLA's defaults."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
import scipy.special

from bandits_jax.linalg import lapack
from bandits_jax.mlogb import model, newton
from bandits_jax.status import Status
from tests import xla_defaults

LAM = 0.3


def _rows(K, d, n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = rng.integers(0, K + 1, size=n)
    return X, Y


def _np_loss(w, X, Y, K, lam, wts):
    """Regularised log-loss and gradient in numpy (``w_0 = 0``), weights ``wts`` per row."""
    W = w.reshape(K, -1)
    z0 = np.concatenate([np.zeros((len(X), 1)), X @ W.T], axis=1)
    loss = scipy.special.logsumexp(z0, axis=1) - z0[np.arange(len(X)), Y]
    p = scipy.special.softmax(z0, axis=1)[:, 1:]
    e = np.eye(K + 1)[Y][:, 1:]
    g = ((p - e) * wts[:, None]).T @ X + lam * W
    return wts @ loss + 0.5 * lam * w @ w, g.reshape(-1)


def _dense_fit(K, d, X, Y, wts, *, newton_steps=30, max_halvings=30):
    """The regularised log-loss minimised by :func:`newton.minimise` with its dense Hessian."""
    lam = jnp.asarray(LAM)

    def derivatives(W):
        loss, grad, _, s = newton.rows_loss_grad(W, X, Y, wts)
        J = model.jacobian(s) * wts[:, None, None]
        H = jnp.einsum("bkl,bi,bj->kilj", J, X, X).reshape(K * d, K * d)
        H = H + lam * jnp.eye(K * d)
        return loss + 0.5 * lam * jnp.sum(W * W), grad + lam * W, H

    def objective(W):
        return jnp.sum(wts * newton.row_losses(W, X, Y)[1]) + 0.5 * lam * jnp.sum(W * W)

    def direction(it):
        L = lapack.cholesky(it.aux)
        return lapack.cho_solve(L, it.g.reshape(-1)).reshape(it.g.shape)

    return newton.minimise(
        jnp.zeros((K, d)),
        derivatives,
        objective,
        direction,
        newton_steps=newton_steps,
        max_halvings=max_halvings,
    )


@pytest.mark.parametrize("K, d", [(1, 4), (3, 3)])
def test_minimise_is_scipys_minimiser_of_the_regularised_log_loss(K, d):
    X, Y = _rows(K, d, 40, seed=K)
    wts = np.ones(len(X))
    wts[-5:] = 0.0  # unfilled rows of the buffer count for nothing
    fit = xla_defaults.jit(lambda X, Y, w: _dense_fit(K, d, X, Y, w))
    it = fit(jnp.asarray(X), jnp.asarray(Y, jnp.int32), jnp.asarray(wts))
    sol = scipy.optimize.minimize(
        _np_loss, np.zeros(K * d), args=(X, Y, K, LAM, wts), jac=True, method="BFGS",
        options={"gtol": 1e-12, "maxiter": 10_000},
    )  # fmt: skip
    np.testing.assert_allclose(np.asarray(it.x).reshape(-1), sol.x, rtol=1e-7, atol=1e-9)
    F, g = _np_loss(np.asarray(it.x).reshape(-1), X, Y, K, LAM, wts)
    np.testing.assert_allclose(float(it.F), F, rtol=1e-13)
    np.testing.assert_allclose(np.asarray(it.g).reshape(-1), g, atol=1e-12)
    assert bool(it.done) and int(it.steps) < 30
    assert int(newton.converged(newton.norm(it.g), 1.0 + np.abs(X).sum())) == Status.CONVERGED


def test_one_step_capped_fit_is_not_converged():
    X, Y = _rows(2, 3, 30, seed=7)
    it = _dense_fit(2, 3, jnp.asarray(X * 5.0), jnp.asarray(Y), jnp.ones(30), newton_steps=1)
    assert int(it.steps) == 1 and not bool(it.done)
    assert int(newton.converged(newton.norm(it.g), jnp.asarray(1.0))) == Status.MAX_STEPS


def test_quadratic_is_solved_by_the_first_full_step():
    rng = np.random.default_rng(0)
    M = rng.normal(size=(5, 5))
    A, b = M @ M.T + np.eye(5), rng.normal(size=5)
    A_j, b_j = jnp.asarray(A), jnp.asarray(b)

    def objective(x):
        return 0.5 * x @ (A_j @ x) - b_j @ x

    it = newton.minimise(
        jnp.zeros(5), lambda x: (objective(x), A_j @ x - b_j, None), objective,
        lambda it: lapack.solve(A_j, it.g), newton_steps=10, max_halvings=30,
    )  # fmt: skip
    np.testing.assert_allclose(np.asarray(it.x), np.linalg.solve(A, b), rtol=1e-12)
    assert int(it.steps) <= 2 and bool(it.done)


def test_line_search_damps_a_diverging_newton_step():
    """``f(x) = sqrt(1 + x^2)``: undamped Newton from ``|x| > 1`` diverges (``x <- -x^3``); the
    Armijo halvings bring it to the minimiser 0."""

    def objective(x):
        return jnp.sum(jnp.sqrt(1.0 + x * x))

    def derivatives(x):
        return objective(x), x / jnp.sqrt(1.0 + x * x), (1.0 + x * x) ** -1.5

    it = newton.minimise(
        jnp.asarray([3.0]), derivatives, objective, lambda it: it.g / it.aux,
        newton_steps=50, max_halvings=30,
    )  # fmt: skip
    assert abs(float(it.x[0])) < 1e-8 and bool(it.done)


def test_no_acceptable_step_keeps_the_iterate_and_stops():
    """A step far too long for ``max_halvings`` halvings: none passes Armijo, x stays and the
    steps stop."""

    def objective(x):
        return jnp.sum(x * x)

    it = newton.minimise(
        jnp.asarray([1.0]), lambda x: (objective(x), 2.0 * x, None), objective,
        lambda it: 1e6 * it.g, newton_steps=10, max_halvings=5,
    )  # fmt: skip
    assert float(it.x[0]) == 1.0 and int(it.steps) == 1 and bool(it.done)


def test_row_losses_and_gradient_are_the_numpy_log_loss():
    K, d = 3, 4
    X, Y = _rows(K, d, 12, seed=3)
    W = np.random.default_rng(4).normal(size=(K, d))
    wts = (np.arange(12) % 3 != 0).astype(float)
    loss, grad, z, s = newton.rows_loss_grad(jnp.asarray(W), jnp.asarray(X), jnp.asarray(Y), wts)
    F, g = _np_loss(W.reshape(-1), X, Y, K, 0.0, wts)
    np.testing.assert_allclose(float(loss), F, rtol=1e-13)
    np.testing.assert_allclose(np.asarray(grad).reshape(-1), g, atol=1e-13)
    np.testing.assert_allclose(np.asarray(z), X @ W.T, rtol=1e-13)
    z0 = np.concatenate([np.zeros((12, 1)), X @ W.T], axis=1)
    np.testing.assert_allclose(np.asarray(s), scipy.special.softmax(z0, axis=1)[:, 1:], rtol=1e-13)


def test_write_row_changes_one_row_where_ok():
    X, Y, filled = jnp.zeros((4, 2)), jnp.zeros((4,), jnp.int32), jnp.zeros((4,), bool)
    x = jnp.asarray([1.0, 2.0])
    X1, Y1, f1 = newton.write_row(X, Y, filled, 2, x, 3)
    np.testing.assert_array_equal(X1, [[0, 0], [0, 0], [1, 2], [0, 0]])
    np.testing.assert_array_equal(Y1, [0, 0, 3, 0])
    np.testing.assert_array_equal(f1, [False, False, True, False])
    X2, Y2, f2 = newton.write_row(X1, Y1, f1, 1, x, 1, ok=jnp.asarray(False))
    for a, b in zip((X2, Y2, f2), (X1, Y1, f1), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_matrices_are_the_dense_inverse_blocks():
    K, d, n = 2, 3, 5
    rng = np.random.default_rng(5)
    M = rng.normal(size=(K * d, K * d))
    H = M @ M.T + np.eye(K * d)
    actions = rng.normal(size=(n, d))
    A = newton.a_matrices(lapack.cholesky(jnp.asarray(H)), jnp.asarray(actions), K)
    H_inv = np.linalg.inv(H)
    for i, x in enumerate(actions):
        Xk = np.kron(np.eye(K), x[:, None])  # I_K kron x, (K d, K)
        np.testing.assert_allclose(np.asarray(A[i]), Xk.T @ H_inv @ Xk, rtol=1e-11, atol=1e-13)


def test_converged_is_int32_and_reads_the_scale():
    assert newton.converged(jnp.asarray(0.0), jnp.asarray(1.0)).dtype == jnp.int32
    big = jnp.asarray(1e-6)
    assert int(newton.converged(big, jnp.asarray(1.0))) == Status.MAX_STEPS
    assert int(newton.converged(big, jnp.asarray(1e3))) == Status.CONVERGED
    assert jax.numpy.isfinite(newton.norm(jnp.ones((2, 3))))
