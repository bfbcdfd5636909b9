"""The exploration diagnostic of MLogB runs, from :class:`~bandits_jax.mlogb.interact.MLogBMetrics`.

Per round, :func:`~bandits_jax.mlogb.interact.interact` reports ``bonus_spread`` and
``estimate_spread`` (max - min over the action set of the bonus and of the estimated reward) and
``explored`` (the optimistic choice differs from the greedy one). Where :func:`bonus_ratio`, the
median of ``bonus_spread / estimate_spread``, is far below 1 the bonus cannot change which action
wins: the learner is effectively greedy (``docs/sweeps.md``) and ``beta`` does not matter.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["SWEEP_FIELDS", "GREEDY_RATIO", "bonus_ratio", "exploration_columns"]

# The per-round fields of MLogBMetrics a sweep of MLogB learners keeps for its tables.
SWEEP_FIELDS = ("regret", "bonus_spread", "estimate_spread", "explored", "status")
GREEDY_RATIO = 1e-2  # below this bonus/estimate spread ratio a learner is flagged "greedy"


def bonus_ratio(metrics: Mapping[str, Any]) -> np.ndarray | None:
    """Per grid point (leading axis), the median over trials and rounds with an estimate spread
    of ``bonus_spread / estimate_spread`` (NaN if none); ``None`` without the spreads."""
    b, e = metrics.get("bonus_spread"), metrics.get("estimate_spread")
    if b is None or e is None:
        return None
    b, e = np.asarray(b, np.float64), np.asarray(e, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(e > 0, b / e, np.nan)
    flat = ratio.reshape(ratio.shape[0], -1)  # (G, trials * rounds)
    with warnings.catch_warnings():  # a grid point with no finite ratio: NaN, quietly
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(np.where(np.isfinite(flat), flat, np.nan), axis=1)


def exploration_columns(metrics: Mapping[str, Any]) -> dict[str, list]:
    """Per grid point, the ``columns`` of :func:`bandits_jax.sim.sweep.table`: ``explore_rate``
    (mean of ``explored``), ``bonus_ratio`` and ``greedy`` (``bonus_ratio < GREEDY_RATIO``)."""
    cols: dict[str, list] = {}
    if "explored" in metrics:
        ex = np.asarray(metrics["explored"], np.float64)
        cols["explore_rate"] = [float(v) for v in ex.reshape(ex.shape[0], -1).mean(axis=1)]
    ratio = bonus_ratio(metrics)
    if ratio is not None:
        cols["bonus_ratio"] = [float(r) for r in ratio]
        cols["greedy"] = [bool(r < GREEDY_RATIO) if np.isfinite(r) else None for r in ratio]
    return cols
