"""What the learners of both papers share, below both families (:mod:`bandits_jax.mlogb`,
:mod:`bandits_jax.bco`).

* :func:`compiled`: the compile-and-validate wrapper (eager checks of concrete arguments, then
  one compiled program per call; inlined under ``jit``).
* :func:`fresh_state`: one buffer per leaf, so a state can be donated.
* The rejected-step guard: :func:`all_finite` / :func:`finite_floats` decide, :func:`accept`
  keeps the previous state and records ``status`` (``NONFINITE``) and ``num_failures``
  (:func:`status_of`, :func:`count_failure`).
* :func:`grid`: broadcast array hyperparameters into leading grid axes, one eagerly validated
  point at a time.
* The BCO learner tuple :class:`Learner`, its assembler :func:`assemble` and the deterministic
  start :func:`start` (the two-point, one-point and ensemble learners all use them; MLogB
  learners are assembled by :func:`bandits_jax.mlogb.learner.assemble`).

The protocols both families satisfy are in :mod:`bandits_jax.protocols`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax import checks
from bandits_jax.status import CONVERGED, NONFINITE, is_failure

Array = jax.Array


# ---------------------------------------------------------------------------------------------
# Compiling, buffers
# ---------------------------------------------------------------------------------------------


def compiled(fn: Callable, check: Callable[..., Any] | None = None) -> Callable:
    """``fn`` compiled with ``jax.jit``; with ``check``, ``check(*args)`` runs first on the
    caller's arguments (eager validation raising a ``ValueError`` that names the argument).

    Called outside ``jit``, a call is one dispatch of one program (compiled on first use)
    instead of one per operation; inside ``jit`` it is inlined. Shape checks inside ``fn`` still
    raise at trace time.
    """
    jitted = jax.jit(fn)
    if check is None:
        return jitted

    def checked(*args):
        check(*args)
        return jitted(*args)

    checked.__doc__ = fn.__doc__
    return checked


def fresh_state(state):
    """``state`` with every leaf copied into its own buffer, none shared with the caller's
    hyperparameters (so the state can be donated; see ``checks.fresh``)."""
    return jax.tree_util.tree_map(checks.fresh, state)


# ---------------------------------------------------------------------------------------------
# The rejected-step guard
# ---------------------------------------------------------------------------------------------


def all_finite(*xs) -> Array:
    """Whether every entry of every argument (pytrees allowed) is finite: :func:`finite_floats`
    over the arguments (integer entries are always finite)."""
    return finite_floats(xs)


def finite_floats(tree) -> Array:
    """Whether every floating-point leaf of ``tree`` is finite (integer leaves are skipped)."""
    leaves = [
        jnp.all(jnp.isfinite(leaf))
        for leaf in jax.tree_util.tree_leaves(tree)
        if jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.floating)
    ]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


def status_of(ok: Array, code: Array | int = CONVERGED) -> Array:
    """``code`` where the update was accepted, else ``NONFINITE`` (int32)."""
    return jnp.where(ok, code, NONFINITE).astype(jnp.int32)


def count_failure(num_failures: Array, status: Array) -> Array:
    """``num_failures`` plus one if ``status`` is a failure (``status.is_failure``)."""
    return num_failures + is_failure(status).astype(jnp.int32)


def accept(state, new, ok: Array, code: Array | int = CONVERGED):
    """``new`` if ``ok`` else ``state`` (the rejected-step guard), with ``status`` set to ``code``
    or ``NONFINITE`` and ``num_failures`` counted (states with those two fields)."""
    kept = checks.guard(ok, new, state)
    status = status_of(ok, code)
    return kept._replace(status=status, num_failures=count_failure(state.num_failures, status))


# ---------------------------------------------------------------------------------------------
# Hyperparameter grids
# ---------------------------------------------------------------------------------------------


def grid(build: Callable[..., Any], gridded: dict[str, Any], **fixed) -> Any:
    """Calls ``build(**fixed, **point)`` for every point of the broadcast ``gridded`` arrays and
    stacks the results with leading grid axes (``build`` validates each point eagerly).

    Scalars everywhere give ``build``'s result unchanged (no grid axis), as ``mlogb.hyperparams``.
    """
    arrays = {
        k: np.asarray(v) for k, v in gridded.items() if v is not None and not isinstance(v, str)
    }
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays.values()))
    except ValueError as exc:
        shapes = {k: a.shape for k, a in arrays.items()}
        raise ValueError(f"{', '.join(arrays)}: shapes do not broadcast: {shapes}") from exc
    if shape == ():
        return build(**fixed, **gridded)
    flat = {k: np.broadcast_to(a, shape).ravel() for k, a in arrays.items()}
    points = [
        build(**fixed, **{**gridded, **{k: v[i].item() for k, v in flat.items()}})
        for i in range(int(np.prod(shape)))
    ]
    try:
        stacked = checks.stack_trees(points)
    except ValueError as exc:
        raise ValueError(
            f"{', '.join(arrays)}: the grid points have differently shaped hyperparameters (e.g. "
            "pools of different sizes); build them separately"
        ) from exc
    return jax.tree_util.tree_map(lambda x: x.reshape(shape + x.shape[1:]), stacked)


# ---------------------------------------------------------------------------------------------
# BCO learners
# ---------------------------------------------------------------------------------------------


class Learner(NamedTuple):
    """A BCO learner: pure functions (``bandits_jax.protocols.BCOLearner``) and its ``dim``."""

    init: Callable
    query: Callable
    update: Callable
    hyperparams: Callable
    dim: int


def assemble(
    init: Callable, query: Callable, update: Callable, hyperparams: Callable, dim: int
) -> Learner:
    """A BCO :class:`Learner` whose ``query`` and ``update`` are :func:`compiled`: called outside
    ``jit`` a round is two dispatches instead of one per operation (each compiled on first use);
    inside ``jit`` they are inlined. Shape checks still raise at trace time, and a non-finite value
    is a rejected update either way (``status``)."""
    return Learner(init, compiled(query), compiled(update), hyperparams, dim)


def start(state_cls: type, hp: Any, dim: int, *vectors: str, **fields: Any) -> Any:
    """The deterministic start shared by the two-point learners (Algorithms 1, 3, 5, 6).

    ``state_cls`` with a zero ``(dim,)`` vector for each name in ``vectors`` (``w_1 = 0``, ...),
    ``status = CONVERGED``, no failures, ``hparams = hp`` and the learner's own ``fields``; every
    buffer distinct (so the state can be donated).
    """
    dtype = hp.delta.dtype
    return fresh_state(
        state_cls(
            **{name: jnp.zeros((dim,), dtype) for name in vectors},
            **fields,
            status=jnp.asarray(CONVERGED, jnp.int32),
            num_failures=jnp.zeros((), jnp.int32),
            hparams=hp,
        )
    )


__all__ = [
    "Learner",
    "accept",
    "all_finite",
    "assemble",
    "compiled",
    "count_failure",
    "finite_floats",
    "fresh_state",
    "grid",
    "start",
    "status_of",
]
