"""Two-point BCO learners: optimistic OGD with the coordinate estimator (Algorithm 1, Section 3)
and projected GD with the sphere estimator (Algorithm 3, Appendix C.5).

Algorithm 1 (Chiang et al. 2013 as restated by the paper), ``w_1 = w^_1 = 0``, ``g~_1 = 0``:

    i_t ~ U[d];  query x_t = w_t + delta e_{i_t},  x'_t = w_t - delta e_{i_t}
    (g_t, g~_{t+1}) from eq. (2.2)
    w^_{t+1} = Pi_{(1-xi)X}[w^_t - eta_t g_t]
    w_{t+1}  = Pi_{(1-xi)X}[w^_{t+1} - eta_{t+1} g~_{t+1}]

with ``delta`` from ``estimators``, ``xi = delta / r`` and ``eta_t`` from ``schedules``.
Algorithm 3: ``u_t`` uniform on the sphere, ``g_t = d/(2 delta)(f(w+delta u) - f(w-delta u)) u``,
``w_{t+1} = Pi_{(1-xi)X}[w_t - eta_t g_t]``.

Both are built by :func:`~bandits_jax.bco.learner.from_query`; a non-finite observation or
update keeps the state and sets ``status = NONFINITE`` (``num_failures`` counts such rounds).
:func:`optimistic_ogd` and :func:`projected_gd` are their steps as optax transformations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from bandits_jax import checks
from bandits_jax.bco import domains as dom
from bandits_jax.bco import estimators as est
from bandits_jax.bco import schedules as sch
from bandits_jax.bco.learner import Query as Query  # here too until 0.3.0
from bandits_jax.bco.learner import from_query
from bandits_jax.learner_base import Learner, accept, all_finite, grid, start

Array = jax.Array


class TwoPointHyperparams(NamedTuple):
    """Hyperparameters shared by Algorithms 1 and 3 (all arrays; a grid is a vmap over them):
    the domain (``Ball`` or ``Box``), ``delta`` (after the dtype floor), ``xi = delta / r`` and
    the :class:`~bandits_jax.bco.schedules.ScheduleParams`."""

    domain: Any
    delta: Array
    xi: Array
    schedule: sch.ScheduleParams


class TwoPointState(NamedTuple):
    """Algorithm 1 state before round ``t``.

    Attributes:
      w: centre ``w_t`` of the two queries.
      w_hat: internal iterate ``w^_t``.
      g_tilde: optimism buffer ``g~_t`` (latest directional derivative per coordinate).
      sched: schedule state (``t - 1``, ``Vbar_{t-1}``).
      status, num_failures: last status (``CONVERGED`` or ``NONFINITE``) and count of rejected
        rounds (int32).
      hparams: the hyperparameters.
    """

    w: Array
    w_hat: Array
    g_tilde: Array
    sched: sch.ScheduleState
    status: Array
    num_failures: Array
    hparams: TwoPointHyperparams


class SphereState(NamedTuple):
    """Algorithm 3 state before round ``t`` (fields as in :class:`TwoPointState`)."""

    w: Array
    sched: sch.ScheduleState
    status: Array
    num_failures: Array
    hparams: TwoPointHyperparams


class CoordAux(NamedTuple):
    """What Algorithm 1's ``query`` hands to ``update``: ``i_t`` and the realised spacing."""

    i: Array
    spacing: Array


class SphereAux(NamedTuple):
    """What Algorithm 3's ``query`` hands to ``update``: ``u_t`` and the realised spacing."""

    u: Array
    spacing: Array


def oogd_step(
    domain: dom.Domain,
    xi: Array,
    w_hat: Array,
    g: Array,
    hint_next: Array,
    eta_t: Array,
    eta_next: Array,
) -> tuple[Array, Array]:
    """Optimistic OGD step (Algorithm 1's update; eq. E.2 with ``M_{t+1} = hint_next``).

    Returns:
      ``(w^_{t+1}, w_{t+1})`` with ``w^_{t+1} = Pi[w^_t - eta_t g_t]`` and
      ``w_{t+1} = Pi[w^_{t+1} - eta_{t+1} hint_next]``, ``Pi`` onto ``(1 - xi) X``.
    """
    w_hat_next = dom.project(domain, w_hat - eta_t * g, xi)
    w_next = dom.project(domain, w_hat_next - eta_next * hint_next, xi)
    return w_hat_next, w_next


