"""What the MLogB learners share: their part of the one learner protocol, diagnostics, validation.

An MLogB learner is a :class:`bandits_jax.learner_base.Learner` (docs/design.md):
``act(state, (actions, mask), key) -> Choice``, ``update(state, action, y)`` (the
:class:`Choice`, or the chosen vector ``x``), and the family's own ``scores(state, actions) ->
(N,)`` optimistic rewards R_t(x), ``score_parts(state, actions) -> (estimate, bonus)`` and
``select(state, actions, mask) -> index``. :func:`from_score_parts` builds all of them from a
learner's ``score_parts`` (:func:`assemble` from Lemma 1's ``A(x)``). Every state has ``W``
(K, d), ``t`` (completed updates), ``hparams`` and ``info`` (:class:`UpdateInfo` of the last
update), and ``status`` and ``num_failures`` (``learner_base.accept``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax import checks
from bandits_jax.checks import check_int, is_concrete
from bandits_jax.learner_base import Learner, compiled
from bandits_jax.learner_base import assemble as assemble_learner
from bandits_jax.linalg import projection
from bandits_jax.mlogb import bonus, confidence
from bandits_jax.mlogb.hparams import hyperparams as _mlogb_hyperparams
from bandits_jax.status import (
    BAD_OUTCOME,
    INEXACT,
    is_failure,
    status_name,
    worst,
)


class UpdateInfo(NamedTuple):
    """Diagnostics of the last update.

    Attributes:
      projected: whether the Lemma 2 projection was active.
      nu: its dual variable (0 when inactive).
      newton_steps: root-finder iterations (int32).
      beta: the confidence radius used by the last selection-time formula (before the update).

    The update's status is the state's ``status`` field (``NONFINITE``, and ``BAD_OUTCOME`` for a
    ``y`` outside 0..K under ``jit``, mean it was rejected and the previous state kept).
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
        estimate (a tiny ratio of the two means the learner is effectively greedy).
    """

    index: jax.Array
    x: jax.Array
    status: jax.Array
    explored: jax.Array
    bonus_spread: jax.Array
    estimate_spread: jax.Array


def _spread(v: jax.Array, mask: jax.Array) -> jax.Array:
    return jnp.max(jnp.where(mask, v, -jnp.inf)) - jnp.min(jnp.where(mask, v, jnp.inf))


def _observation(observation: Any) -> tuple[jax.Array, jax.Array]:
    """``(actions, mask)`` of an MLogB observation (the pair, or the actions alone; no mask: all
    valid), the mask checked before any scoring (an all-False concrete mask is a ValueError)."""
    actions, mask = observation if isinstance(observation, tuple) else (observation, None)
    actions = jnp.asarray(actions)
    return actions, bonus.check_mask((actions.shape[0],), mask)


def _choose(est: jax.Array, bon: jax.Array, actions: jax.Array, mask: jax.Array) -> Choice:
    """The tie-broken argmax of ``estimate + bonus`` over the valid actions, with its
    diagnostics (:class:`Choice`)."""
    idx, status = bonus.select_index(est + bon, mask)
    return Choice(
        index=idx,
        x=actions[idx],
        status=status,
        explored=idx != bonus.argmax_tie(est, mask),
        bonus_spread=_spread(bon, mask),
        estimate_spread=_spread(est, mask),
    )


def _action_vector(action: Any) -> jax.Array:
    """The chosen vector ``x`` of an update's action (a :class:`Choice`, or ``x`` itself)."""
    return jnp.asarray(action.x if isinstance(action, Choice) else action)


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
    """Shape checks of ``init`` (values were validated by the hyperparameter builder): one point,
    ``rewards`` of shape (K,) and every field named in ``scalars`` a scalar. A batch of points
    (leading grid axes) is refused with a message that says how to initialise it."""
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
    """Eager checks of an outcome ``y``: a scalar, and when concrete an integer value in ``0..K``
    (a ``ValueError`` naming ``y``). Returns it as an array. A boolean (what
    ``jax.random.bernoulli`` returns) is the outcome ``1``/``0`` of a K = 1 bandit, returned as
    int32; for K >= 2 it is refused."""
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
    """Eager checks of an update's action ``x`` (shape ``(dim,)``, finite) and outcome ``y`` (an
    integer in ``0..K``, or a boolean when K = 1): ``ValueError`` naming the argument. Returns
    ``y`` as an array (:func:`check_outcome`)."""
    if x.shape != (dim,):
        raise ValueError(f"x must have shape ({dim},), got {x.shape}")
    if is_concrete(x) and not np.all(np.isfinite(np.asarray(x))):
        raise ValueError("x contains NaN or inf")
    return check_outcome(y, num_outcomes)


def into_ball(state):
    """Final safeguard of ``||W||_F <= S``: a ``W`` outside the ball by more than
    :func:`~bandits_jax.linalg.projection.ball_margin` (Lemma 2's root tolerance plus the rounding
    of its representation, ``(8 + 4 sqrt(K d)) eps`` of the dtype) is rescaled onto the sphere,
    and the status becomes its :func:`~bandits_jax.status.worst` with ``INEXACT`` (a
    ``CONVERGED``/``INACTIVE`` one becomes ``INEXACT``, counted in ``num_failures``): a violation
    that rounding does not explain (e.g. float32 at ``||x|| >> D``), a failure. Within the margin
    ``W`` is kept as is."""
    W, S = state.W, state.hparams.S
    margin = projection.ball_margin(W.size, W.dtype)
    n = jnp.sqrt(jnp.sum(W * W))
    out = n > S * (1.0 + margin)
    W = jnp.where(out, W * (S / jnp.where(out, n, 1.0)), W)
    status = jnp.where(out, worst(state.status, INEXACT), state.status).astype(jnp.int32)
    newly = is_failure(status) & ~is_failure(state.status)
    return state._replace(W=W, status=status, num_failures=state.num_failures + newly)


