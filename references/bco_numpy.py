"""Plain numpy reference of Algorithm 1 (BCO paper, Section 3.1: eq. 2.2 estimator + optimistic
OGD on ``(1 - xi) X``), one Python loop iteration per round, float64.

Written independently of ``bandits_jax.bco`` (its own projection, estimator and step sizes) so
that tests can compare iterates, and benchmarks can time a per-round loop. Given the same
coordinate draws ``i_t`` it reproduces ``bandits_jax.bco.two_point.two_point_learner``'s iterates
(the divisor of the central difference is the realised spacing ``x_+[i] - x_-[i]``, as there).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np


def project(x: np.ndarray, domain: tuple, shrink: float) -> np.ndarray:
    """``Pi_{(1 - shrink) X}`` for ``("ball", R)`` or ``("box", lower, upper)``."""
    s = 1.0 - shrink
    if domain[0] == "ball":
        rad = s * domain[1]
        n = float(np.linalg.norm(x))
        return x * (rad / n) if n > rad else x
    return np.clip(x, s * np.asarray(domain[1]), s * np.asarray(domain[2]))


def step_size(kind: str, d: int, t: int, vbar: float, p: dict) -> float:
    """``eta_t`` for round ``t`` (1-based) given ``Vbar_{t-1}`` (see ``bco.schedules``).

    ``p`` holds ``radius, lam, lipschitz, scale, offset``.
    """
    if kind == "convex":
        return p["scale"] * p["radius"] / math.sqrt(p["offset"] + vbar)
    if kind == "variance":
        return p["scale"] * p["radius"] / math.sqrt(d * d + vbar)
    if kind == "strongly_convex":
        return p["scale"] / (p["lam"] * t)
    if kind == "chiang":
        return p["scale"] / (p["lam"] * (1.0 + vbar / (4.0 * d * d * p["lipschitz"] ** 2)))
    if kind == "sqrt_t":
        return p["scale"] * p["radius"] / (p["lipschitz"] * math.sqrt(d * t))
    raise ValueError(f"kind: unknown schedule {kind!r}")


def algorithm1(
    loss: Callable[[int, np.ndarray], float],
    d: int,
    coords: np.ndarray,
    *,
    domain: tuple,
    delta: float,
    xi: float,
    kind: str,
    params: dict,
) -> dict:
    """Runs Algorithm 1 for ``len(coords)`` rounds with the given coordinate draws.

    Args:
      loss: ``(t, x) -> f_t(x)`` with ``t`` 0-based.
      d: dimension.
      coords: ``i_t`` for each round (0-based ints).
      domain: ``("ball", R)`` or ``("box", lower, upper)``.
      delta, xi: exploration radius and shrinkage.
      kind, params: step-size schedule (see :func:`step_size`).

    Returns:
      dict with ``w`` (``(T + 1, d)``: ``w_1 .. w_{T+1}``), ``w_hat``, ``g_tilde`` (same shapes),
      ``vbar`` (``(T + 1,)``: ``Vbar_0 .. Vbar_T``), ``loss`` (charged, ``(T,)``).
    """
    T = len(coords)
    w = np.zeros(d)
    w_hat = np.zeros(d)
    g_tilde = np.zeros(d)
    vbar = 0.0
    ws, whs, gts, vbars, charged = [w.copy()], [w_hat.copy()], [g_tilde.copy()], [0.0], []
    for t in range(T):
        i = int(coords[t])
        plus = w.copy()
        minus = w.copy()
        plus[i] = w[i] + delta
        minus[i] = w[i] - delta
        fp, fm = float(loss(t, plus)), float(loss(t, minus))
        charged.append(0.5 * (fp + fm))
        v = (fp - fm) / (plus[i] - minus[i])
        # eq. (2.2)
        gap = v - g_tilde[i]
        g = g_tilde.copy()
        g[i] += d * gap
        g_tilde_next = g_tilde.copy()
        g_tilde_next[i] = v
        err_sq = (d * gap) ** 2
        eta_t = step_size(kind, d, t + 1, vbar, params)
        vbar = vbar + err_sq
        eta_next = step_size(kind, d, t + 2, vbar, params)
        w_hat = project(w_hat - eta_t * g, domain, xi)
        w = project(w_hat - eta_next * g_tilde_next, domain, xi)
        g_tilde = g_tilde_next
        ws.append(w.copy())
        whs.append(w_hat.copy())
        gts.append(g_tilde.copy())
        vbars.append(vbar)
    return {
        "w": np.array(ws),
        "w_hat": np.array(whs),
        "g_tilde": np.array(gts),
        "vbar": np.array(vbars),
        "loss": np.array(charged),
    }
