"""Two-point BCO learners: optimistic OGD with the coordinate estimator (Algorithm 1, Section 3)
and projected GD with the sphere estimator (Algorithm 3, Appendix C.5).

Algorithm 1 (Chiang et al. 2013 as restated by the paper), ``w_1 = w^_1 = 0``, ``g~_1 = 0``:

    i_t ~ U[d];  query x_t = w_t + delta e_{i_t},  x'_t = w_t - delta e_{i_t}
    (g_t, g~_{t+1}) from eq. (2.2)
    w^_{t+1} = Pi_{(1-xi)X}[w^_t - eta_t g_t]
    w_{t+1}  = Pi_{(1-xi)X}[w^_{t+1} - eta_{t+1} g~_{t+1}]

with ``delta = 1/(2 d^2 L T R)`` (raised to a dtype-aware floor, see ``estimators``), ``xi =
delta / r`` and ``eta_t`` from ``schedules`` (``eta_{t+1}`` only needs ``Vbar_t``, known after
round ``t``). Algorithm 3: ``u_t`` uniform on the sphere, ``g_t = d/(2 delta)(f(w+delta u) -
f(w-delta u)) u``, ``w_{t+1} = Pi_{(1-xi)X}[w_t - eta_t g_t]``.

Protocol: a learner is a NamedTuple of pure functions ``init(hparams, key) -> state``,
``query(state, key) -> (points (2, d), aux)``, ``update(state, aux, values (2,)) -> state`` and
``hyperparams(domain, ...) -> hparams`` (eager validation). Non-finite observations (or a
non-finite update) leave the whole learner state unchanged and set ``status = NONFINITE``
(``bandits_jax.linalg.roots``); ``num_bad`` counts such rounds. ``status`` is ``CONVERGED`` after a
good update.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.bco import domains as dom
from bandits_jax.bco import estimators as est
from bandits_jax.bco import schedules as sch
from bandits_jax.linalg.roots import CONVERGED, NONFINITE

Array = jax.Array


class TwoPointHParams(NamedTuple):
    """Hyperparameters shared by Algorithms 1 and 3 (all arrays; a grid is a vmap over them).

    Attributes:
      domain: :class:`~bandits_jax.bco.domains.Ball` or ``Box``.
      delta: exploration radius (after the dtype floor).
      xi: shrinkage ``delta / r``.
      schedule: :class:`~bandits_jax.bco.schedules.ScheduleParams`.
    """

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
      status: int32 status of the last update (``CONVERGED`` or ``NONFINITE``).
      num_bad: int32 count of rounds whose update was rejected.
      hp: the hyperparameters.
    """

    w: Array
    w_hat: Array
    g_tilde: Array
    sched: sch.ScheduleState
    status: Array
    num_bad: Array
    hp: TwoPointHParams


class SphereState(NamedTuple):
    """Algorithm 3 state before round ``t`` (fields as in :class:`TwoPointState`)."""

    w: Array
    sched: sch.ScheduleState
    status: Array
    num_bad: Array
    hp: TwoPointHParams


class CoordAux(NamedTuple):
    """What Algorithm 1's ``query`` hands to ``update``: ``i_t`` and the realised spacing."""

    i: Array
    spacing: Array


class SphereAux(NamedTuple):
    """What Algorithm 3's ``query`` hands to ``update``: ``u_t`` and the realised spacing."""

    u: Array
    spacing: Array


class Learner(NamedTuple):
    """A learner: pure functions (see module docstring)."""

    init: Callable
    query: Callable
    update: Callable
    hyperparams: Callable


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


def hyperparams(
    d: int,
    kind: str,
    domain: dom.Domain,
    *,
    horizon,
    lam=None,
    smoothness=1.0,
    lipschitz=1.0,
    scale=1.0,
    offset=None,
    delta=None,
) -> TwoPointHParams:
    """Builds :class:`TwoPointHParams` for a schedule ``kind`` with eager validation.

    Args:
      d: dimension.
      kind: schedule kind (``schedules.KINDS``).
      domain: a ``Ball`` or ``Box`` (its dtype is the run's dtype).
      horizon: ``T`` (enters ``delta`` and Theorem 1's constant).
      lam, smoothness, lipschitz, scale, offset: see ``schedules.schedule_params``.
      delta: explicit exploration radius (default: the theorem's ``1/(2 d^2 L T R)``); always
        raised to ``estimators.delta_floor(dtype, R)``.

    Raises:
      ValueError: naming the argument (dimension mismatch, ``R <= 0``, ``lambda <= 0``, ...).
    """
    dom.check_dim(domain, d)
    dtype = dom.dtype_of(domain)
    R = dom.outer_radius(domain)
    r = dom.inner_radius(domain)
    if isinstance(R, jax.core.Tracer):
        raise ValueError("domain: hyperparams needs a concrete domain (build it outside jit)")
    if not float(R) > 0:
        raise ValueError(f"domain: expected R > 0, got {float(R)}")
    sp = sch.schedule_params(
        kind,
        d,
        radius=float(R),
        horizon=horizon,
        lam=lam,
        smoothness=smoothness,
        lipschitz=lipschitz,
        scale=scale,
        offset=offset,
        dtype=dtype,
    )
    delta_v, xi_v = est.exploration(d, horizon, smoothness, float(R), float(r), dtype, delta)
    return TwoPointHParams(domain, jnp.asarray(delta_v, dtype), jnp.asarray(xi_v, dtype), sp)


