"""What a learner costs, against a :class:`Budget`: memory a trial and time a round.

Memory is exact: the bytes of the learner's state (``jax.eval_shape`` of its ``init``, nothing
allocated). Time is the kind's work a round in multiply-adds, divided by :data:`RATE`, with
``n`` actions, ``D = K d`` (``d + 1`` for the linear kinds, with their intercept) and ``m`` the
sketch size:

* ``linucb``, ``lin-ts``: ``(n + 3) D^2`` (a D x D inverse or root read by the scores and the
  update);
* ``soful``: ``(2 n + 12) m D`` (a sketch of up to 2m + 1 directions, its shrink amortised);
* ``eofd``, ``eofd-robust``, ``greedy``: ``(n + 8) (m + K) K d`` (He et al., O(K d (m + K)) a
  round with the fast rule's shrink amortised; the paper's O(K d (m + K)^2) bounds it);
* ``eofd-buffered``: 8 times EOFD's with ``m + B K`` directions (``B`` its buffer; a refit of
  a few Newton steps over the sketch and the buffer);
* ``oful``, ``ecolog``: ``(K d)^3`` (a factorisation a round).

:data:`RATE` is nominal: a figure of the right order for one CPU core on these kernels, not a
promise; ``docs/recipes.md`` ("Cost and budget") compares the estimates with
``benchmarks.mlogb_speed``'s measured rounds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from bandits_jax.sim.chunks import tree_bytes

#: Multiply-adds a second that a time estimate assumes (module docstring).
RATE = 5e9
#: Actions a round that a time estimate assumes.
ACTIONS = 20


class Budget(NamedTuple):
    """What one trial may cost: ``ms_per_round`` (estimated, :func:`round_ms`) and
    ``bytes_per_trial`` (its learner state); ``None`` leaves either unbounded. The default keeps
    64 trials within 8 GiB at interactive speed."""

    ms_per_round: float | None = 50.0
    bytes_per_trial: float | None = 128 * 2**20


DEFAULT_BUDGET = Budget()


def _full(K: int, d: int, m: int, B: int) -> float:
    return (ACTIONS + 3) * (d + 1) ** 2


def _sketched(K: int, d: int, m: int, B: int) -> float:
    return (ACTIONS + 8) * (m + K) * K * d


def _cubic(K: int, d: int, m: int, B: int) -> float:
    return float(K * d) ** 3


_WORK: dict[str, Callable[[int, int, int, int], float]] = {
    "linucb": _full,
    "lin-ts": _full,
    "soful": lambda K, d, m, B: (2 * ACTIONS + 12) * m * (d + 1),
    "eofd": _sketched,
    "eofd-robust": _sketched,
    "greedy": _sketched,
    "eofd-buffered": lambda K, d, m, B: 8 * _sketched(K, d, m + B * K - K, B),
    "oful": _cubic,
    "ecolog": _cubic,
}
KINDS = tuple(_WORK)


def round_ms(kind: str, *, num_outcomes: int, dim: int, sketch_size: int, buffer: int = 0) -> float:
    """The estimated ms a round of one trial (module docstring); ``buffer``: eofd-buffered's B."""
    if kind not in _WORK:
        raise ValueError(f"round_ms: kind: expected one of {list(KINDS)}, got {kind!r}")
    work = _WORK[kind](int(num_outcomes), int(dim), int(sketch_size), int(buffer))
    return 1e3 * work / RATE


def state_bytes(learner: Any, hparams: Any) -> int:
    """The bytes of ``learner.init(hparams)``, by ``jax.eval_shape`` (nothing allocated)."""
    return tree_bytes(jax.eval_shape(learner.init, hparams))


def fits(budget: Budget, ms: float, nbytes: float) -> bool:
    """Whether a round of ``ms`` and a state of ``nbytes`` are within ``budget``."""
    within = lambda x, cap: cap is None or x <= cap  # noqa: E731
    return within(ms, budget.ms_per_round) and within(nbytes, budget.bytes_per_trial)
