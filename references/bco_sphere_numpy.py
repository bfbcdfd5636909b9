"""Plain numpy reference of Algorithm 3 (BCO paper, Appendix C.5: two queries on a sphere and
projected gradient descent on ``(1 - xi) X``), one Python loop iteration per round, float64.

Written from the paper's Algorithm 3, independently of ``bandits_jax.bco`` (the projection and
step sizes are those of :mod:`references.bco_numpy`):

    w_1 = 0;  u_t = z_t / ||z_t||;  observe f_t(w_t + delta u_t), f_t(w_t - delta u_t)
    g_t = d / (2 delta) (f_t(w_t + delta u_t) - f_t(w_t - delta u_t)) u_t
    w_{t+1} = Pi_{(1 - xi) X}[w_t - eta_t g_t]

The random draw enters as the Gaussian vectors ``z_t`` (the caller replays the learner's draws);
everything else is computed here. The divisor is the paper's ``2 delta`` (the JAX learner divides
by the realised spacing ``<x_+ - x_-, u>``; the two differ by a relative ``eps |w| / delta``).
Step sizes: ``bco_numpy.step_size``, with ``Vbar_{t-1} = sum_{s<t} ||g_s||^2`` (the optimism of
Algorithm 3 is 0, so the ``"variance"`` kind is AdaGrad-norm).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from references.bco_numpy import project, step_size


def algorithm3(
    loss: Callable[[int, np.ndarray], float],
    d: int,
    normals: np.ndarray,
    *,
    domain: tuple,
    delta: float,
    xi: float,
    kind: str,
    params: dict,
) -> dict:
    """Runs Algorithm 3 for ``len(normals)`` rounds with the given Gaussian draws.

    Args:
      loss: ``(t, x) -> f_t(x)`` with ``t`` 0-based.
      d: dimension.
      normals: ``(T, d)`` standard normal draws ``z_t`` (``u_t = z_t / ||z_t||``).
      domain: ``("ball", R)`` or ``("box", lower, upper)``.
      delta, xi: exploration radius and shrinkage.
      kind, params: step-size schedule (``bco_numpy.step_size``).

    Returns:
      dict with ``w`` (``(T + 1, d)``: ``w_1 .. w_{T+1}``), ``queries`` (``(T, 2, d)``: the two
      points of each round), ``g`` (``(T, d)``), ``eta`` (``(T,)``), ``vbar`` (``(T + 1,)``:
      ``Vbar_0 .. Vbar_T``), ``loss`` (``(T,)``: the charged ``(f(x_t) + f(x'_t)) / 2``).
    """
    normals = np.asarray(normals, np.float64)
    T = normals.shape[0]
    w = np.zeros(d)
    vbar = 0.0
    ws, queries, gs, etas, vbars, charged = [w.copy()], [], [], [], [0.0], []
    for t in range(T):
        u = normals[t] / np.sqrt(np.sum(normals[t] ** 2))
        plus, minus = w + delta * u, w - delta * u
        fp, fm = float(loss(t, plus)), float(loss(t, minus))
        g = d / (2.0 * delta) * (fp - fm) * u
        eta = step_size(kind, d, t + 1, vbar, params)
        w = project(w - eta * g, domain, xi)
        vbar += float(g @ g)
        ws.append(w.copy())
        queries.append(np.stack([plus, minus]))
        gs.append(g)
        etas.append(eta)
        vbars.append(vbar)
        charged.append(0.5 * (fp + fm))
    return {
        "w": np.array(ws),
        "queries": np.array(queries),
        "g": np.array(gs),
        "eta": np.array(etas),
        "vbar": np.array(vbars),
        "loss": np.array(charged),
    }
