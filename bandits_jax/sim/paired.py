"""Paired comparisons of learners' final regrets, and the rule that turns them into a claim.

Every learner is played on the same pairs (rewarded class, seed): the same streams. Against a
reference learner, :func:`compare` reports the mean paired difference of final regret
``mean(r_learner - r_reference)`` with a bootstrap 95% percentile interval (the pairs resampled
with replacement, ``resamples`` times, from a fixed numpy seed: Efron and Tibshirani, "An
Introduction to the Bootstrap", 1993, ch. 13), and the ratio of means
``mean(r_learner) / mean(r_reference)``.

:func:`verdict` is the rule for a claim: a learner "wins" against the reference (less regret) only
where the interval of its paired difference lies below zero on two or more disjoint evaluation
draws of seeds, each of them; it "loses" where every draw's interval lies above zero; otherwise
(an interval that holds zero, draws that disagree, or fewer than two draws) the two are "level".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = ["Comparison", "bootstrap_interval", "compare", "verdict"]


class Comparison(NamedTuple):
    """One learner against the reference on ``n`` pairs: mean final regrets, the mean paired
    difference ``diff`` (learner - reference), its interval ``[low, high]``, the ratio of means."""

    n: int
    mean: float
    reference_mean: float
    diff: float
    low: float
    high: float
    ratio: float


def bootstrap_interval(
    diff: np.ndarray, *, resamples: int = 10_000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """The bootstrap percentile interval of the mean of ``diff`` (one entry per pair)."""
    diff = np.asarray(diff, np.float64).reshape(-1)
    if diff.size < 2 or not np.all(np.isfinite(diff)):
        raise ValueError(f"diff: expected at least 2 finite values, got {diff.size}")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for lo in range(0, resamples, 1000):  # in blocks: memory O(1000 n)
        idx = rng.integers(0, diff.size, (min(resamples, lo + 1000) - lo, diff.size))
        means[lo : lo + idx.shape[0]] = diff[idx].mean(axis=1)
    alpha = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(means, [alpha, 100.0 - alpha])
    return float(low), float(high)


def compare(
    regrets: Mapping[str, Any], reference: str, *, resamples: int = 10_000, seed: int = 0
) -> dict[str, Comparison]:
    """Each learner of ``regrets`` (name -> final regret per pair, the pairs in the same order
    for every learner) against ``regrets[reference]``; the reference itself is left out."""
    ref = np.asarray(regrets[reference], np.float64)
    out = {}
    for name, r in regrets.items():
        r = np.asarray(r, np.float64)
        if r.shape != ref.shape:
            raise ValueError(f"{name}: {r.shape} pairs, the reference has {ref.shape}")
        if name == reference:
            continue
        low, high = bootstrap_interval(r - ref, resamples=resamples, seed=seed)
        m, m_ref = float(r.mean()), float(ref.mean())
        ratio = m / m_ref if m_ref != 0 else float("nan")
        out[name] = Comparison(r.size, m, m_ref, float((r - ref).mean()), low, high, ratio)
    return out


def verdict(intervals: Sequence[tuple[float, float]]) -> str:
    """The rule (module docstring) on the ``(low, high)`` intervals of one learner's paired
    difference against the reference on disjoint draws: "wins", "loses" or "level"."""
    if len(intervals) < 2:
        return "level"
    if all(high < 0 for _, high in intervals):
        return "wins"
    if all(low > 0 for low, _ in intervals):
        return "loses"
    return "level"
