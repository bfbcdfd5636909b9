"""Plain-numpy exact-fit MLogB learner (float64), written from the equations of
:mod:`bandits_jax.mlogb.exact`'s docstring, not from its code.

Round t appends ``(x_t, y_t)`` to a history of at most ``horizon`` rows (the oldest overwritten
once full) and minimises

    F(W) = sum_s [log(1 + sum_k exp(w_k^T x_s)) - w_{y_s}^T x_s] + lam/2 ||W||_F^2   (w_0 = 0)

by damped Newton from the previous estimate, in ``vec(W) = W.reshape(-1)`` coordinates:

    grad F = lam w + sum_s (sigma(W x_s) - e_{y_s}) kron x_s,
    H      = lam I + sum_s (diag(s_s) - s_s s_s^T) kron x_s x_s^T,    s_s = sigma(W x_s),
    w     <- w - a H^{-1} grad F,

``a`` the first of ``1, 1/2, 1/4, ...`` (at most ``max_halvings`` trials) with
``F(w - a p) <= F(w) - 1e-4 a grad^T p``, or ``a = 1`` untested when
``grad^T p <= 64 eps (1 + |F|)``; no trial passing ends the fit with ``w`` unchanged. At most
``newton_steps`` steps; the fit ends after a full step with ``||p|| <= sqrt(eps) (1 + ||w||)``.
It is ``converged`` when ``||grad F|| <= sqrt(eps) c`` (``c = 1 + sum_s ||x_s||``) at its end.

Scores with ``H`` at the fit and ``A(x) = (I_K kron x)^T H^{-1} (I_K kron x)`` (K x K):
K = 1: ``(w^T x, sqrt(beta) sqrt(A(x)))``; K >= 2: ``(r^T s, sqrt(beta) sqrt(q^T A(x) q) +
beta (sum_k |r_k|) lambda_max(A(x)) / 2)`` with ``s = sigma(W x)``, ``q = (diag(s) - s s^T) r``.
The choice: the lowest valid index within a relative ``1e-9`` of the maximum of their sum.
Each row's terms are formed one by one (``np.kron``); every solve is ``np.linalg.solve``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["NumpyExact"]

_TIE_RTOL = 1e-9
EPS = np.finfo(np.float64).eps


def probs(z: np.ndarray) -> np.ndarray:
    """``sigma(z)`` (K,) without outcome 0, via the stable log-sum-exp over ``[0, z]``."""
    full = np.concatenate([[0.0], z])
    return np.exp(full[1:] - np.logaddexp.reduce(full))


class NumpyExact:
    """The exact-fit learner (module docstring). ``W`` (K, d), ``H`` (Kd, Kd) after each update."""

    def __init__(
        self,
        *,
        num_outcomes: int,
        dim: int,
        horizon: int,
        lam: float,
        beta: float,
        rewards: Any = None,
        newton_steps: int = 5,
        max_halvings: int = 30,
    ):
        if not lam > 0:
            raise ValueError(f"lam must be > 0, got {lam!r}")
        if not beta >= 0:
            raise ValueError(f"beta must be >= 0, got {beta!r}")
        self.K, self.d, self.horizon = int(num_outcomes), int(dim), int(horizon)
        self.lam, self.beta = float(lam), float(beta)
        self.r = np.asarray([1.0] if rewards is None else rewards, np.float64)
        assert self.r.shape == (self.K,)
        self.newton_steps, self.max_halvings = int(newton_steps), int(max_halvings)
        self.xs: list[np.ndarray] = []
        self.ys: list[int] = []
        self.t = 0
        self.W = np.zeros((self.K, self.d))
        self.H = self.lam * np.eye(self.K * self.d)
        self.grad_norm = 0.0
        self.steps = 0
        self.converged = True

    # --- the objective and its derivatives -------------------------------------------------
    def loss(self, w: np.ndarray) -> float:
        W = w.reshape(self.K, self.d)
        total = 0.5 * self.lam * float(w @ w)
        for x, y in zip(self.xs, self.ys, strict=True):
            z = np.concatenate([[0.0], W @ x])
            total += float(np.logaddexp.reduce(z) - z[y])
        return total

    def gradient(self, w: np.ndarray) -> np.ndarray:
        W = w.reshape(self.K, self.d)
        g = self.lam * w.copy()
        for x, y in zip(self.xs, self.ys, strict=True):
            e = np.zeros(self.K)
            if y > 0:
                e[y - 1] = 1.0
            g += np.kron(probs(W @ x) - e, x)
        return g

    def hessian(self, w: np.ndarray) -> np.ndarray:
        W = w.reshape(self.K, self.d)
        H = self.lam * np.eye(self.K * self.d)
        for x in self.xs:
            s = probs(W @ x)
            H += np.kron(np.diag(s) - np.outer(s, s), np.outer(x, x))
        return H

    # --- the fit ---------------------------------------------------------------------------
    def fit(self, w: np.ndarray) -> tuple[np.ndarray, int, bool]:
        """Damped Newton from ``w``: ``(w, steps, converged)``."""
        c = 1.0 + sum(float(np.linalg.norm(x)) for x in self.xs)
        f, g = self.loss(w), self.gradient(w)
        steps = 0
        while steps < self.newton_steps:
            p = np.linalg.solve(self.hessian(w), g)
            dec = float(g @ p)
            a, accepted = 1.0, False
            for _ in range(self.max_halvings):
                if dec <= 64 * EPS * (1.0 + abs(f)) or self.loss(w - a * p) <= f - 1e-4 * a * dec:
                    accepted = True
                    break
                a *= 0.5
            steps += 1
            if not accepted:
                break
            w = w - a * p
            f, g = self.loss(w), self.gradient(w)
            if a == 1.0 and np.linalg.norm(p) <= np.sqrt(EPS) * (1.0 + np.linalg.norm(w)):
                break
        return w, steps, bool(np.linalg.norm(g) <= np.sqrt(EPS) * c)

    def update(self, x: np.ndarray, y: int) -> None:
        x = np.asarray(x, np.float64)
        if len(self.xs) < self.horizon:
            self.xs.append(x)
            self.ys.append(int(y))
        else:  # overwrite the oldest row
            self.xs[self.t % self.horizon] = x
            self.ys[self.t % self.horizon] = int(y)
        self.t += 1
        w, self.steps, self.converged = self.fit(self.W.reshape(-1))
        self.W = w.reshape(self.K, self.d)
        self.H = self.hessian(w)
        self.grad_norm = float(np.linalg.norm(self.gradient(w)))

    # --- scores and choice -----------------------------------------------------------------
    def a_matrix(self, x: np.ndarray) -> np.ndarray:
        E = np.kron(np.eye(self.K), np.asarray(x, np.float64)[:, None])  # (Kd, K)
        return E.T @ np.linalg.solve(self.H, E)

    def score_parts(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        est, bon = [], []
        for x in np.asarray(actions, np.float64):
            A = self.a_matrix(x)
            if self.K == 1:
                est.append(float(self.W[0] @ x))
                bon.append(np.sqrt(self.beta) * np.sqrt(max(A[0, 0], 0.0)))
                continue
            s = probs(self.W @ x)
            q = (np.diag(s) - np.outer(s, s)) @ self.r
            first = np.sqrt(max(float(q @ A @ q), 0.0))
            second = 0.5 * np.abs(self.r).sum() * np.linalg.eigvalsh(A).max()
            est.append(float(self.r @ s))
            bon.append(np.sqrt(self.beta) * first + self.beta * second)
        return np.array(est), np.array(bon)

    def scores(self, actions: np.ndarray) -> np.ndarray:
        """The optimistic reward: ``sigmoid(index)`` for K = 1, the index for K >= 2."""
        index = np.add(*self.score_parts(actions))
        return 1.0 / (1.0 + np.exp(-index)) if self.K == 1 else index

    def select(self, actions: np.ndarray, mask: np.ndarray | None = None) -> int:
        values = np.add(*self.score_parts(actions))
        valid = np.ones(values.shape, bool) if mask is None else np.asarray(mask, bool)
        valid = valid & ~np.isnan(values)
        if not valid.any():
            raise ValueError("select needs at least one valid (masked-in, non-NaN) action")
        vmax = values[valid].max()
        return int(np.argmax(valid & (values >= vmax - _TIE_RTOL * abs(vmax))))
