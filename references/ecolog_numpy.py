"""Plain-numpy reference of ada-OFU-ECOLog (Faury, Abeille, Jun, Calauzenes, AISTATS 2022).

An independent implementation of :mod:`bandits_jax.mlogb.ecolog` (see there for the equations
and for the deviations from the authors' public code), written for clarity, not speed: ``V`` is
kept as a dense matrix and every ``V^{-1}`` product is a fresh ``np.linalg.solve``; the inner
ECOLog problems (Algorithm 1's step and ``theta_bar``) are solved by bisection on their KKT
conditions (the scalar ``z = x^T theta`` by bisection for each ``nu``, and the ball multiplier
``nu`` by bisection on ``||theta(nu)|| = S`` with a doubled upper bracket), each to the last
representable float. Everything is float64.
"""

from __future__ import annotations

import numpy as np

__all__ = ["NumpyECOLog", "bisect", "logloss", "prox_numpy", "sigmoid"]


def sigmoid(z: float) -> float:
    """The logistic function, computed stably."""
    if z >= 0:
        return 1.0 / (1.0 + np.exp(-z))
    e = np.exp(z)
    return e / (1.0 + e)


def logloss(z: float, y: float) -> float:
    """``-y ln mu(z) - (1 - y) ln(1 - mu(z))``."""
    return float(np.logaddexp(0.0, z) - y * z)


def bisect(fn, lo: float, hi: float, max_iter: int = 2000) -> float:
    """Root of an increasing ``fn`` with ``fn(lo) <= 0 <= fn(hi)``, to the last float."""
    for _ in range(max_iter):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if fn(mid) > 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def prox_numpy(
    V: np.ndarray, center: np.ndarray, x: np.ndarray, w: float, target: float, S: float
) -> tuple[np.ndarray, float]:
    """``argmin_{||theta|| <= S} w l~(x^T theta) + 1/2 ||theta - center||^2_V`` with
    ``d l~/dz = mu(z) - target``; returns ``(theta, nu)`` (``nu`` the ball multiplier)."""
    d = len(x)
    Vc = V @ center

    def theta_at(nu: float) -> np.ndarray:
        M = V + nu * np.eye(d)
        m_c = np.linalg.solve(M, Vc)
        m_x = np.linalg.solve(M, x)
        a, b = float(x @ m_c), float(x @ m_x)
        # KKT: z = x^T theta, theta = M^{-1}(V c - w (mu(z) - target) x).
        z = bisect(
            lambda z: z - a + b * w * (sigmoid(z) - target),
            a - b * w * (1.0 - target) - 1.0,
            a + b * w * target + 1.0,
        )
        return m_c - w * (sigmoid(z) - target) * m_x

    theta = theta_at(0.0)
    if np.linalg.norm(theta) <= S:
        return theta, 0.0
    hi = 1.0
    while np.linalg.norm(theta_at(hi)) > S:
        hi *= 2.0
    nu = bisect(lambda nu: S - np.linalg.norm(theta_at(nu)), 0.0, hi)
    return theta_at(nu), nu


class NumpyECOLog:
    """ada-OFU-ECOLog, one Python call per round (K = 1).

    Args:
      dim: d. lam, S: regulariser and norm bound. reward: ``r_1``.
      beta: ``"theory"`` or a fixed float radius (used as ``sqrt(beta)``).
      beta_scale: multiplies the theory radius. delta: confidence level.
      discrepancy: ``"squared"`` or ``"code"`` (unsquared, as the public code).
    """

    def __init__(
        self,
        dim: int,
        *,
        lam: float,
        S: float,
        reward: float = 1.0,
        beta: float | str = "theory",
        beta_scale: float = 1.0,
        delta: float = 0.01,
        discrepancy: str = "squared",
    ) -> None:
        self.d, self.lam, self.S, self.reward = dim, float(lam), float(S), float(reward)
        self.beta, self.beta_scale, self.delta = beta, float(beta_scale), float(delta)
        self.discrepancy = discrepancy
        self.V = self.lam * np.eye(dim)
        self.theta = np.zeros(dim)
        self.cum_loss = 0.0
        self.violations = 0
        self.t = 0  # completed updates
        self.last_nu = 0.0

    def radius(self) -> float:
        """``beta_n`` of the current selection (``ctr = t + 1`` in the authors' code)."""
        if not isinstance(self.beta, str):
            return float(self.beta)
        lam, S, ctr = self.lam, self.S, self.t + 1
        gamma = np.sqrt(lam) / 2 + 2 * np.log(2 * np.sqrt(1 + ctr / (4 * lam)) / self.delta) / (
            np.sqrt(lam)
        )
        res = 2 * lam * S**2 + (1 + S) ** 2 * gamma + self.cum_loss
        return self.beta_scale * max(res, 0.0)

    def score_parts(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(r mu(x^T theta), r sqrt(beta) ||x||_{V^{-1}})`` for each row of ``actions``."""
        X = np.asarray(actions, dtype=float)
        est = np.array([sigmoid(float(z)) for z in X @ self.theta])
        norms = np.sqrt(np.maximum(np.sum(X * np.linalg.solve(self.V, X.T).T, axis=1), 0.0))
        return self.reward * est, self.reward * np.sqrt(self.radius()) * norms

    def update(self, x: np.ndarray, y: int) -> None:
        """One ECOLog update with the played action ``x`` and outcome ``y`` in {0, 1}."""
        x = np.asarray(x, dtype=float)
        y = float(y)
        theta_new, self.last_nu = prox_numpy(self.V, self.theta, x, 1.0, y, self.S)
        theta_bar, _ = prox_numpy(self.V, theta_new, x, 2.0, 0.5, self.S)
        diff = theta_new - theta_bar
        sq = max(float(diff @ self.V @ diff), 0.0)
        disc = sq if self.discrepancy == "squared" else np.sqrt(sq)
        z_new, z_bar = float(x @ theta_new), float(x @ theta_bar)
        self.cum_loss += 2 * (1 + self.S) * (logloss(z_bar, y) - logloss(z_new, y)) - 0.5 * disc
        sens = sigmoid(z_new) * (1 - sigmoid(z_new))
        if sigmoid(z_bar) * (1 - sigmoid(z_bar)) > 2 * sens:
            self.violations += 1
        self.V = self.V + sens * np.outer(x, x)
        self.theta = theta_new
        self.t += 1