def _check_hp(hp: TwoPointHParams, d: int) -> None:
    if not isinstance(hp, TwoPointHParams):
        raise ValueError(f"hparams: expected TwoPointHParams, got {type(hp).__name__}")
    dom.check_dim(hp.domain, d)


def _guard(ok: Array, new, old):
    """Keeps ``old`` where ``ok`` is False (no silent NaN iterate)."""
    return jax.tree_util.tree_map(lambda a, b: jnp.where(ok, a, b), new, old)


def _check_values(values: Array) -> None:
    if jnp.shape(values) != (2,):
        raise ValueError(
            f"values: expected shape (2,) (two-point feedback), got {jnp.shape(values)}"
        )


def _check_factory(d, schedule: str) -> int:
    """Eager checks of a learner factory's static arguments."""
    if not isinstance(d, int | np.integer) or d < 1:
        raise ValueError(f"d: expected a positive int, got {d!r}")
    if schedule not in sch.KINDS:
        raise ValueError(f"schedule: expected one of {sch.KINDS}, got {schedule!r}")
    return int(d)


def coordinate_query(w: Array, delta: Array, key: Array) -> tuple[Array, CoordAux]:
    """Algorithm 1's query around ``w``: a uniform coordinate ``i_t`` and the points
    ``w +- delta e_{i_t}``; shared by Algorithm 1 and the ensembles built on its estimator."""
    i = est.sample_coordinate(key, w.shape[-1])
    points, spacing = est.coordinate_queries(w, i, delta)
    return points, CoordAux(i, spacing)


def coordinate_feedback(g_tilde: Array, aux: CoordAux, values: Array) -> tuple[Array, Array, Array]:
    """From the two observed values: ``(g_t, g~_{t+1}, ||g_t - g~_t||^2)`` (eq. 2.2)."""
    _check_values(values)
    values = jnp.asarray(values, g_tilde.dtype)
    v = est.directional_derivative(values, aux.spacing)
    g, g_tilde_next = est.coordinate_estimate(g_tilde, aux.i, v)
    return g, g_tilde_next, est.coordinate_error_sq(g_tilde, aux.i, v)


def two_point_learner(d: int, *, schedule: str = sch.VARIANCE) -> Learner:
    """Algorithm 1: coordinate two-point estimator (eq. 2.2) + optimistic OGD.

    Args:
      d: dimension (static).
      schedule: step-size kind (``schedules.KINDS``); ``"convex"`` with default constants is
        Theorem 1, ``"strongly_convex"`` Theorem 2, ``"variance"`` Theorems 3-4, ``"chiang"`` the
        Chiang et al. 2013 baseline (a reconstruction; see ``schedules``).

    Returns:
      A :class:`Learner`; ``hyperparams(domain, *, horizon, ...)`` as in :func:`hyperparams`.
    """
    d = _check_factory(d, schedule)

    def make_hparams(domain, **kw) -> TwoPointHParams:
        return hyperparams(d, schedule, domain, **kw)

    def init(hp: TwoPointHParams, key: Array | None = None) -> TwoPointState:
        del key
        _check_hp(hp, d)
        dtype = hp.delta.dtype
        z = jnp.zeros((d,), dtype)
        return TwoPointState(
            w=z,
            w_hat=z,
            g_tilde=z,
            sched=sch.init_schedule(dtype),
            status=jnp.asarray(CONVERGED, jnp.int32),
            num_bad=jnp.zeros((), jnp.int32),
            hp=hp,
        )

    def query(state: TwoPointState, key: Array) -> tuple[Array, CoordAux]:
        return coordinate_query(state.w, state.hp.delta, key)

    def update(state: TwoPointState, aux: CoordAux, values: Array) -> TwoPointState:
        hp = state.hp
        g, g_tilde_next, err_sq = coordinate_feedback(state.g_tilde, aux, values)
        eta_t = sch.step_size(schedule, d, hp.schedule, state.sched)
        sched_next = sch.advance(state.sched, err_sq)
        eta_next = sch.step_size(schedule, d, hp.schedule, sched_next)
        w_hat_next, w_next = oogd_step(
            hp.domain, hp.xi, state.w_hat, g, g_tilde_next, eta_t, eta_next
        )
        ok = (
            jnp.all(jnp.isfinite(values))
            & jnp.isfinite(err_sq)
            & jnp.all(jnp.isfinite(w_next))
            & jnp.all(jnp.isfinite(w_hat_next))
        )
        new = (w_next, w_hat_next, g_tilde_next, sched_next)
        old = (state.w, state.w_hat, state.g_tilde, state.sched)
        w, w_hat, g_tilde, sched = _guard(ok, new, old)
        return TwoPointState(
            w=w,
            w_hat=w_hat,
            g_tilde=g_tilde,
            sched=sched,
            status=jnp.where(ok, CONVERGED, NONFINITE).astype(jnp.int32),
            num_bad=state.num_bad + (~ok).astype(jnp.int32),
            hp=hp,
        )

    return Learner(init=init, query=query, update=update, hyperparams=make_hparams)


