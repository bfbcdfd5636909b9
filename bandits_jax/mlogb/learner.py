"""What the MLogB learners share: their adapter to the one learner protocol, diagnostics, checks.

An MLogB learner is a :class:`bandits_jax.learner_base.Learner` (docs/design.md) with
``act(state, (actions, mask), key) -> Choice``, ``update(state, action, y)``, ``scores`` (the
optimistic rewards R_t(x)), ``score_parts`` (``(estimate, bonus)``) and ``select``, all built by
:func:`from_score_parts`, the family's adapter to ``learner_base.assemble`` (:func:`optimistic`:
the parts from Lemma 1's ``A(x)``). Every state has ``t``, ``hparams``, ``status`` and
``num_failures`` (``learner_base.accept``); the samplers' states carry a key (:func:`next_key`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax import checks, learner_base
from bandits_jax.checks import check_int, is_concrete
from bandits_jax.learner_base import Learner, compiled
from bandits_jax.linalg import projection
from bandits_jax.mlogb import bonus
from bandits_jax.mlogb.hparams import hyperparams as _mlogb_hyperparams
from bandits_jax.status import BAD_OUTCOME, INEXACT, is_failure, status_name, worst


class UpdateInfo(NamedTuple):
    """Diagnostics of the last update (its status is the state's ``status``).

    Attributes:
      projected: whether the Lemma 2 projection was active. nu: its dual variable (0 if not).
      newton_steps: root-finder iterations (int32).
      beta: the confidence radius of the selection before the update.
    """

    projected: jax.Array
    nu: jax.Array
    newton_steps: jax.Array
    beta: jax.Array


class Choice(NamedTuple):
    """An MLogB learner's action (``act``'s result) and the diagnostics of its selection.

    Attributes:
      index: the chosen action's index (int32); x: the chosen action ``(d,)``.
      status: the selection's status (``bonus.select_index``: ``NAN_SCORES``, ``EMPTY_MASK``).
      explored: whether the choice differs from the greedy one (argmax of the estimate alone).
      bonus_spread, estimate_spread: max - min over the valid actions of the bonus and of the
        estimate (a tiny ratio: the learner is effectively greedy).
    """

    index: jax.Array
    x: jax.Array
    status: jax.Array
    explored: jax.Array
    bonus_spread: jax.Array
    estimate_spread: jax.Array


def _spread(v: jax.Array, mask: jax.Array) -> jax.Array:
    return jnp.max(jnp.where(mask, v, -jnp.inf)) - jnp.min(jnp.where(mask, v, jnp.inf))


def _raise_if_unusable(choice: Choice, name: str) -> Choice:
    """``choice``; eagerly, a ``ValueError`` naming ``name`` when valid actions scored NaN."""
    if is_concrete(choice.status) and bool(is_failure(choice.status)):
        raise ValueError(
            f"{name}: the scores of valid actions contain NaN "
            f"({status_name(choice.status)}); the state or actions are not usable"
        )
    return choice


def empty_info(dtype) -> UpdateInfo:
    """A fresh buffer per field (a donated state must not hold one buffer twice)."""
    z = lambda dt: jnp.zeros((), dt)  # noqa: E731
    return UpdateInfo(z(bool), z(dtype), z(jnp.int32), z(dtype))


def next_key(key_data: jax.Array) -> jax.Array:
    """``k_{t+1} = split(k_t)[0]`` as raw key data: the next key of a state that carries one
    (``score_parts`` and ``select`` take no key; uniform choice, Thompson sampling)."""
    nxt, _ = jax.random.split(jax.random.wrap_key_data(key_data))
    return jax.random.key_data(nxt)


def check_static(
    num_outcomes: Any, dim: Any, sketch_size: Any = None, *, max_newton_steps: Any = None
) -> tuple[int, int]:
    """Eager validation of the factories' static arguments."""
    K, d = check_int("num_outcomes", num_outcomes, 1), check_int("dim", dim, 1)
    if sketch_size is not None:
        check_int("sketch_size", sketch_size, 1)
    if max_newton_steps is not None:
        check_int("max_newton_steps", max_newton_steps, 1)
    return K, d


def check_hparams(hp, num_outcomes: int, scalars: tuple[str, ...] = ("lam",)) -> None:
    """Shape checks of ``init``: one point (a batch is refused with a message saying how to
    initialise it), ``rewards`` of shape (K,) and each field named in ``scalars`` a scalar."""
    shapes = [jnp.shape(getattr(hp, name)) for name in scalars]
    checks.check_one_point(hp.rewards.shape[:-1] or next((s for s in shapes if s), ()))
    if hp.rewards.shape != (num_outcomes,):
        raise ValueError(
            f"init: rewards must have shape ({num_outcomes},) for num_outcomes={num_outcomes}, "
            f"got {hp.rewards.shape}"
        )


