"""The one learner protocol of both papers and what every learner shares, below both families
(:mod:`bandits_jax.mlogb`, :mod:`bandits_jax.bco`).

* :class:`Learner`: the one learner type, ``init(hparams)``, ``act(state, observation, key)``,
  ``update(state, action, feedback)``, ``hyperparams(...)``, ``dim``; MLogB learners also fill
  their family's ``num_outcomes``, ``scores``, ``score_parts`` and ``select``. :func:`assemble`
  is its one assembler, which each family's adapter calls (``mlogb.learner.from_score_parts``,
  ``bco.learner.from_query``).

* :func:`compiled`: the compile-and-validate wrapper (eager checks of concrete arguments, then
  one compiled program per call; inlined under ``jit``).
* :func:`fresh_state`: one buffer per leaf, so a state can be donated.
* The rejected-step guard: :func:`all_finite` / :func:`finite_floats` decide, :func:`accept`
  keeps the previous state and records ``status`` (``NONFINITE``) and ``num_failures``.
* :func:`grid`: the one grid builder: array hyperparameters broadcast into leading grid axes,
  one eagerly validated point at a time.
* :func:`start`: the deterministic start of the two-point learners.

The state and environment protocols are in :mod:`bandits_jax.protocols`.
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
    caller's arguments (eager validation raising a ``ValueError`` that names the argument); when
    it returns a tuple, that tuple is what ``fn`` receives (the arguments as arrays).

    Called outside ``jit``, a call is one dispatch of one program (compiled on first use)
    instead of one per operation; inside ``jit`` it is inlined. Shape checks inside ``fn`` still
    raise at trace time.
    """
    jitted = jax.jit(fn)
    if check is None:
        return jitted

    def checked(*args):
        checked_args = check(*args)
        return jitted(*(args if checked_args is None else checked_args))

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
    """Whether every floating-point leaf of ``tree`` is finite (integer leaves are skipped): one
    scalar from a sum of ``0 * leaf`` per leaf (NaN exactly when an entry is NaN or infinite; no
    overflow, no copy). Pass the few numbers a step is built from, never a large state."""
    sums = [
        jnp.sum(leaf * 0).astype(jnp.float32)
        for leaf in jax.tree_util.tree_leaves(tree)
        if jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.floating)
    ]
    return jnp.isfinite(sum(sums)) if sums else jnp.asarray(True)


def no_failures() -> dict[str, Array]:
    """The ``status`` (``CONVERGED``) and ``num_failures`` (0) fields of a fresh state."""
    return {
        "status": jnp.asarray(CONVERGED, jnp.int32),
        "num_failures": jnp.zeros((), jnp.int32),
    }


def accept(state, new, ok: Array, code: Array | int = CONVERGED, *, written: tuple[str, ...] = ()):
    """The one rejected-step guard of every learner: ``new`` if ``ok`` else ``state``, with
    ``status`` set to ``code`` (or ``NONFINITE``) and ``num_failures`` counted.

    ``written``: fields taken from ``new`` as they are, because the update already wrote them
    only where ``ok`` (a buffer's one row, a sketch it kept), so the guard does not re-read them.
    """
    written = (*written, "status", "num_failures")  # set below
    guarded = [f for f in new._fields if f not in written]
    old = [getattr(state, f) for f in guarded]
    kept = checks.guard(ok, [getattr(new, f) for f in guarded], old)
    status = jnp.where(ok, code, NONFINITE).astype(jnp.int32)
    return new._replace(
        **dict(zip(guarded, kept, strict=True)),
        status=status,
        num_failures=state.num_failures + is_failure(status).astype(jnp.int32),
    )


# ---------------------------------------------------------------------------------------------
# Hyperparameter grids
# ---------------------------------------------------------------------------------------------


