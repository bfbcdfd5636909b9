"""The BCO family's adapter to the one learner protocol (``learner_base.assemble``).

A BCO algorithm is written as ``query(state, key) -> (points, aux)`` and ``update(state, aux,
values) -> state``; :func:`from_query` makes it a :class:`~bandits_jax.learner_base.Learner` whose
``act(state, None, key)`` returns a :class:`Query` (Algorithms 1-6: ``two_point``,
``one_point``, ``ensembles``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax

from bandits_jax.learner_base import Learner, assemble


class Query(NamedTuple):
    """A BCO learner's action (``act``'s result): the points to evaluate, ``(P, d)`` with ``P = 2``
    (two-point) or ``1`` (one-point), and what its ``update`` needs of this round (``aux``)."""

    points: jax.Array
    aux: Any


def from_query(
    init: Callable, query: Callable, update: Callable, hyperparams: Callable, dim: int
) -> Learner:
    """The :class:`~bandits_jax.learner_base.Learner` of a BCO algorithm written as ``query(state,
    key) -> (points, aux)`` and ``update(state, aux, values) -> state``: ``act(state, None, key)``
    returns a :class:`Query` and ``update(state, query, values)`` reads its ``aux``."""

    def act(state, observation, key):
        return Query(*query(state, key))

    def update_with(state, action: Query, values):
        return update(state, action.aux, values)

    return assemble(init=init, act=act, update=update_with, hyperparams=hyperparams, dim=dim)
