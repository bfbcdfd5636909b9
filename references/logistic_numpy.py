"""Plain-numpy ridge-regularised logistic regression (K = 1, float64) and the greedy learners
built on it, one Python step per round.

:func:`logistic_mle` minimises the summed log-loss plus ``lam/2 ||w||^2``,

    F(w) = sum_s [log(1 + exp(w^T x_s)) - r_s w^T x_s] + lam/2 ||w||^2,

by Newton steps ``w <- w - a H^{-1} grad F`` (``H = X^T diag(p (1 - p)) X + lam I``,
``p = sigma(X w)``), ``a`` halved from 1 until ``F`` does not increase. It is the fit that
:mod:`bandits_jax.mlogb.exact` and buffered EOFD approximate, written from this equation, not
from their code. :func:`numpy_greedy` plays the greedy learner of a reward model (ridge
regression, this fit, or one Newton step of it a round) on a classification stream.
Used by the tests (checked against scikit-learn's L2 logistic regression) and by the digits
investigation of ``docs/digits.md`` (its script last ran at commit 4b08619).
"""

from __future__ import annotations

import numpy as np


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # overflow-free


def logistic_mle(
    X: np.ndarray, r: np.ndarray, lam: float, w: np.ndarray, steps: int = 50
) -> np.ndarray:
    """argmin of the summed log-loss + ``lam/2 ||w||^2`` by damped Newton steps from ``w`` (at
    most ``steps``; ``steps=1``: one step on the whole history)."""

    def objective(v: np.ndarray) -> float:
        z = X @ v
        return float(np.sum(np.logaddexp(0.0, z) - r * z) + 0.5 * lam * v @ v)

    f = objective(w)
    for _ in range(steps):
        p = _sigmoid(X @ w)
        H = (X * (p * (1.0 - p))[:, None]).T @ X + lam * np.eye(w.size)
        step = np.linalg.solve(H, X.T @ (p - r) + lam * w)
        t, f_prev = 1.0, f
        while (f := objective(w - t * step)) > f_prev and t > 1e-8:
            t *= 0.5
        w = w - t * step
        if f_prev - f <= 1e-10 * max(1.0, abs(f)):
            break
    return w


def numpy_greedy(model: str, actions: np.ndarray, labels: np.ndarray, target: int, T: int,
                 seed: int, lam: float = 0.1) -> float:  # fmt: skip
    """Regret of greedy ridge (``"ridge"``), greedy exact logistic MLE (``"mle"``) or greedy
    logistic fit by one damped Newton step a round on the whole history (``"newton1"``) over
    ``T`` rounds: each round shows one random example of every class and pays 1 for the
    ``target`` class."""
    rng = np.random.default_rng(seed)
    by_class = [np.flatnonzero(labels == c) for c in range(int(labels.max()) + 1)]
    d = actions.shape[1]
    w, G, b, X, r = np.zeros(d), lam * np.eye(d), np.zeros(d), np.zeros((T, d)), np.zeros(T)
    regret = 0.0
    for t in range(T):
        shown = np.array([rng.choice(ix) for ix in by_class])
        i = int(np.argmax(actions[shown] @ w + 1e-12 * rng.standard_normal(shown.size)))
        x, reward = actions[shown[i]], float(labels[shown[i]] == target)
        regret += 1.0 - reward
        if model == "ridge":
            G, b = G + np.outer(x, x), b + reward * x
            w = np.linalg.solve(G, b)
        else:
            X[t], r[t] = x, reward
            w = logistic_mle(X[: t + 1], r[: t + 1], lam, w, steps=1 if model == "newton1" else 50)
    return regret
