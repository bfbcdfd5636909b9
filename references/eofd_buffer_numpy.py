"""Plain-numpy buffered EOFD-MLogB (float64), written from the equations of
:mod:`bandits_jax.mlogb.eofd_buffer`'s docstring, not from its code.

Dense D x D matrices throughout (``D = K d``, ``w = vec(W) = W.reshape(-1)``,
``X_s = I_K kron x_s``). The sketch is held as the dense matrix ``Z = V diag(mu) V^T``.
Round t, slot ``t mod B``: if the slot holds a round ``(x_s, y_s)``, it leaves with
``z = W_t x_s``, ``J = diag(sigma(z)) - sigma(z) sigma(z)^T``:

    eigenpairs (l_1 >= l_2 >= ...) of Z + X_s J X_s^T;  Z <- sum_{i <= m} (l_i - l_{m+1}) v_i v_i^T,
    rho <- rho + max(l_{m+1}, 0)   (no l_{m+1} when m >= D: then nothing is discarded),
    b <- b + (Q_new - Q_old) w_t - X_s (sigma(z) - e_{y_s})   (w_t = vec(W_t)),

with ``Q = Z + (rho/2) I`` under ``regularization="robust"`` and ``Q = Z`` otherwise; with
``summary="anchor"`` instead (``A = c I + Z``, ``H = X_s J X_s^T``, the old ``A`` and ``c``)

    a = (A_old + H)^{-1} (b + H w_t - X_s (sigma(z) - e_{y_s})),   b <- A_new a,

then ``(x_t, y_t)`` takes the slot and the fit minimises, from ``W_t``, by the damped Newton
steps of :class:`~references.exact_numpy.NumpyExact` (the same line search and stops),

    F(w) = (c/2) w^T w + (1/2) w^T Z w - b^T w + sum_{s in slots} l_s(w),

(``c = lam``, or ``c = lam + rho/2`` with ``regularization="robust"``)

with ``grad F = c w + Z w - b + sum_s (sigma(W x_s) - e_{y_s}) kron x_s`` and
``H = c I + Z + sum_s (diag(s_s) - s_s s_s^T) kron x_s x_s^T``. It is converged when
``||grad F|| <= sqrt(eps) (1 + ||b|| + sum_s ||x_s||)``. Scores are NumpyExact's with this H at
the fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from references.exact_numpy import EPS, NumpyExact, probs

__all__ = ["NumpyEOFDBuffered"]


class NumpyEOFDBuffered(NumpyExact):
    """The buffered learner (module docstring). ``W``, ``H``, ``Z``, ``rho``, ``b`` after each
    update; ``evicted`` is True when the last update replaced a round."""

    def __init__(
        self,
        *,
        num_outcomes: int,
        dim: int,
        sketch_size: int,
        buffer_size: int,
        lam: float,
        beta: float,
        rewards: Any = None,
        regularization: str = "paper",
        summary: str = "gradient",
        newton_steps: int = 5,
        max_halvings: int = 30,
    ):
        super().__init__(
            num_outcomes=num_outcomes, dim=dim, horizon=buffer_size, lam=lam, beta=beta,
            rewards=rewards, newton_steps=newton_steps, max_halvings=max_halvings,
        )  # fmt: skip
        D = self.K * self.d
        self.m = min(int(sketch_size), D)
        self.B = int(buffer_size)
        self.slots: list[tuple[np.ndarray, int] | None] = [None] * self.B
        self.Z = np.zeros((D, D))
        self.rho = 0.0
        self.b = np.zeros(D)
        self.evicted = False
        assert regularization in ("paper", "robust")
        self.robust = regularization == "robust"
        assert summary in ("gradient", "anchor")
        self.anchored = summary == "anchor"

    def _c(self) -> float:
        return self.lam + (0.5 * self.rho if self.robust else 0.0)

    # --- the objective (overrides NumpyExact's: sketch and linear terms, c for lam) --------
    def loss(self, w: np.ndarray) -> float:
        W = w.reshape(self.K, self.d)
        total = 0.5 * self._c() * float(w @ w) + 0.5 * float(w @ self.Z @ w) - float(self.b @ w)
        for x, y in zip(self.xs, self.ys, strict=True):
            z = np.concatenate([[0.0], W @ x])
            total += float(np.logaddexp.reduce(z) - z[y])
        return total

    def gradient(self, w: np.ndarray) -> np.ndarray:
        W = w.reshape(self.K, self.d)
        g = self._c() * w + self.Z @ w - self.b
        for x, y in zip(self.xs, self.ys, strict=True):
            e = np.zeros(self.K)
            if y > 0:
                e[y - 1] = 1.0
            g = g + np.kron(probs(W @ x) - e, x)
        return g

    def hessian(self, w: np.ndarray) -> np.ndarray:
        W = w.reshape(self.K, self.d)
        H = self._c() * np.eye(self.K * self.d) + self.Z
        for x in self.xs:
            s = probs(W @ x)
            H = H + np.kron(np.diag(s) - np.outer(s, s), np.outer(x, x))
        return H

    # --- a round ------------------------------------------------------------------------------
    def _evict(self, x: np.ndarray, y: int) -> None:
        K = self.K
        z = self.W @ x
        s = probs(z)
        J = np.diag(s) - np.outer(s, s)
        E = np.kron(np.eye(K), x[:, None])  # (D, K)
        lam_, vec = np.linalg.eigh(self.Z + E @ J @ E.T)
        lam_, vec = lam_[::-1], vec[:, ::-1]
        D = lam_.size
        cut = max(lam_[self.m], 0.0) if self.m < D else 0.0
        keep = np.maximum(lam_[: self.m] - cut, 0.0)
        Z_new = (vec[:, : self.m] * keep) @ vec[:, : self.m].T
        w = self.W.reshape(-1)
        e = np.zeros(K)
        if y > 0:
            e[y - 1] = 1.0
        grad = E @ (s - e)
        if self.anchored:  # the minimiser of the unsketched update, then b = A_new a
            H = E @ J @ E.T
            A_old = self._c() * np.eye(D) + self.Z
            a = np.linalg.solve(A_old + H, self.b + H @ w - grad)
            self.Z = Z_new
            self.rho += cut
            self.b = (self._c() * np.eye(D) + self.Z) @ a
            return
        dQw = (Z_new - self.Z) @ w + (0.5 * cut * w if self.robust else 0.0)
        self.Z = Z_new
        self.rho += cut
        self.b = self.b + dQw - grad

    def update(self, x: np.ndarray, y: int) -> None:
        x = np.asarray(x, np.float64)
        pos = self.t % self.B
        self.evicted = self.slots[pos] is not None
        if self.evicted:
            self._evict(*self.slots[pos])
        self.slots[pos] = (x, int(y))
        filled = [sl for sl in self.slots if sl is not None]
        self.xs = [sl[0] for sl in filled]
        self.ys = [sl[1] for sl in filled]
        self.t += 1
        w, self.steps, _ = self.fit(self.W.reshape(-1))
        g = self.gradient(w)
        scale = 1.0 + float(np.linalg.norm(self.b)) + sum(float(np.linalg.norm(v)) for v in self.xs)
        self.converged = bool(np.linalg.norm(g) <= np.sqrt(EPS) * scale)
        self.W = w.reshape(self.K, self.d)
        self.H = self.hessian(w)
        self.grad_norm = float(np.linalg.norm(g))
