"""Plain numpy reference of Algorithm 6 (BCO paper, Section 5.2 and Appendix E.2: universal
regret with two-point feedback), one Python loop iteration per round, float64.

Written from the paper (Algorithm 6, eq. 2.2, Table 2, E.6-E.9) and the errata, independently of
``bandits_jax.bco`` (in particular of ``bandits_jax.bco.meta``): its own estimator, base-learner
steps, Optimistic-Adapt-ML-Prod in the potentials ``W`` themselves (not their logarithms), and its
own solve of the fixed point of the hints. Each round ``t = 1..T``:

* query ``w_t +- delta e_{i_t}`` around ``w_t = sum_i p_{t,i} w_{t,i}``; eq. (2.2) with the divisor
  ``2 delta``: ``v = (f(x_t) - f(x'_t)) / (2 delta)``, ``g_t = g~_t + d (v - g~_{t,i}) e_i``,
  ``g~_{t+1} = g~_t + (v - g~_{t,i}) e_i``, ``Vbar_t = Vbar_{t-1} + ||g_t - g~_t||^2``;
* meta feedback: ``l_{t,i} = s <g_t, w_{t,i}> + 1/2``, ``r_{t,i} = <p_t, l_t> - l_{t,i}``;
  E.9 ``eps_{t,i} = min(cap, sqrt(ln N / sum_{s<=t} (r_{s,i} - m_{s,i})^2))`` (``cap`` while the
  sum is 0, errata 17); E.7 ``W_{t,i} = (W_{t-1,i} exp(eps_{t-1,i} r_{t,i} - eps_{t-1,i}^2
  (r_{t,i} - m_{t,i})^2))^(eps_{t,i} / eps_{t-1,i})``, ``W_0 = 1/N``, ``eps_0 = cap``;
* base learners (Table 2), OOGD (E.2) ``w^_{t+1,i} = Pi[w^_{t,i} - eta_t grad_i]``,
  ``w_{t+1,i} = Pi[w^_{t+1,i} - eta_{t+1} M_{t+1,i}]`` on ``(1 - xi) X``: strongly convex
  ``lambda_i`` (E.6): ``grad_i = g_t + lambda_i/2 (w_{t,i} - w_t)`` (the gradient of
  ``h^sc_{t,i}`` at ``w_{t,i}``), ``M_{t+1,i} = g~_{t+1} + lambda_i/2 (w_{t,i} - w_t)`` (the
  hint the library documents), ``eta_t = 4 / (lambda_i t)``; convex and linear: ``grad = g_t``,
  ``M = g~_{t+1}``, ``eta_t = 2 R / sqrt(offset + Vbar_{t-1})`` (``offset = d^2`` in Table 2);
* hints (E.8) ``m_{t+1,i} = 0`` (strongly convex) and ``s <g~_{t+1}, w_{t+1} - w_{t+1,i}>``
  (convex, linear), and ``p_{t+1,i} ∝ eps_{t,i} exp(eps_{t,i} m_{t+1,i}) W_{t,i}`` (E.7), with
  ``w_{t+1} = sum_j p_{t+1,j} w_{t+1,j}`` (``optimism="fixed_point"``: the scalar
  ``u = s <g~_{t+1}, w_{t+1}>`` solves ``u = s <g~_{t+1}, sum_j p_j(u) w_{t+1,j}>``, found by
  bisection on ``[min_j a_j, max_j a_j]``, ``a_j = s <g~_{t+1}, w_{t+1,j}>``; unique: the right
  side's slope is a covariance under ``p`` bounded by ``cap (max a - min a) / 4 < 1``) or
  ``w_{t+1} ~ sum_j p_{t,j} w_{t+1,j}`` (``optimism="lagged"``).

The coordinate draws ``i_t`` are an input (the caller replays the learner's draws).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from references.bco_numpy import project


def prod_weights(lr: np.ndarray, potential: np.ndarray, hints: np.ndarray) -> np.ndarray:
    """E.7's ``p ∝ eps exp(eps m) W``."""
    q = lr * np.exp(lr * hints) * potential
    return q / np.sum(q)