def _scalar_hyperparams(
    *, dim, schedule, domain, horizon, smoothness, delta, **schedule_kw
) -> TwoPointHyperparams:
    """One validated grid point; ``schedule_kw`` (``lam``, ``lipschitz``, ``scale``, ``offset``)
    goes to ``schedules.schedule_params``."""
    dom.check_dim(domain, dim)
    R, r = dom.concrete_radii(domain)
    dtype = dom.dtype_of(domain)
    sp = sch.schedule_params(
        schedule, dim, radius=R, horizon=horizon, smoothness=smoothness, dtype=dtype, **schedule_kw
    )
    delta_v, xi_v = est.exploration(dim, horizon, smoothness, R, r, dtype, delta)
    return TwoPointHyperparams(domain, jnp.asarray(delta_v, dtype), jnp.asarray(xi_v, dtype), sp)


def check_hparams(hp: Any, cls: type, dim: int) -> None:
    """``hparams`` is a ``cls`` whose domain has dimension ``dim`` (eager, at ``init``)."""
    if not isinstance(hp, cls):
        raise ValueError(f"hparams: expected {cls.__name__}, got {type(hp).__name__}")
    checks.check_one_point(jnp.shape(hp.delta))  # a scalar per point in every such class
    dom.check_dim(hp.domain, dim)


def _check_values(values: Array) -> Array:
    values = jnp.asarray(values)
    if values.shape != (2,):
        raise ValueError(f"values: expected shape (2,) (2-point feedback), got {values.shape}")
    if not any(jnp.issubdtype(values.dtype, kind) for kind in (jnp.floating, jnp.integer)):
        raise ValueError(f"values: expected real loss values, got dtype {values.dtype}")
    return values


def coordinate_query(w: Array, delta: Array, key: Array) -> tuple[Array, CoordAux]:
    """Algorithm 1's query around ``w``: a uniform coordinate ``i_t`` and ``w +- delta e_{i_t}``."""
    i = est.sample_coordinate(key, w.shape[-1])
    points, spacing = est.coordinate_queries(w, i, delta)
    return points, CoordAux(i, spacing)


def query_coordinates(state: Any, key: Array) -> tuple[Array, CoordAux]:
    """The ``query`` of Algorithms 1, 5 and 6: :func:`coordinate_query` around ``state.w``."""
    return coordinate_query(state.w, state.hparams.delta, key)


def coordinate_feedback(g_tilde: Array, aux: CoordAux, values: Array) -> tuple[Array, Array, Array]:
    """From the two observed values: ``(g_t, g~_{t+1}, ||g_t - g~_t||^2)`` (eq. 2.2)."""
    values = _check_values(values).astype(g_tilde.dtype)
    v = est.directional_derivative(values, aux.spacing)
    g, g_tilde_next = est.coordinate_estimate(g_tilde, aux.i, v)
    return g, g_tilde_next, est.coordinate_error_sq(g_tilde, aux.i, v)


