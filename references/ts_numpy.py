"""Plain-numpy Thompson sampling learners (float64), written from the equations of
:mod:`bandits_jax.mlogb.lin_ts`'s and :mod:`bandits_jax.mlogb.logistic_ts`'s docstrings, not
from their code.

The standard normals of each round are an INPUT (``draw(xi)``): the caller passes the JAX
learner's own draws (``tests/mlogb/test_ts.py`` regenerates them from the documented key chain),
so both sides sample with the same numbers and must agree to rounding.

:class:`NumpyLinTS`: the ridge posterior by dense solves (no Sherman-Morrison),
``A = lam I + Z^T Z``, ``theta = A^{-1} Z^T r``, and the draw ``theta + v R xi`` with the square
root ``R`` (``R R^T = inv(A)``) of the docstring's recursion (Potter's update, written out here
from the equations; ``tests/mlogb/test_ts.py`` checks ``R R^T`` against ``np.linalg.inv(A)``).

:class:`NumpyLogisticTS`: the online Laplace step in the full ``vec(W) = W.reshape(-1)``
coordinates (no reduction to K dimensions): the minimiser of
``f(w) = 1/2 (w - m)^T P (w - m) + l(W x)`` by Newton's method with step halving on ``f``
(gradient ``P (w - m) + (sigma(W x) - e_y) kron x``, Hessian ``P + grad sigma kron x x^T``;
Armijo's test, skipped once the predicted decrease is below f's rounding) until the gradient or
a full step is at rounding, then ``P += grad sigma(W x) kron x x^T`` (``full``) or its
diagonal added to ``q`` (``diagonal``), and the draw ``W + v xi / sqrt(q)`` or
``W + v L^{-T} xi`` (``P = L L^T``, ``np.linalg.cholesky`` and ``np.linalg.solve``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["NumpyLinTS", "NumpyLogisticTS"]

_EPS = np.finfo(np.float64).eps


def _probs(z: np.ndarray) -> np.ndarray:
    """``[sigma_0, sigma_1..sigma_K]`` for logits z (K,) (outcome 0's logit is 0)."""
    z0 = np.concatenate([[0.0], z])
    e = np.exp(z0 - z0.max())
    return e / e.sum()


def _sigma(z: np.ndarray) -> np.ndarray:
    return _probs(z)[1:]


class NumpyLinTS:
    """Linear Thompson sampling with dense solves (module docstring)."""

    def __init__(self, *, dim: int, lam: float, v: float, rewards: Any = (1.0,), intercept=True):
        self.d, self.lam, self.v, self.intercept = int(dim), float(lam), float(v), intercept
        self.r = np.concatenate([[0.0], np.asarray(rewards, np.float64)])
        D = self.d + 1 if intercept else self.d
        self.gram, self.zr = np.zeros((D, D)), np.zeros(D)
        self.theta = np.zeros(D)
        self.sample = np.zeros(D)
        self.root = np.eye(D) / np.sqrt(self.lam)

    def features(self, X) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, np.float64))
        return np.hstack([X, np.ones((X.shape[0], 1))]) if self.intercept else X

    def matrix(self) -> np.ndarray:
        return self.lam * np.eye(self.gram.shape[0]) + self.gram

    def draw(self, xi: np.ndarray) -> None:
        """This round's ``theta~ = theta + v R xi``, ``R R^T = inv(A)``."""
        self.sample = self.theta + self.v * (self.root @ np.asarray(xi, np.float64))

    def score_parts(self, actions) -> tuple[np.ndarray, np.ndarray]:
        Z = self.features(actions)
        return Z @ self.theta, Z @ self.sample - Z @ self.theta

    def update(self, x, y: int) -> None:
        z = self.features(x)[0]
        self.gram += np.outer(z, z)
        self.zr += self.r[int(y)] * z
        a = self.root.T @ z  # R <- R - u a^T / (c + sqrt(c)), u = R a, c = 1 + a^T a
        c = 1.0 + a @ a
        self.root = self.root - np.outer(self.root @ a, a) / (c + np.sqrt(c))
        self.theta = np.linalg.solve(self.matrix(), self.zr)


class NumpyLogisticTS:
    """Laplace-approximated logistic Thompson sampling (module docstring)."""

    def __init__(
        self,
        *,
        num_outcomes: int,
        dim: int,
        lam: float,
        v: float,
        rewards: Any = None,
        covariance: str = "diagonal",
        max_steps: int = 100,
    ):
        self.K, self.d, self.v = int(num_outcomes), int(dim), float(v)
        self.full = covariance == "full"
        self.rewards = np.ones(self.K) if rewards is None else np.asarray(rewards, np.float64)
        D = self.K * self.d
        self.W = np.zeros((self.K, self.d))
        self.P = float(lam) * np.eye(D)  # diagonal: only its diagonal is ever changed
        self.sample = np.zeros((self.K, self.d))
        self.max_steps = int(max_steps)

    def _f(self, w, m, x, y) -> float:
        z = w.reshape(self.K, self.d) @ x
        z0 = np.concatenate([[0.0], z])
        loss = np.log(np.sum(np.exp(z0 - z0.max()))) + z0.max() - z0[y]
        return 0.5 * (w - m) @ self.P @ (w - m) + loss

    def update(self, x, y: int) -> None:
        x, y = np.asarray(x, np.float64), int(y)
        m = self.W.reshape(-1).copy()
        w = m.copy()
        e_y = np.zeros(self.K)
        if y >= 1:
            e_y[y - 1] = 1.0
        for _ in range(self.max_steps):
            s = _sigma(w.reshape(self.K, self.d) @ x)
            grad = self.P @ (w - m) + np.kron(s - e_y, x)
            H = self.P + np.kron(np.diag(s) - np.outer(s, s), np.outer(x, x))
            if np.linalg.norm(grad) <= 4 * _EPS * (1.0 + np.linalg.norm(self.P @ (w - m))):
                break
            p = np.linalg.solve(H, grad)
            a, f0, dec = 1.0, self._f(w, m, x, y), grad @ p
            # A decrease below f's rounding is not tested (f cannot resolve it): the full step.
            if dec > 64 * _EPS * (1.0 + abs(f0)):
                while self._f(w - a * p, m, x, y) > f0 - 1e-4 * a * dec and a > 1e-10:
                    a *= 0.5
            w = w - a * p
            if a == 1.0 and np.linalg.norm(p) <= 8 * _EPS * (1.0 + np.linalg.norm(w)):
                break  # a full step at rounding
        self.W = w.reshape(self.K, self.d)
        s = _sigma(self.W @ x)
        added = np.kron(np.diag(s) - np.outer(s, s), np.outer(x, x))
        self.P = self.P + (added if self.full else np.diag(np.diag(added)))

    def draw(self, xi: np.ndarray) -> None:
        """This round's ``W~``: ``W + v xi / sqrt(q)`` or ``W + v L^{-T} xi``."""
        xi = np.asarray(xi, np.float64).reshape(-1)
        if self.full:
            step = np.linalg.solve(np.linalg.cholesky(self.P).T, xi)
        else:
            step = xi / np.sqrt(np.diag(self.P))
        self.sample = self.W + self.v * step.reshape(self.K, self.d)

    def score_parts(self, actions) -> tuple[np.ndarray, np.ndarray]:
        X = np.atleast_2d(np.asarray(actions, np.float64))
        est = np.array([self.rewards @ _sigma(self.W @ x) for x in X])
        ts = np.array([self.rewards @ _sigma(self.sample @ x) for x in X])
        return est, ts - est