def sphere_learner(d: int, *, schedule: str = sch.STRONGLY_CONVEX) -> Learner:
    """Algorithm 3: sphere two-point estimator + projected gradient descent (no optimism).

    With ``schedule="strongly_convex"`` (``eta_t = 1/(lambda t)``) and ``smoothness=1`` this is
    Theorem 8's setting. For convex losses use ``"sqrt_t"`` (``R/(G sqrt(d t))``) or
    ``"variance"``, which here is ``R / sqrt(d^2 + sum_{s<t} ||g_s||^2)`` (AdaGrad-norm: the
    optimism is ``0``, so ``Vbar`` accumulates ``||g_s||^2``).
    """
    d = _check_factory(d, schedule)

    def make_hparams(domain, **kw) -> TwoPointHParams:
        return hyperparams(d, schedule, domain, **kw)

    def init(hp: TwoPointHParams, key: Array | None = None) -> SphereState:
        del key
        _check_hp(hp, d)
        dtype = hp.delta.dtype
        return SphereState(
            w=jnp.zeros((d,), dtype),
            sched=sch.init_schedule(dtype),
            status=jnp.asarray(CONVERGED, jnp.int32),
            num_bad=jnp.zeros((), jnp.int32),
            hp=hp,
        )

    def query(state: SphereState, key: Array) -> tuple[Array, SphereAux]:
        u = est.sample_sphere(key, d, state.w.dtype)
        points, spacing = est.sphere_queries(state.w, u, state.hp.delta)
        return points, SphereAux(u, spacing)

    def update(state: SphereState, aux: SphereAux, values: Array) -> SphereState:
        _check_values(values)
        hp = state.hp
        values = jnp.asarray(values, state.w.dtype)
        g = est.sphere_estimate(values, aux.u, aux.spacing)
        err_sq = jnp.sum(g * g)
        eta_t = sch.step_size(schedule, d, hp.schedule, state.sched)
        w_next = dom.project(hp.domain, state.w - eta_t * g, hp.xi)
        sched_next = sch.advance(state.sched, err_sq)
        ok = jnp.all(jnp.isfinite(values)) & jnp.isfinite(err_sq) & jnp.all(jnp.isfinite(w_next))
        w, sched = _guard(ok, (w_next, sched_next), (state.w, state.sched))
        return SphereState(
            w=w,
            sched=sched,
            status=jnp.where(ok, CONVERGED, NONFINITE).astype(jnp.int32),
            num_bad=state.num_bad + (~ok).astype(jnp.int32),
            hp=hp,
        )

    return Learner(init=init, query=query, update=update, hyperparams=make_hparams)


def from_preset(d: int, name: str, domain: dom.Domain, **kw) -> tuple[Learner, TwoPointHParams]:
    """Algorithm 1 with a named schedule preset (``schedules.PRESETS``) and its hyperparameters.

    ``"theorem1"``/``"theorem2"``/``"theorem3"``/``"chiang2013"`` are the theorems' settings
    (``scale = 1``); ``"practical_convex"`` is Theorem 1's form with offset ``d^2`` (the
    Theorem 3/4 step, the one that shows gradient-variation behaviour for realistic ``T``);
    ``"sphere_convex"`` gives Algorithm 3 with ``R / (G sqrt(d t))``. ``kw`` goes to
    :func:`hyperparams` (``horizon`` is required; ``scale``/``offset`` override the preset).
    """
    if name not in sch.PRESETS:
        raise ValueError(f"name: expected one of {tuple(sch.PRESETS)}, got {name!r}")
    kind, scale, offset = sch.PRESETS[name]
    kw.setdefault("scale", scale)
    kw.setdefault("offset", offset)
    factory = sphere_learner if name.startswith("sphere") else two_point_learner
    learner = factory(d, schedule=kind)
    return learner, learner.hyperparams(domain, **kw)
