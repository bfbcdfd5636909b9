"""Plain-numpy standard LinUCB (Li et al. 2010, one shared parameter), one Python step per round.

The textbook form, written independently of :mod:`bandits_jax.mlogb.linucb`: the features are
``z = [x, 1]`` (an appended constant column, ``intercept=True``) or ``z = x``; each round the
ridge estimate is a dense solve of

    (lam I + Z^T Z) theta = Z^T r

(``Z`` the past features, ``r`` their scalar rewards ``r_y``: ``rewards[y-1]``, 0 for ``y = 0``),
and the choice is the lowest valid index within a relative ``1e-9`` of the maximum of
``theta^T z + alpha sqrt(z^T (lam I + Z^T Z)^{-1} z)`` (the library's tie rule). No
Sherman-Morrison, no JAX. float64.

:func:`play` runs it on a recorded stream: per round the action set, its mask, the outcome each
action would draw if chosen and the expected rewards (an environment whose action sets do not
depend on the choices, such as Section 4's synthetic one).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["NumpyLinUCB", "play"]

_TIE_RTOL = 1e-9


class NumpyLinUCB:
    """Standard LinUCB with a dense ridge solve per round (see the module docstring)."""

    def __init__(
        self, *, dim: int, lam: float, alpha: float, rewards: Any = (1.0,), intercept: bool = True
    ):
        if not lam > 0:
            raise ValueError(f"lam must be > 0, got {lam!r}")
        if not alpha >= 0:
            raise ValueError(f"alpha must be >= 0, got {alpha!r}")
        self.d, self.lam, self.alpha, self.intercept = int(dim), float(lam), float(alpha), intercept
        self.r = np.concatenate([[0.0], np.asarray(rewards, np.float64)])  # r_0 = 0
        D = self.d + 1 if intercept else self.d
        self.gram = np.zeros((D, D))  # Z^T Z, an exact running sum
        self.zr = np.zeros(D)  # Z^T r
        self.theta = np.zeros(D)

    def features(self, X: np.ndarray) -> np.ndarray:
        """``[X, 1]`` or ``X`` (rows)."""
        X = np.atleast_2d(np.asarray(X, np.float64))
        if self.intercept:
            return np.hstack([X, np.ones((X.shape[0], 1))])
        return X

    def matrix(self) -> np.ndarray:
        """``A = lam I + Z^T Z``."""
        return self.lam * np.eye(self.gram.shape[0]) + self.gram

    def scores(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(theta^T z, alpha ||z||_{A^{-1}})`` for each row of ``actions`` (N, d)."""
        Z = self.features(actions)
        sq = np.einsum("nd,dn->n", Z, np.linalg.solve(self.matrix(), Z.T))
        return Z @ self.theta, self.alpha * np.sqrt(np.maximum(sq, 0.0))

    def select(self, actions: np.ndarray, mask: np.ndarray | None = None) -> int:
        est, bon = self.scores(actions)
        values = est + bon
        valid = np.ones(values.shape, bool) if mask is None else np.asarray(mask, bool)
        valid = valid & ~np.isnan(values)
        if not valid.any():
            raise ValueError("select needs at least one valid (masked-in, non-NaN) action")
        vmax = values[valid].max()
        return int(np.argmax(valid & (values >= vmax - _TIE_RTOL * abs(vmax))))

    def update(self, x: np.ndarray, y: int) -> None:
        z = self.features(x)[0]
        self.gram += np.outer(z, z)
        self.zr += self.r[int(y)] * z
        self.theta = np.linalg.solve(self.matrix(), self.zr)


def play(
    learner: NumpyLinUCB,
    actions: np.ndarray,
    mask: np.ndarray,
    outcomes: np.ndarray,
    expected: np.ndarray,
) -> dict[str, np.ndarray]:
    """Plays a recorded stream of T rounds.

    Args:
      learner: a fresh :class:`NumpyLinUCB`.
      actions: (T, N, d); mask: (T, N) valid actions; outcomes: (T, N) the outcome of each action
        if chosen; expected: (T, N) expected rewards.

    Returns:
      ``{"choice": (T,), "y": (T,), "regret": (T,), "theta": (T, D)}`` (theta after each update).
    """
    T = actions.shape[0]
    choice, y, regret = np.zeros(T, np.int64), np.zeros(T, np.int64), np.zeros(T)
    thetas = np.zeros((T, learner.theta.shape[0]))
    for t in range(T):
        m = np.asarray(mask[t], bool)
        i = learner.select(actions[t], m)
        choice[t], y[t] = i, outcomes[t, i]
        regret[t] = np.max(np.where(m, expected[t], -np.inf)) - expected[t, i]
        learner.update(actions[t, i], y[t])
        thetas[t] = learner.theta
    return {"choice": choice, "y": y, "regret": regret, "theta": thetas}