def prod_learning_rate(num_experts: int, cap: float, err_sum: np.ndarray) -> np.ndarray:
    """E.9, ``cap`` where ``sum (r - m)^2 = 0`` (errata 17)."""
    out = np.full(err_sum.shape, cap)
    pos = err_sum > 0
    out[pos] = np.minimum(cap, np.sqrt(math.log(num_experts) / err_sum[pos]))
    return out


def _bisect(psi: Callable[[float], float], lo: float, hi: float) -> float:
    """A root of the increasing ``psi`` on ``[lo, hi]`` (``psi(lo) <= 0 <= psi(hi)``), bisected
    until the midpoint is one of the ends (float64 resolution)."""
    for _ in range(2000):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if psi(mid) > 0:
            hi = mid
        else:
            lo = mid
    return 0.5 * (lo + hi)


def algorithm6(
    loss: Callable[[int, np.ndarray], float],
    d: int,
    coords: np.ndarray,
    *,
    domain: tuple,
    radius: float,
    delta: float,
    xi: float,
    lams: np.ndarray,
    cvx_offsets: tuple[float, float],
    loss_scale: float,
    lr_cap: float = 0.125,
    optimism: str = "fixed_point",
) -> dict:
    """Runs Algorithm 6 for ``len(coords)`` rounds with the given coordinate draws.

    Args:
      loss: ``(t, x) -> f_t(x)`` with ``t`` 0-based.
      d: dimension.
      coords: ``i_t`` for each round (0-based ints).
      domain: ``("ball", R)`` or ``("box", lower, upper)``.
      radius: ``R`` of Table 2's convex step.
      delta, xi: exploration radius and shrinkage.
      lams: the strongly convex pool (E.6).
      cvx_offsets: the offsets under the convex and linear learners' square roots.
      loss_scale: ``s`` of the meta losses (``1 / (2 sqrt(10) d G R)`` in the paper).
      lr_cap: the cap of E.9.
      optimism: ``"fixed_point"`` or ``"lagged"`` (module docstring).

    Returns:
      dict with ``queries`` (``(T, 2, d)``), ``w`` (``(T + 1, d)``: ``w_1 .. w_{T+1}``),
      ``weights`` and ``hints`` (``(T + 1, N)``: ``p_1 .. p_{T+1}``, ``m_1 .. m_{T+1}``), ``lr``
      (``(T + 1, N)``: ``eps_0 .. eps_T``), ``base_w`` (``(T + 1, N, d)``), ``regrets``
      (``(T, N)``), ``g`` and ``g_tilde`` (``(T, d)``: ``g_t``, ``g~_{t+1}``), ``vbar``
      (``(T + 1,)``), ``loss`` (``(T,)``: the charged ``(f(x_t) + f(x'_t)) / 2``) and
      ``slope_bound`` (the largest ``cap (max a - min a) / 4`` met, < 1 for a unique fixed point).
    """
    if optimism not in ("fixed_point", "lagged"):
        raise ValueError(f"optimism: expected 'fixed_point' or 'lagged', got {optimism!r}")
    lams = np.asarray(lams, np.float64)
    n_sc = lams.shape[0]
    n = n_sc + 2
    is_cvx = np.arange(n) >= n_sc
    offsets = np.asarray(cvx_offsets, np.float64)
    s = float(loss_scale)

    w = np.zeros(d)
    g_tilde = np.zeros(d)
    vbar = 0.0
    base_w = np.zeros((n, d))  # w_{t,i}: strongly convex pool first, then convex, linear
    base_w_hat = np.zeros((n, d))
    weights = np.full(n, 1.0 / n)  # p_1
    hints = np.zeros(n)  # m_1
    potential = np.full(n, 1.0 / n)  # W_0
    lr = np.full(n, float(lr_cap))  # eps_0
    err_sum = np.zeros(n)
    slope_bound = 0.0
    out = {k: [] for k in ("queries", "regrets", "g", "g_tilde", "loss")}
    out.update(
        w=[w.copy()],
        weights=[weights.copy()],
        hints=[hints.copy()],
        lr=[lr.copy()],
        base_w=[base_w.copy()],
        vbar=[0.0],
    )
    for t in range(1, len(coords) + 1):
        i = int(coords[t - 1])
        plus, minus = w.copy(), w.copy()
        plus[i] += delta
        minus[i] -= delta
        fp, fm = float(loss(t - 1, plus)), float(loss(t - 1, minus))
        v = (fp - fm) / (2.0 * delta)
        g = g_tilde.copy()
        g[i] += d * (v - g_tilde[i])
        g_tilde_next = g_tilde.copy()
        g_tilde_next[i] = v
        vbar_next = vbar + float(np.sum((g - g_tilde) ** 2))

        # Meta feedback (E.7, E.9) with the hint m_t that produced p_t.
        ell = s * (base_w @ g) + 0.5
        r = weights @ ell - ell
        err_sum = err_sum + (r - hints) ** 2
        lr_next = prod_learning_rate(n, float(lr_cap), err_sum)
        potential = (potential * np.exp(lr * r - lr**2 * (r - hints) ** 2)) ** (lr_next / lr)

        # Base learners (Table 2): OOGD on the surrogates.
        eta = np.empty(n)
        eta_next = np.empty(n)
        eta[:n_sc] = 4.0 / (lams * t)
        eta_next[:n_sc] = 4.0 / (lams * (t + 1))
        eta[n_sc:] = 2.0 * radius / np.sqrt(offsets + vbar)
        eta_next[n_sc:] = 2.0 * radius / np.sqrt(offsets + vbar_next)
        pull = np.zeros((n, d))
        pull[:n_sc] = 0.5 * lams[:, None] * (base_w[:n_sc] - w)
        new_hat = np.empty((n, d))
        new_w = np.empty((n, d))
        for k in range(n):
            new_hat[k] = project(base_w_hat[k] - eta[k] * (g + pull[k]), domain, xi)
            new_w[k] = project(new_hat[k] - eta_next[k] * (g_tilde_next + pull[k]), domain, xi)

        # Hints of round t + 1 (E.8) and p_{t+1} (E.7).
        a = s * (new_w @ g_tilde_next)

        def weights_for(u, a=a, potential=potential, lr_next=lr_next):
            return prod_weights(lr_next, potential, np.where(is_cvx, u - a, 0.0))

        if optimism == "fixed_point":
            slope_bound = max(slope_bound, float(lr_cap) * float(np.ptp(a)) / 4.0)

            def psi(u, new_w=new_w, g_tilde_next=g_tilde_next, weights_for=weights_for):
                return u - s * float(g_tilde_next @ (weights_for(u) @ new_w))

            u = _bisect(psi, float(np.min(a)), float(np.max(a)))
        else:
            u = s * float(g_tilde_next @ (weights @ new_w))
        hints = np.where(is_cvx, u - a, 0.0)
        weights = prod_weights(lr_next, potential, hints)
        w = weights @ new_w

        out["queries"].append(np.stack([plus, minus]))
        out["regrets"].append(r)
        out["g"].append(g)
        out["g_tilde"].append(g_tilde_next)
        out["loss"].append(0.5 * (fp + fm))
        base_w, base_w_hat, g_tilde, vbar, lr = new_w, new_hat, g_tilde_next, vbar_next, lr_next
        for key, val in (
            ("w", w),
            ("weights", weights),
            ("hints", hints),
            ("lr", lr),
            ("base_w", base_w),
            ("vbar", vbar),
        ):
            out[key].append(np.copy(val))
    res = {k: np.array(v) for k, v in out.items()}
    res["slope_bound"] = slope_bound
    return res
