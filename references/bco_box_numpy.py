"""numpy reference of Algorithm 4 (one-point linear bandits on a box), one Python loop per round.

Paper: BCO with gradient variation, Section 4 (eq. 4.2) and Appendix D.1 (eq. D.4, Lemma 11,
Algorithm 4). Written independently of :mod:`bandits_jax.bco.one_point` for tests and speed
comparisons: the equations ``F_{t,i}(x) = 0`` are solved in the box coordinate
``s = (x - m) / h`` in ``(-1, 1)`` (not in the JAX learner's ``theta``) by a vectorised safeguarded
Newton iteration with bisection, on
``h F_{t,i} = kappa + (gamma sqrt(2 (1 + s^2)) + 2 s) / (1 - s^2)``.

The same conventions as the JAX learner: start at the box centre (errata 15) and the optimism cap
``|eta c_i| <= cap`` with the shrunk buffers also used for ``z_t`` (see the JAX module docstring).
"""

from __future__ import annotations

import numpy as np


def _solve_s(kappa, gamma, s0, *, max_steps=200):
    """Roots of ``H(s) = kappa + (gamma sqrt(2 (1+s^2)) + 2 s) / (1 - s^2)`` on ``(-1, 1)``."""
    eps = np.finfo(kappa.dtype).eps
    lo = -np.ones_like(kappa)
    hi = np.ones_like(kappa)
    s = np.clip(s0, np.nextafter(-1.0, 1.0), np.nextafter(1.0, -1.0))

    def h_and_dh(s):
        q = 1.0 - s * s
        root = np.sqrt(2.0 * (1.0 + s * s))
        num = gamma * root + 2.0 * s
        dnum = gamma * 2.0 * s / root + 2.0
        return kappa + num / q, (dnum * q + 2.0 * s * num) / (q * q)

    active = np.ones(kappa.shape, bool)
    for _ in range(max_steps):
        f, df = h_and_dh(s)
        lo = np.where(active & (f < 0), s, lo)
        hi = np.where(active & (f > 0), s, hi)
        done = (f == 0) | (hi - lo <= 4 * eps)
        active &= ~done
        if not active.any():
            break
        newton = s - f / df
        ok = np.isfinite(newton) & (newton > lo) & (newton < hi)
        s = np.where(active, np.where(ok, newton, 0.5 * (lo + hi)), s)
    return s


class BoxFTRLNumpy:
    """Algorithm 4 with an explicit per-round loop.

    Args:
      eta: step size.
      lower, upper: box faces, shape (d,).
      optimism_cap: Lemma 11 cap on ``|eta c_i|``.
    """

    def __init__(self, eta, lower, upper, optimism_cap=0.9):
        self.eta = float(eta)
        self.lower = np.asarray(lower, np.float64)
        self.upper = np.asarray(upper, np.float64)
        self.cap = float(optimism_cap)
        d = self.lower.shape[0]
        self.d = d
        self.mid = 0.5 * (self.lower + self.upper)
        self.half = 0.5 * (self.upper - self.lower)
        self.s = np.zeros(d)  # w_1 = centre
        self.w = self.mid.copy()
        self.grad_sum = np.zeros(d)
        self.r_plus = np.zeros(d)
        self.r_minus = np.zeros(d)

    def _lam(self):
        dist_lo = self.w - self.lower
        dist_hi = self.upper - self.w
        return 1.0 / dist_lo**2 + 1.0 / dist_hi**2

    def _c_eff(self, r_plus, r_minus):
        bound = self.cap / self.eta
        return np.clip(0.5 * (r_plus - r_minus), -bound, bound)

    def query(self, coord, sign):
        """The point ``x_t = w_t + eps_t lam_{t,i}^{-1/2} e_i``."""
        x = self.w.copy()
        x[coord] += sign / np.sqrt(self._lam()[coord])
        return x

    def update(self, coord, sign, value):
        """One round's update with the observed ``value = <l_t, x_t>``."""
        sqrt_lam = np.sqrt(self._lam())
        c = self._c_eff(self.r_plus, self.r_minus)
        g_tilde = sqrt_lam * c
        z = 0.5 * (self.r_plus[coord] + self.r_minus[coord]) + sign * c[coord]
        g = g_tilde.copy()
        g[coord] += self.d * (value - z) * sign * sqrt_lam[coord]
        self.grad_sum += g
        if sign > 0:
            self.r_plus[coord] = value
        else:
            self.r_minus[coord] = value
        c_new = self._c_eff(self.r_plus, self.r_minus)
        kappa = self.eta * self.grad_sum * self.half
        gamma = self.eta * c_new
        self.s = _solve_s(kappa, gamma, self.s)
        self.w = self.mid + self.half * self.s

    def step(self, loss_vector, coord, sign):
        """Plays one round on ``f_t(x) = <loss_vector, x>``; returns ``(x_t, value)``."""
        x = self.query(coord, sign)
        value = float(x @ loss_vector)
        self.update(coord, sign, value)
        return x, value


def run_box_ftrl_numpy(eta, lower, upper, loss_vectors, coords, signs, optimism_cap=0.9):
    """Runs Algorithm 4 for ``T`` rounds with given draws ``(i_t, eps_t)``.

    Args:
      eta, lower, upper, optimism_cap: as :class:`BoxFTRLNumpy`.
      loss_vectors: (T, d) linear losses ``l_t``.
      coords: (T,) ints in ``[0, d)``; signs: (T,) in ``{-1, +1}``.

    Returns:
      dict with ``w`` (T, d): the iterate used at each round, ``x`` (T, d) the queries, ``loss``
      (T,) the values paid, ``w_final`` (d,).
    """
    learner = BoxFTRLNumpy(eta, lower, upper, optimism_cap)
    loss_vectors = np.asarray(loss_vectors, np.float64)
    T, d = loss_vectors.shape
    ws = np.empty((T, d))
    xs = np.empty((T, d))
    losses = np.empty(T)
    for t in range(T):
        ws[t] = learner.w
        xs[t], losses[t] = learner.step(loss_vectors[t], int(coords[t]), float(signs[t]))
    return {"w": ws, "x": xs, "loss": losses, "w_final": learner.w.copy()}
