"""references.logistic_numpy: the numpy logistic fit against scikit-learn's and a
Newton step written out, and its greedy learners on a few rounds."""

import numpy as np
import pytest

from references import logistic_numpy as lr

sklearn = pytest.importorskip("sklearn.linear_model")


@pytest.mark.parametrize("lam", [1e-3, 0.1, 10.0])
def test_logistic_mle_equals_scikit_learns_l2_fit(lam):
    """argmin of the log-loss + lam/2 ||w||^2: scikit-learn's L2 logistic regression without an
    intercept at C = 1/lam minimises the same objective."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 5))
    r = (X @ np.array([2.0, -1.0, 0.5, 0.0, 3.0]) + rng.standard_normal(60) > 0).astype(float)
    ours = lr.logistic_mle(X, r, lam, np.zeros(5))
    ref = sklearn.LogisticRegression(C=1.0 / lam, fit_intercept=False, tol=1e-12, max_iter=10_000)
    ref.fit(X, r)
    np.testing.assert_allclose(ours, ref.coef_[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model", ["ridge", "mle", "newton1"])
def test_numpy_greedy_stops_paying_once_it_has_seen_the_target(model):
    """One-hot classes: the first reward makes the target's weight the only positive one, so the
    regret is the number of rounds before it, whatever the horizon after that."""
    actions, labels = np.eye(10), np.arange(10)
    short = lr.numpy_greedy(model, actions, labels, target=3, T=40, seed=0)
    long = lr.numpy_greedy(model, actions, labels, target=3, T=200, seed=0)
    assert 0 <= short < 40 and short == long


def test_one_step_is_a_newton_step_on_the_regularised_log_loss():
    """``steps=1`` (the ``"newton1"`` row): w - H^{-1} grad at w, with H and grad of the whole
    objective written out here (the full step decreases it on this problem)."""
    rng = np.random.default_rng(1)
    X, lam = rng.standard_normal((30, 4)), 0.5
    r = (rng.random(30) < 0.4).astype(float)
    w0 = 0.1 * rng.standard_normal(4)
    p = 1.0 / (1.0 + np.exp(-X @ w0))
    grad = X.T @ (p - r) + lam * w0
    hess = X.T @ np.diag(p * (1 - p)) @ X + lam * np.eye(4)
    np.testing.assert_allclose(
        lr.logistic_mle(X, r, lam, w0, steps=1), w0 - np.linalg.solve(hess, grad), rtol=1e-10
    )