def check_actions(actions: jax.Array, dim: int) -> None:
    """Shape check, plus a NaN check when the values are concrete (outside jit)."""
    if actions.ndim != 2 or actions.shape[1] != dim:
        raise ValueError(f"actions must have shape (N, {dim}), got {actions.shape}")
    if actions.shape[0] < 1:
        raise ValueError("actions must hold at least one action, got N = 0")
    if is_concrete(actions) and not np.all(np.isfinite(np.asarray(actions))):
        raise ValueError("actions contain NaN or inf")


def check_outcome(y: Any, num_outcomes: int) -> jax.Array:
    """``y`` as an array after eager checks: a scalar, when concrete an integer in ``0..K`` (a
    ``ValueError`` naming ``y``); a boolean is a K = 1 outcome (int32), refused for K >= 2."""
    if isinstance(y, bool) or jnp.result_type(y) == jnp.bool_:
        if num_outcomes != 1:
            raise ValueError(
                f"y must be an integer outcome in 0..{num_outcomes}, got a boolean {y!r} "
                "(a boolean outcome is the K = 1 bandit's)"
            )
        y = jnp.asarray(y).astype(jnp.int32)
    if jnp.ndim(y) != 0:
        raise ValueError(
            f"y must be a scalar outcome in 0..{num_outcomes}, got shape {jnp.shape(y)}"
        )
    if is_concrete(y):
        yv = np.asarray(y)
        if not np.issubdtype(yv.dtype, np.number) or np.iscomplexobj(yv):
            raise ValueError(f"y must be an integer outcome in 0..{num_outcomes}, got {y!r}")
        if not (np.isfinite(yv) and yv == np.round(yv) and 0 <= yv <= num_outcomes):
            raise ValueError(f"y must be an integer outcome in 0..{num_outcomes}, got {y!r}")
    return jnp.asarray(y)


def outcome_valid(y: jax.Array, num_outcomes: int) -> jax.Array:
    """Traced test ``y in {0..K}`` (integer-valued, finite)."""
    in_range = (y >= 0) & (y <= num_outcomes)
    if jnp.issubdtype(y.dtype, jnp.integer):
        return in_range
    return in_range & jnp.isfinite(y) & (y == jnp.round(y))


def check_update_args(x: jax.Array, y: jax.Array, num_outcomes: int, dim: int) -> jax.Array:
    """Eager checks of an update's ``x`` (shape ``(dim,)``, finite) and ``y``
    (:func:`check_outcome`, returned): a ``ValueError`` naming the argument."""
    if x.shape != (dim,):
        raise ValueError(f"x must have shape ({dim},), got {x.shape}")
    if is_concrete(x) and not np.all(np.isfinite(np.asarray(x))):
        raise ValueError("x contains NaN or inf")
    return check_outcome(y, num_outcomes)


def into_ball(state):
    """Final safeguard of ``||W||_F <= S``: a ``W`` outside the ball by more than
    :func:`~bandits_jax.linalg.projection.ball_margin` is rescaled onto the sphere and the status
    becomes its :func:`~bandits_jax.status.worst` with ``INEXACT`` (a failure)."""
    W, S = state.W, state.hparams.S
    margin = projection.ball_margin(W.size, W.dtype)
    n = jnp.sqrt(jnp.sum(W * W))
    out = n > S * (1.0 + margin)
    W = jnp.where(out, W * (S / jnp.where(out, n, 1.0)), W)
    status = jnp.where(out, worst(state.status, INEXACT), state.status).astype(jnp.int32)
    newly = is_failure(status) & ~is_failure(state.status)
    return state._replace(W=W, status=status, num_failures=state.num_failures + newly)


