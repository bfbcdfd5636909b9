"""The exploration diagnostic of MLogB runs, from :class:`~bandits_jax.mlogb.interact.MLogBMetrics`.

Per round, :func:`~bandits_jax.mlogb.interact.interact` reports ``bonus_spread`` and
``estimate_spread`` (max - min over the action set of the optimistic bonus and of the estimated
reward) and ``explored`` (the optimistic choice differs from the greedy one). :func:`bonus_ratio`
is the median over rounds and trials of ``bonus_spread / estimate_spread``: far below 1 (e.g. 1e-4
with Section 4's recipe (l, e) = (0.75, 0.75) on the K = 1 synthetic stream) the bonus cannot
change which action wins, the learner is effectively greedy and ``beta`` does not matter.
:func:`exploration_columns` gives these per grid point as extra columns of
:func:`bandits_jax.sim.sweep.table`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["SWEEP_FIELDS", "GREEDY_RATIO", "bonus_ratio", "exploration_columns"]

# The per-round fields of MLogBMetrics a sweep of MLogB learners keeps for its tables.
SWEEP_FIELDS = ("regret", "bonus_spread", "estimate_spread", "explored", "status")
GREEDY_RATIO = 1e-2  # below this bonus/estimate spread ratio a learner is flagged "greedy"


def bonus_ratio(metrics: Mapping[str, Any]) -> np.ndarray | None:
    """Per grid point (leading axis), the median over trials and rounds of
    ``bonus_spread / estimate_spread``; rounds with no estimate spread (round 1, where W = 0) are
    left out, a grid point with none is NaN. ``None`` if the metrics lack the spreads."""
    b, e = metrics.get("bonus_spread"), metrics.get("estimate_spread")
    if b is None or e is None:
        return None
    b, e = np.asarray(b, np.float64), np.asarray(e, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(e > 0, b / e, np.nan)
    flat = ratio.reshape(ratio.shape[0], -1)  # (G, trials * rounds)
    out = np.full(flat.shape[0], np.nan)
    for g, row in enumerate(flat):
        vals = row[np.isfinite(row)]
        if vals.size:
            out[g] = np.median(vals)
    return out


def exploration_columns(metrics: Mapping[str, Any]) -> dict[str, list]:
    """Per grid point: ``explore_rate`` (mean of ``explored``), ``bonus_ratio`` and ``greedy``
    (``bonus_ratio < GREEDY_RATIO``; ``None`` where the ratio is undefined), each where the
    metrics carry what it needs: the ``columns`` argument of :func:`bandits_jax.sim.sweep.table`."""
    cols: dict[str, list] = {}
    if "explored" in metrics:
        ex = np.asarray(metrics["explored"], np.float64)
        cols["explore_rate"] = [float(v) for v in ex.reshape(ex.shape[0], -1).mean(axis=1)]
    ratio = bonus_ratio(metrics)
    if ratio is not None:
        cols["bonus_ratio"] = [float(r) for r in ratio]
        cols["greedy"] = [bool(r < GREEDY_RATIO) if np.isfinite(r) else None for r in ratio]
    return cols