def grid(build: Callable[..., Any], gridded: dict[str, Any], *, rows=(), **fixed) -> Any:
    """The one hyperparameter grid builder of both families: calls ``build(**fixed, **point)`` for
    every point of the broadcast ``gridded`` arrays and stacks the results with leading grid axes
    (``build`` validates each point eagerly). A name in ``rows`` keeps its last axis in every
    point (MLogB's ``(..., K)`` rewards); ``None`` and strings pass through as they are.

    Scalars everywhere give ``build``'s result unchanged (no grid axis), as ``mlogb.hyperparams``.
    """
    arrays = {
        k: np.asarray(v) for k, v in gridded.items() if v is not None and not isinstance(v, str)
    }
    lead = {k: a.shape[: a.ndim - (k in rows)] for k, a in arrays.items()}
    try:
        shape = np.broadcast_shapes(*lead.values())
    except ValueError as exc:
        raise ValueError(f"{', '.join(arrays)}: shapes must broadcast, got {lead}") from exc
    if shape == ():
        return build(**fixed, **gridded)
    core = {k: a.shape[len(lead[k]) :] for k, a in arrays.items()}
    flat = {k: np.broadcast_to(a, shape + core[k]).reshape(-1, *core[k]) for k, a in arrays.items()}
    points = [
        build(
            **fixed,
            **{**gridded, **{k: v[i] if k in rows else v[i].item() for k, v in flat.items()}},
        )
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
# The learner
# ---------------------------------------------------------------------------------------------


class Learner(NamedTuple):
    """A learner of either paper: pure functions closed over its static choices.

    * ``init(hparams) -> state``: no key (a BCO learner's randomness enters through ``act``'s
      key; the MLogB samplers draw from a key in their state, seeded by ``hparams.seed``).
    * ``act(state, observation, key) -> action``: an MLogB learner observes ``(actions (N, d),
      mask (N,))`` and returns a :class:`bandits_jax.mlogb.learner.Choice`; a BCO learner observes
      ``None`` and returns a :class:`bandits_jax.bco.learner.Query` (the points to evaluate).
    * ``update(state, action, feedback) -> state``: the action ``act`` returned and what the
      environment answered (an MLogB outcome ``y``; a BCO learner's losses at the points). An
      MLogB learner's update also takes the chosen vector ``x`` as its action.
    * ``hyperparams(...)``: the learner's validated hyperparameter builder (array arguments
      broadcast into leading grid axes); ``dim``: ``d``.

    An MLogB learner also fills ``num_outcomes`` (``K``), ``scores(state, actions)``,
    ``score_parts(state, actions)`` and ``select(state, actions, mask)``; a BCO learner leaves
    them ``None``.
    """

    init: Callable[[Any], Any]
    act: Callable[[Any, Any, Array], Any]
    update: Callable[[Any, Any, Any], Any]
    hyperparams: Callable[..., Any]
    dim: int
    num_outcomes: int | None = None
    scores: Callable[[Any, Array], Array] | None = None
    score_parts: Callable[[Any, Array], tuple[Array, Array]] | None = None
    select: Callable[..., Array] | None = None


def assemble(
    *,
    init: Callable,
    act: Callable,
    update: Callable,
    hyperparams: Callable,
    dim: int,
    check_act: Callable[..., Any] | None = None,
    check_update: Callable[..., Any] | None = None,
    **family: Any,
) -> Learner:
    """The :class:`Learner` whose ``act`` and ``update`` are :func:`compiled` (after the eager
    ``check_act``/``check_update`` of concrete arguments): called outside ``jit`` a round is two
    dispatches instead of one per operation; inside ``jit`` they are inlined. ``family``: the
    family's own fields (MLogB's ``num_outcomes``, ``scores``, ``score_parts``, ``select``)."""
    return Learner(
        init=init,
        act=compiled(act, check_act),
        update=compiled(update, check_update),
        hyperparams=hyperparams,
        dim=dim,
        **family,
    )


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
            **no_failures(),
            hparams=hp,
        )
    )


__all__ = [
    "Learner",
    "accept",
    "all_finite",
    "assemble",
    "compiled",
    "finite_floats",
    "fresh_state",
    "grid",
    "no_failures",
    "start",
]
