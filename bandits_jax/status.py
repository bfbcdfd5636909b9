"""One status space for every solve, update and selection of the library.

Every producer writes a :class:`Status` code (int32 under ``jit``), in the manner of
optimistix's ``RESULTS``. The members are also module-level names (``enum.global_enum``), so
:mod:`bandits_jax.linalg` imports the solver codes alone (``CONVERGED``, ``MAX_STEPS``,
``NONFINITE``, ``INACTIVE``, ``INEXACT``); the bandit packages add ``BAD_OUTCOME`` (updates) and
``NAN_SCORES``, ``EMPTY_MASK`` (selection). This module imports nothing from the library.

What a code means comes from three tables, never from its numeric value:

* :data:`SEVERITY`, mildest first: :func:`worst` / :func:`worst_of` keep the more severe code,
  so combining the statuses of sub-steps does not depend on their order (``CONVERGED``, the
  mildest, is neutral);
* :data:`OK_CODES`: the codes that are not failures (:func:`is_failure`);
* :data:`REJECTED_CODES`: the update was rejected and the previous state kept
  (:func:`is_rejected`).
"""

from __future__ import annotations

import enum
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "MESSAGES",
    "OK_CODES",
    "REJECTED_CODES",
    "SEVERITY",
    "Status",
    "StatusError",
    "count_status",
    "is_failure",
    "is_rejected",
    "raise_on_failure",
    "status_name",
    "worst",
    "worst_of",
]


@enum.global_enum
class Status(enum.IntEnum):
    """Named int32 status codes; :data:`MESSAGES` says what each one means."""

    CONVERGED = 0
    MAX_STEPS = 1
    NONFINITE = 2
    INACTIVE = 3
    BAD_OUTCOME = 4
    INEXACT = 5
    NAN_SCORES = 6
    EMPTY_MASK = 7


MESSAGES: dict[Status, str] = {
    Status.CONVERGED: "the solve converged, or the update or selection succeeded",
    Status.MAX_STEPS: "an iteration hit its step cap; its last (feasible) iterate was used",
    Status.NONFINITE: "non-finite input or result; the update was rejected and the state kept",
    Status.INACTIVE: "nothing to solve (e.g. the point already lay in the ball)",
    Status.BAD_OUTCOME: "an outcome outside 0..K or not integer-valued; the update was rejected",
    Status.INEXACT: "the result left its constraint by more than tolerance and rounding; put back",
    Status.NAN_SCORES: "some valid action scored NaN; it was not chosen",
    Status.EMPTY_MASK: "no valid action; the selected index (0) means nothing",
}

#: Every code, mildest first (what :func:`worst` keeps is the later one).
SEVERITY: tuple[Status, ...] = (
    Status.CONVERGED,
    Status.INACTIVE,
    Status.INEXACT,
    Status.MAX_STEPS,
    Status.NAN_SCORES,
    Status.NONFINITE,
    Status.BAD_OUTCOME,
    Status.EMPTY_MASK,
)
#: Codes that are not failures.
OK_CODES: frozenset[Status] = frozenset({Status.CONVERGED, Status.INACTIVE})
#: Codes of rejected updates (the state kept its last good value).
REJECTED_CODES: frozenset[Status] = frozenset({Status.NONFINITE, Status.BAD_OUTCOME})

# Lookup tables indexed by code (the codes are 0 .. len(Status) - 1).
_RANK = np.empty(len(Status), np.int32)
_RANK[[int(s) for s in SEVERITY]] = np.arange(len(SEVERITY))
_BY_RANK = np.array(SEVERITY, np.int32)
_OK = np.array(sorted(OK_CODES), np.int32)
_REJECTED = np.array(sorted(REJECTED_CODES), np.int32)


def _xp(*codes: Any):
    """``jax.numpy`` for JAX arrays (and tracers), else ``numpy``."""
    return jnp if any(isinstance(c, jax.Array) for c in codes) else np


def is_failure(code: Any) -> Any:
    """Whether each code is a failure (not in :data:`OK_CODES`); bool, same shape. Works on
    ints, numpy arrays and JAX arrays (under ``jit`` too); an unknown code is a failure."""
    xp = _xp(code)
    return ~xp.isin(xp.asarray(code), xp.asarray(_OK))


def is_rejected(code: Any) -> Any:
    """Whether each code marks a rejected update (:data:`REJECTED_CODES`); bool, same shape."""
    xp = _xp(code)
    return xp.isin(xp.asarray(code), xp.asarray(_REJECTED))


def worst(a: Any, b: Any) -> Any:
    """The more severe of two codes by :data:`SEVERITY` (elementwise, int32; ints, numpy or
    JAX arrays, under ``jit`` too). Codes must be :class:`Status` values."""
    xp = _xp(a, b)
    a, b = xp.asarray(a), xp.asarray(b)
    rank = xp.asarray(_RANK)
    return xp.where(rank[b] > rank[a], b, a).astype(xp.int32)


def worst_of(codes: Any) -> Any:
    """The most severe code of a (non-empty) array of codes: :func:`worst` over all entries."""
    xp = _xp(codes)
    return xp.asarray(_BY_RANK)[xp.max(xp.asarray(_RANK)[xp.asarray(codes)])]


def status_name(code: int) -> str:
    """The name of a code (``"UNKNOWN(c)"`` for a code this library does not define)."""
    try:
        return Status(int(code)).name
    except ValueError:
        return f"UNKNOWN({int(code)})"


def count_status(statuses: Any) -> dict[str, int]:
    """Counts of each code in an array (any shape) of codes, by lower-case name.

    Every name appears (0 if absent), in :class:`Status` order; codes outside :class:`Status`
    are counted under ``"other"`` (present only then). The table columns ``status_<name>`` of
    :func:`bandits_jax.sim.sweep.table` are these counts.
    """
    names = {int(s): s.name.lower() for s in Status}
    out = dict.fromkeys(names.values(), 0)
    codes, counts = np.unique(np.asarray(statuses).reshape(-1), return_counts=True)
    for c, n in zip(codes.tolist(), counts.tolist(), strict=True):
        key = names.get(c, "other")
        out[key] = out.get(key, 0) + int(n)
    return out


class StatusError(RuntimeError):
    """Raised by :func:`raise_on_failure`."""


def raise_on_failure(statuses: Any, *, allowed: frozenset[int] | None = None) -> None:
    """Raises :class:`StatusError` naming the failed codes if any code is a failure.

    Args:
      statuses: array of status codes (e.g. ``metrics.status`` of a whole run).
      allowed: the codes that are not failures (default :data:`OK_CODES`).
    """
    arr = np.asarray(statuses).astype(np.int64)
    bad = is_failure(arr) if allowed is None else ~np.isin(arr, [int(a) for a in allowed])
    if np.any(bad):
        codes, counts = np.unique(arr[bad], return_counts=True)
        detail = "; ".join(
            f"{status_name(c)}={n} ({MESSAGES.get(c, 'not a Status code')})"
            for c, n in zip(codes.tolist(), counts.tolist(), strict=True)
        )
        raise StatusError(f"{int(bad.sum())} of {arr.size} updates failed: {detail}")
