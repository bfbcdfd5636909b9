"""Plain-numpy SOFUL (Kuzborskij, Cella and Cesa-Bianchi 2019): LinUCB on a Frequent Directions
sketch, one Python step per round.

Written independently of :mod:`bandits_jax.mlogb.soful`: :class:`NumpyLinUCB` (the features,
rewards, index and tie rule) with its matrix ``lam I + Z^T Z`` replaced by

    V = B^T B + (lam + rho) I,

``B`` a row buffer of Frequent Directions in its fast form (Ghashami et al. 2016, Algorithm
3; ``m`` is capped at ``D``): each ``z`` is appended as a row; when that fills the buffer
(``min(2m, D) + 1`` rows) it is replaced by its top m right singular directions,
``sqrt(s_i^2 - s_{m+1}^2) v_i^T`` (numpy's SVD; the new row is shrunk with the others), and
``rho`` grows by ``s_{m+1}^2`` (0 where the buffer has at most m singular values). ``theta`` is
a dense solve of ``V theta = sum r z``, the bonus reads ``np.linalg.inv(V)``. No Woodbury, no
JAX. float64. :func:`play` is LinUCB's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from references.linucb_numpy import NumpyLinUCB, play

__all__ = ["NumpySOFUL", "play"]


class NumpySOFUL(NumpyLinUCB):
    """SOFUL with a dense inverse per round (see the module docstring)."""

    def __init__(self, *, dim: int, sketch_size: int, lam: float, alpha: float,
                 rewards: Any = (1.0,), intercept: bool = True):  # fmt: skip
        super().__init__(dim=dim, lam=lam, alpha=alpha, rewards=rewards, intercept=intercept)
        D = self.theta.shape[0]
        self.m = min(int(sketch_size), D)
        self.rows = np.zeros((0, D))  # the buffer's filled rows
        self.capacity = min(2 * self.m, D) + 1
        self.rho = 0.0

    def matrix(self) -> np.ndarray:
        """``V = B^T B + (lam + rho) I``."""
        return self.rows.T @ self.rows + (self.lam + self.rho) * np.eye(self.rows.shape[1])

    def scores(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(theta^T z, alpha sqrt(z^T V^{-1} z))`` with ``V^{-1}`` by ``np.linalg.inv``."""
        Z = self.features(actions)
        sq = np.einsum("nd,de,ne->n", Z, np.linalg.inv(self.matrix()), Z)
        return Z @ self.theta, self.alpha * np.sqrt(np.maximum(sq, 0.0))

    def update(self, x: np.ndarray, y: int) -> None:
        z = self.features(x)[0]
        self.rows = np.vstack([self.rows, z])
        if self.rows.shape[0] == self.capacity:  # full: shrink to m directions
            _, s, vt = np.linalg.svd(self.rows, full_matrices=False)
            delta = s[self.m] ** 2 if s.size > self.m else 0.0
            keep = np.sqrt(np.maximum(s[: self.m] ** 2 - delta, 0.0))
            self.rows, self.rho = keep[:, None] * vt[: self.m], self.rho + delta
        self.zr += self.r[int(y)] * z
        self.theta = np.linalg.solve(self.matrix(), self.zr)