def optimistic(
    num_outcomes: int,
    dim: int,
    a_matrices: Callable[[Any, jax.Array], jax.Array],
    radius: Callable[[Any], jax.Array],
) -> dict[str, Callable]:
    """The ``score_parts`` and ``scores`` of an optimistic learner, eq. (10)/(16)/(19), as keyword
    arguments of :func:`from_score_parts`: ``(estimate, bonus)`` from Lemma 1's matrices and
    ``R_t(x)`` (:func:`~bandits_jax.mlogb.bonus.optimistic_reward`).

    Args:
      a_matrices: ``(state, actions (N, d)) -> (N, K, K)`` matrices
        ``A(x) = (I_K kron x)^T Z^{-1} (I_K kron x)`` (Lemma 1).
      radius: ``state -> beta``, the radius of the selection.
    """

    def score_parts(state, actions: jax.Array) -> tuple[jax.Array, jax.Array]:
        check_actions(actions, dim)
        actions = actions.astype(state.W.dtype)
        A = a_matrices(state, actions)
        return bonus.parts(state.W, actions, A, state.hparams.rewards, radius(state))

    return {
        "score_parts": score_parts,
        "scores": functools.partial(bonus.optimistic_reward, num_outcomes),
    }


def from_score_parts(
    num_outcomes: int,
    dim: int,
    init: Callable[[Any], Any],
    score_parts: Callable[[Any, jax.Array], tuple[jax.Array, jax.Array]],
    update: Callable[[Any, jax.Array, jax.Array], Any],
    *,
    scores: Callable[[jax.Array, jax.Array], jax.Array] | None = None,
    hyperparams: Callable[..., Any] = _mlogb_hyperparams,
    in_ball: bool = False,
) -> Learner:
    """The MLogB family's adapter to :func:`~bandits_jax.learner_base.assemble`: the learner of
    ``score_parts`` (``(estimate, bonus)``; :func:`optimistic` builds them from Lemma 1's
    ``A(x)``). ``act`` and ``select`` take the tie-broken argmax of ``estimate + bonus`` over the
    valid actions, ``scores`` is ``scores(estimate, bonus)`` (default their sum); with
    ``in_ball`` each update ends with :func:`into_ball` (``hparams.S`` is the bound).

    ``update(state, x, y)`` must keep its previous state and report ``NONFINITE`` when ``x`` is
    not finite (``learner_base.accept``); so an outcome outside ``0..K`` under ``jit`` becomes a
    NaN ``x`` and the status ``BAD_OUTCOME``. Outside ``jit`` each function validates its concrete
    arguments eagerly (a ``ValueError`` naming the argument) and runs one compiled program.
    """
    K, d = num_outcomes, dim
    combine = scores if scores is not None else (lambda est, bon: est + bon)
    step = (lambda state, x, y: into_ball(update(state, x, y))) if in_ball else update
    checked_parts = compiled(score_parts, lambda state, actions: check_actions(actions, d))

    def act(state, observation, key=None) -> Choice:
        actions, mask = observation  # as check_act left them
        est, bon = score_parts(state, actions)
        idx, status = bonus.select_index(est + bon, mask)
        explored = idx != bonus.argmax_tie(est, mask)
        return Choice(idx, actions[idx], status, explored, _spread(bon, mask), _spread(est, mask))

    def check_act(state, observation, key=None):
        # (actions, mask) or the actions alone (all valid); the mask is checked before scoring.
        actions, mask = observation if isinstance(observation, tuple) else (observation, None)
        actions = jnp.asarray(actions)
        mask = bonus.check_mask((actions.shape[0],), mask)
        check_actions(actions, d)
        return state, (actions, mask), key

    def guarded_update(state, x: jax.Array, y: jax.Array):
        valid = outcome_valid(y, K)
        y_safe = jnp.where(valid, y, 0).astype(jnp.int32)
        new = step(state, jnp.where(valid, x, jnp.nan), y_safe)
        return new._replace(status=jnp.where(valid, new.status, BAD_OUTCOME).astype(jnp.int32))

    def check_update(state, action, y):
        x = jnp.asarray(action.x if isinstance(action, Choice) else action)  # a Choice or x
        return state, x, check_update_args(x, y, K, d)

    learner = learner_base.assemble(
        init=init,
        act=act,
        update=guarded_update,
        hyperparams=hyperparams,
        dim=d,
        check_act=check_act,
        check_update=check_update,
        num_outcomes=K,
        scores=lambda state, actions: combine(*checked_parts(state, actions)),
        score_parts=checked_parts,
    )

    def checked_act(state, observation, key=None) -> Choice:
        return _raise_if_unusable(learner.act(state, observation, key), "act")

    def select(state, actions: jax.Array, mask: jax.Array | None = None) -> jax.Array:
        """The index ``act`` chooses among ``actions`` (``mask``: the valid ones)."""
        return _raise_if_unusable(learner.act(state, (actions, mask)), "select").index

    return learner._replace(act=checked_act, select=select)