def _factory(dim, schedule: str) -> tuple[int, Callable[..., TwoPointHyperparams]]:
    """A two-point learner factory's checked ``dim`` and its ``hyperparams`` method."""
    dim = checks.check_int("dim", dim)
    if schedule not in sch.KINDS:
        raise ValueError(f"schedule: expected one of {sch.KINDS}, got {schedule!r}")

    def hyperparams(
        domain: dom.Domain,
        *,
        horizon,
        lam=None,
        smoothness=1.0,
        lipschitz=1.0,
        scale=1.0,
        offset=None,
        delta=None,
    ) -> TwoPointHyperparams:
        """Builds :class:`TwoPointHyperparams` for this learner's ``dim`` and schedule kind, with
        eager validation (``ValueError`` naming the argument). Numeric arguments may be arrays,
        broadcast into leading grid axes.

        Args:
          domain: a ``Ball`` or ``Box`` (its dtype is the run's dtype).
          horizon: ``T`` (an int; enters ``delta`` and Theorem 1's constant).
          lam, smoothness, lipschitz, scale, offset: see ``schedules.schedule_params``.
          delta: exploration radius (default: the theorem's ``1/(2 d^2 L T R)``), always raised
            to ``estimators.delta_floor(dtype, R)``.
        """
        gridded = dict(
            horizon=horizon,
            lam=lam,
            smoothness=smoothness,
            lipschitz=lipschitz,
            scale=scale,
            offset=offset,
            delta=delta,
        )
        return grid(_scalar_hyperparams, gridded, dim=dim, schedule=schedule, domain=domain)

    return dim, hyperparams


def two_point_learner(*, dim: int, schedule: str = sch.VARIANCE) -> Learner:
    """Algorithm 1: coordinate two-point estimator (eq. 2.2) + optimistic OGD.

    Args:
      dim: dimension (static).
      schedule: step-size kind (``schedules.KINDS``); ``"convex"`` with default constants is
        Theorem 1, ``"strongly_convex"`` Theorem 2, ``"variance"`` Theorems 3-4, ``"chiang"`` the
        Chiang et al. 2013 baseline (a reconstruction; see ``schedules``).
    """
    d, hyperparams = _factory(dim, schedule)

    def init(hp: TwoPointHyperparams) -> TwoPointState:
        check_hparams(hp, TwoPointHyperparams, d)
        sched = sch.init_schedule(hp.delta.dtype)
        return start(TwoPointState, hp, d, "w", "w_hat", "g_tilde", sched=sched)

    def update(state: TwoPointState, aux: CoordAux, values: Array) -> TwoPointState:
        hp = state.hparams
        sched = sch.stateful(schedule, d, hp.schedule)
        g, g_tilde_next, err_sq = coordinate_feedback(state.g_tilde, aux, values)
        sched_next = sched.update(state.sched, err_sq=err_sq)
        w_hat_next, w_next = oogd_step(
            hp.domain, hp.xi, state.w_hat, g, g_tilde_next, sched(state.sched), sched(sched_next)
        )
        ok = all_finite(values, err_sq, w_next, w_hat_next)
        new = state._replace(w=w_next, w_hat=w_hat_next, g_tilde=g_tilde_next, sched=sched_next)
        return accept(state, new, ok)

    return from_query(init, query_coordinates, update, hyperparams, d)


def sphere_learner(*, dim: int, schedule: str = sch.STRONGLY_CONVEX) -> Learner:
    """Algorithm 3: sphere two-point estimator + projected gradient descent (no optimism).

    With ``schedule="strongly_convex"`` (``eta_t = 1/(lambda t)``) and ``smoothness=1`` this is
    Theorem 8's setting. For convex losses use ``"sqrt_t"`` (``R/(G sqrt(d t))``) or
    ``"variance"``, which here is ``R / sqrt(d^2 + sum_{s<t} ||g_s||^2)`` (AdaGrad-norm: the
    optimism is ``0``, so ``Vbar`` accumulates ``||g_s||^2``).
    """
    d, hyperparams = _factory(dim, schedule)

    def init(hp: TwoPointHyperparams) -> SphereState:
        check_hparams(hp, TwoPointHyperparams, d)
        return start(SphereState, hp, d, "w", sched=sch.init_schedule(hp.delta.dtype))

    def query(state: SphereState, key: Array) -> tuple[Array, SphereAux]:
        u = est.sample_sphere(key, d, state.w.dtype)
        points, spacing = est.sphere_queries(state.w, u, state.hparams.delta)
        return points, SphereAux(u, spacing)

    def update(state: SphereState, aux: SphereAux, values: Array) -> SphereState:
        hp = state.hparams
        sched = sch.stateful(schedule, d, hp.schedule)
        values = _check_values(values).astype(state.w.dtype)
        g = est.sphere_estimate(values, aux.u, aux.spacing)
        err_sq = jnp.sum(g * g)
        w_next = dom.project(hp.domain, state.w - sched(state.sched) * g, hp.xi)
        sched_next = sched.update(state.sched, err_sq=err_sq)
        ok = all_finite(values, err_sq, w_next)
        return accept(state, state._replace(w=w_next, sched=sched_next), ok)

    return from_query(init, query, update, hyperparams, d)


