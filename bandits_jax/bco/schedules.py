"""Step-size schedules of Algorithms 1 and 3 as pure functions of a schedule state.

A schedule is a static *kind*, numeric parameters (:class:`ScheduleParams`, arrays in the
learner's hyperparameters, so a grid over them is a ``vmap``) and a state (:class:`ScheduleState`:
``t - 1`` and ``Vbar_{t-1} = sum_{s < t} ||g_s - g~_s||^2``, eq. 2.1). :func:`step_size` gives
``eta_t`` for the next round ``t``; ``scale`` multiplies every kind (1 is the theorem's setting):

* ``"convex"`` (Theorem 1): ``eta_t = scale * R / sqrt(offset + Vbar_{t-1})`` with the theorem's
  ``offset = 1152 d^3 R^2 L^2 log(dT)`` (the text prints ``R^4 L^2``; errata 11);
  ``offset="d2"`` gives the Theorem 3/4 schedule.
* ``"variance"`` (Theorems 3-4): ``eta_t = scale * R / sqrt(d^2 + Vbar_{t-1})``, any ``offset``.
* ``"strongly_convex"`` (Theorems 2, 8): ``eta_t = scale / (lambda t)``.
* ``"chiang"``: the strongly convex rate of Chiang et al. [2013], given in the paper only as
  ``eta_t ~ 1 / (lambda Vbar_{t-1})`` (errata 14); reconstructed as ``eta_t = scale / (lambda (1 +
  Vbar_{t-1} / (4 d^2 G^2)))``, ``4 d^2 G^2`` the largest per-round increment (Lemma 6 (ix)), so
  ``eta_t >= 1 / (lambda t)``.
* ``"sqrt_t"``: ``eta_t = scale * R / (G sqrt(d t))``, the anytime form of the classical convex
  two-point step ``R / (G sqrt(dT))`` [Shamir 2017] for the sphere baseline.

:data:`PRESETS` names the step-size presets. :func:`stateful` gives a schedule as an optax
``StatefulSchedule`` (optax's plain schedules cannot follow the observed ``Vbar``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from bandits_jax import checks

Array = jax.Array

CONVEX = "convex"
VARIANCE = "variance"
STRONGLY_CONVEX = "strongly_convex"
CHIANG = "chiang"
SQRT_T = "sqrt_t"
KINDS = (CONVEX, VARIANCE, STRONGLY_CONVEX, CHIANG, SQRT_T)
_NEEDS_LAMBDA = (STRONGLY_CONVEX, CHIANG)


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")


class Preset(NamedTuple):
    """A named learner of the BCO paper: the algorithm (``"alg1"``: Algorithm 1, ``"alg3"``:
    Algorithm 3) with the theorem's schedule ``kind`` (scale 1, the theorem's offset), the loss
    family it is meant for (``"convex"`` or ``"strongly_convex"``) and its colour in figures."""

    algorithm: str
    kind: str
    family: str
    color: str


# The one table of BCO learner names: ``bco.from_preset``, the command's ``bco --learners`` and
# ``sweep --learners``, the figures' colours.
PRESETS: dict[str, Preset] = {
    "alg1_thm3": Preset("alg1", VARIANCE, "convex", "#0804f9"),  # R / sqrt(d^2 + Vbar), Thm 3/4
    "alg1_thm1": Preset("alg1", CONVEX, "convex", "#9a6200"),  # Thm 1 (tiny steps for d >= 10)
    "sphere": Preset("alg3", SQRT_T, "convex", "#005249"),  # classical R / (G sqrt(d t))
    "alg1_thm2": Preset("alg1", STRONGLY_CONVEX, "strongly_convex", "#750851"),  # 1/(lambda t)
    "chiang2013": Preset("alg1", CHIANG, "strongly_convex", "#3c4d03"),  # reconstruction
    "sphere_thm8": Preset("alg3", STRONGLY_CONVEX, "strongly_convex", "#ff0789"),  # Thm 8
}


def preset(name: str) -> Preset:
    """The preset called ``name`` (:data:`PRESETS`).

    Raises:
      ValueError: naming ``name`` when it is not one.
    """
    if not isinstance(name, str) or name not in PRESETS:
        raise ValueError(f"name: expected one of {tuple(PRESETS)}, got {name!r}")
    return PRESETS[name]


class ScheduleParams(NamedTuple):
    """Numeric schedule parameters, scalar arrays of the run's float dtype: ``R`` (the domain's
    outer radius), ``lambda`` (1 where unused), ``L`` (after the ``L >= 1`` convention), ``G``,
    ``T``, the ``scale`` of every step and the ``"convex"`` kind's ``offset``."""

    radius: Array
    lam: Array
    smoothness: Array
    lipschitz: Array
    horizon: Array
    scale: Array
    offset: Array


class ScheduleState(NamedTuple):
    """Schedule state before round ``t``.

    Attributes:
      t: rounds completed, ``t - 1`` (int32).
      vbar: ``Vbar_{t-1} = sum_{s<t} ||g_s - g~_s||^2`` (eq. 2.1).
    """

    t: Array
    vbar: Array