def radius_of(state, *, num_outcomes: int, dim: int, rank: int) -> jax.Array:
    """The confidence radius ``beta`` a state selects with (see :mod:`.confidence`)."""
    rho = getattr(state, "rho", jnp.zeros_like(state.acc))  # OFUL keeps no sketch
    return confidence.radius(
        state.hparams, state.t, rho, state.acc, num_outcomes=num_outcomes, dim=dim, rank=rank
    )


def assemble(
    *,
    num_outcomes: int,
    dim: int,
    rank: int,
    init: Callable[[Any], Any],
    a_matrices: Callable[[Any, jax.Array], jax.Array],
    update: Callable[[Any, jax.Array, jax.Array], Any],
    radius: Callable[[Any], jax.Array] | None = None,
    hyperparams: Callable[..., Any] = _mlogb_hyperparams,
) -> Learner:
    """Builds the learner's scoring functions around its ``A(x)`` matrices (eq. 10/19, Lemma 1).

    Args:
      num_outcomes, dim: K and d. rank: the sketch rank in the radius (``K d`` for OFUL).
      init, update: the learner's own functions.
      a_matrices: ``(state, actions (N, d)) -> (N, K, K)`` matrices
        ``(I_K kron x)^T Z^{-1} (I_K kron x)``.
      radius: ``state -> beta`` when not :func:`radius_of` with ``rank`` (robust/adaptive EOFD).
      hyperparams: the learner's hyperparameter builder (default ``mlogb.hyperparams``).
    """
    K, d = num_outcomes, dim

    def score_parts(state, actions: jax.Array) -> tuple[jax.Array, jax.Array]:
        check_actions(actions, d)
        actions = actions.astype(state.W.dtype)
        beta = radius(state) if radius else radius_of(state, num_outcomes=K, dim=d, rank=rank)
        A = a_matrices(state, actions)
        return bonus.parts(state.W, actions, A, state.hparams.rewards, beta)

    def update_in_ball(state, x: jax.Array, y: jax.Array):
        # ||W|| <= S whatever the learner's rounding. Bad outcomes: see from_score_parts.
        return into_ball(update(state, x, y))

    return from_score_parts(
        K,
        d,
        init,
        score_parts,
        update_in_ball,
        scores=lambda est, bon: bonus.optimistic_reward(K, est, bon),
        hyperparams=hyperparams,
    )


def from_score_parts(
    num_outcomes: int,
    dim: int,
    init: Callable[[Any], Any],
    score_parts: Callable[[Any, jax.Array], tuple[jax.Array, jax.Array]],
    update: Callable[[Any, jax.Array, jax.Array], Any],
    *,
    scores: Callable[[jax.Array, jax.Array], jax.Array] | None = None,
    hyperparams: Callable[..., Any] = _mlogb_hyperparams,
) -> Learner:
    """An MLogB :class:`~bandits_jax.learner_base.Learner` from its ``score_parts``: ``act`` and
    ``select`` take the tie-broken argmax of ``estimate + bonus`` over the valid actions,
    ``scores`` is ``scores(estimate, bonus)`` (default their sum), ``hyperparams`` the learner's
    builder (default ``mlogb.hyperparams``).

    ``update(state, x, y)`` must keep its previous state and report ``NONFINITE`` when ``x`` is
    not finite (through ``learner_base.accept``). On that contract the learner's update also
    rejects, under ``jit``, an outcome outside ``0..K`` or not integer-valued: ``update`` sees a
    NaN ``x`` (at no state-sized cost) and the status says ``BAD_OUTCOME``.

    Called outside ``jit``, each function validates its concrete arguments eagerly (a
    ``ValueError`` naming the argument: actions, mask, x, y; NaN scores of valid actions in
    ``act`` and ``select``) and then runs one compiled program; inside ``jit`` it is inlined.
    """
    K, d = num_outcomes, dim
    combine = scores if scores is not None else (lambda est, bon: est + bon)
    checked_parts = compiled(score_parts, lambda state, actions: check_actions(actions, d))

    def act(state, observation, key=None) -> Choice:
        actions, mask = observation  # as check_act left them
        return _choose(*score_parts(state, actions), actions, mask)

    def check_act(state, observation, key=None):
        actions, mask = _observation(observation)
        check_actions(actions, d)
        return state, (actions, mask), key

    def guarded_update(state, x: jax.Array, y: jax.Array):
        valid = outcome_valid(y, K)
        y_safe = jnp.where(valid, y, 0).astype(jnp.int32)
        new = update(state, jnp.where(valid, x, jnp.nan), y_safe)
        return new._replace(status=jnp.where(valid, new.status, BAD_OUTCOME).astype(jnp.int32))

    def check_update(state, action, y):
        x = _action_vector(action)
        return state, x, check_update_args(x, y, K, d)

    learner = assemble_learner(
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