def from_preset(
    name: str, *, dim: int, domain: dom.Domain, **kw
) -> tuple[Learner, TwoPointHyperparams]:
    """The learner of a named preset (``schedules.PRESETS``, the command's ``--learners``) and
    its hyperparameters.

    ``"alg1_*"`` and ``"chiang2013"`` are Algorithm 1 with the theorems' settings, ``"sphere"``
    and ``"sphere_thm8"`` Algorithm 3 with ``R / (G sqrt(d t))`` and ``1 / (lambda t)``. ``kw``
    goes to the learner's ``hyperparams`` (``horizon`` is required; ``scale`` and ``offset``
    default to the theorem's).
    """
    p = sch.preset(name)
    factory = sphere_learner if p.algorithm == "alg3" else two_point_learner
    learner = factory(dim=dim, schedule=p.kind)
    return learner, learner.hyperparams(domain, **kw)


# --- the same steps as optax gradient transformations ----------------------------------------


class OptimisticOGDState(NamedTuple):
    """State of :func:`optimistic_ogd`: ``w^_t``, the last hint ``g~_t`` and the schedule."""

    w_hat: Array
    hint: Array
    sched: sch.ScheduleState


class ProjectedGDState(NamedTuple):
    """State of :func:`projected_gd`: the schedule state."""

    sched: sch.ScheduleState


def optimistic_ogd(
    *, domain: dom.Domain, xi, schedule: sch.VariationSchedule
) -> optax.GradientTransformationExtraArgs:
    """Algorithm 1's optimistic OGD step as an optax transformation (params: one ``(d,)`` array).

    ``update(g_t, state, params=w_t, *, hint=g~_{t+1})`` returns ``w_{t+1} - w_t`` by
    :func:`oogd_step`, with ``eta_t`` and ``eta_{t+1}`` from ``schedule`` (``err_sq = ||g_t -
    g~_t||^2``, ``g~_t`` the previous hint).
    """

    def init(params: Array) -> OptimisticOGDState:
        return OptimisticOGDState(checks.fresh(params), jnp.zeros_like(params), schedule.init())

    def update(updates, state: OptimisticOGDState, params=None, *, hint, **extra_args):
        del extra_args
        if params is None:
            raise ValueError("params: optimistic_ogd needs the current iterate (params=w_t)")
        g = updates
        err_sq = jnp.sum((g - state.hint) ** 2)
        sched_next = schedule.update(state.sched, err_sq=err_sq)
        w_hat, w = oogd_step(
            domain, xi, state.w_hat, g, hint, schedule(state.sched), schedule(sched_next)
        )
        return w - params, OptimisticOGDState(w_hat, jnp.asarray(hint, g.dtype), sched_next)

    return optax.GradientTransformationExtraArgs(init, update)


def projected_gd(
    *, domain: dom.Domain, xi, schedule: sch.VariationSchedule
) -> optax.GradientTransformationExtraArgs:
    """Algorithm 3's projected step ``w_{t+1} = Pi[w_t - eta_t g_t]`` as an optax transformation
    (``err_sq = ||g_t||^2``: no optimism)."""

    def init(params: Array) -> ProjectedGDState:
        del params
        return ProjectedGDState(schedule.init())

    def update(updates, state: ProjectedGDState, params=None, **extra_args):
        del extra_args
        if params is None:
            raise ValueError("params: projected_gd needs the current iterate (params=w_t)")
        w = dom.project(domain, params - schedule(state.sched) * updates, xi)
        sched_next = schedule.update(state.sched, err_sq=jnp.sum(updates * updates))
        return w - params, ProjectedGDState(sched_next)

    return optax.GradientTransformationExtraArgs(init, update)