def theorem1_offset(d: int, radius, smoothness, horizon) -> float:
    """``1152 d^3 R^2 L^2 log(dT)`` of Theorem 1 (``R^2`` for the printed ``R^4``; errata 11)."""
    L = max(float(smoothness), 1.0)
    return 1152.0 * d**3 * float(radius) ** 2 * L**2 * math.log(d * float(horizon))


def schedule_params(
    kind: str,
    d: int,
    *,
    radius,
    horizon,
    lam=None,
    smoothness=1.0,
    lipschitz=1.0,
    scale=1.0,
    offset=None,
    dtype=None,
) -> ScheduleParams:
    """Builds :class:`ScheduleParams` for ``kind`` (:data:`KINDS`) in dimension ``d``, validated
    eagerly (``ValueError`` naming the argument).

    Args:
      lam: ``lambda > 0`` (required by ``"strongly_convex"`` and ``"chiang"``).
      smoothness: ``L`` (``max(L, 1)`` is stored; the paper's ``L >= 1`` convention).
      offset: for ``"convex"``: ``None`` (Theorem 1's constant), ``"d2"`` (``d^2``) or a positive
        number.
      dtype: float dtype of the arrays (default: JAX's default float).
    """
    _check_kind(kind)
    d = checks.check_int("dim", d)
    checks.check_float("radius", radius, shape=())
    horizon = checks.check_horizon(horizon)
    if kind in _NEEDS_LAMBDA and lam is None:
        raise ValueError(f"lam: schedule {kind!r} needs lambda > 0, got None")
    lam = 1.0 if lam is None else float(checks.check_float("lam", lam, shape=()))
    smoothness = checks.check_float("smoothness", smoothness, low_open=False, shape=())
    checks.check_float("lipschitz", lipschitz, shape=())
    checks.check_float("scale", scale, shape=())
    L = max(float(smoothness), 1.0)
    if offset is None:
        off = theorem1_offset(d, radius, L, horizon) if kind == CONVEX else float(d * d)
    elif isinstance(offset, str):
        if offset != "d2":
            raise ValueError(f"offset: expected None, 'd2' or a positive number, got {offset!r}")
        off = float(d * d)
    else:
        off = float(checks.check_float("offset", offset, shape=()))
    if kind == VARIANCE:
        off = float(d * d)
    dtype = jnp.dtype(dtype) if dtype is not None else jnp.result_type(float)
    values = (radius, lam, L, lipschitz, horizon, scale, off)
    return ScheduleParams(*(jnp.asarray(x, dtype) for x in values))


def init_schedule(dtype) -> ScheduleState:
    """State before round 1: ``t - 1 = 0`` rounds completed and ``Vbar_0 = 0``."""
    return ScheduleState(jnp.zeros((), jnp.int32), jnp.zeros((), dtype))


def advance(state: ScheduleState, err_sq: Array) -> ScheduleState:
    """After round ``t``: ``t <- t + 1`` and ``Vbar_t = Vbar_{t-1} + ||g_t - g~_t||^2``."""
    return ScheduleState(state.t + 1, state.vbar + err_sq.astype(state.vbar.dtype))


def step_size(kind: str, d: int, params: ScheduleParams, state: ScheduleState) -> Array:
    """``eta_t`` for round ``t = state.t + 1`` (see the module docstring for each kind)."""
    dtype = state.vbar.dtype
    t = (state.t + 1).astype(dtype)
    p = params
    if kind in (CONVEX, VARIANCE):
        off = p.offset if kind == CONVEX else jnp.asarray(d * d, dtype)
        return p.scale * p.radius / jnp.sqrt(off + state.vbar)
    if kind == STRONGLY_CONVEX:
        return p.scale / (p.lam * t)
    if kind == CHIANG:
        norm = 4.0 * d * d * p.lipschitz**2
        return p.scale / (p.lam * (1.0 + state.vbar / norm))
    if kind == SQRT_T:
        return p.scale * p.radius / (p.lipschitz * jnp.sqrt(d * t))
    raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")


class VariationSchedule(NamedTuple):
    """A schedule as an optax stateful schedule (``optax.schedules.StatefulSchedule``).

    ``init() -> ScheduleState``; ``update(state, *, err_sq) -> state`` after a round with
    ``||g_t - g~_t||^2 = err_sq``; ``schedule(state) -> eta_t`` for the next round.
    """

    kind: str
    dim: int
    params: ScheduleParams

    def init(self) -> ScheduleState:
        return init_schedule(self.params.radius.dtype)

    def update(self, state: ScheduleState, *, err_sq: Array, **extra_args) -> ScheduleState:
        del extra_args
        return advance(state, jnp.asarray(err_sq))

    def __call__(self, state: ScheduleState, **extra_args) -> Array:
        del extra_args
        return step_size(self.kind, self.dim, self.params, state)


def stateful(kind: str, dim: int, params: ScheduleParams) -> VariationSchedule:
    """:class:`VariationSchedule` for a static ``kind`` and dimension and numeric ``params``."""
    _check_kind(kind)
    return VariationSchedule(kind, checks.check_int("dim", dim), params)
