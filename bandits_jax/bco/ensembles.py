"""Online ensembles for two-point BCO: Algorithm 5 (dynamic regret) and Algorithm 6 (universal
regret).

Paper: BCO with gradient variation, Section 5; Appendix E.1 (eq. E.1-E.4, Lemma 15, Theorem 9)
and Appendix E.2 (eq. E.6-E.9, Table 2, Theorem 10).

Both query ``w_t +- delta e_{i_t}`` around the combined decision ``w_t = sum_i p_{t,i} w_{t,i}``,
compute the estimator of eq. (2.2) once per round at ``w_t`` and update each pool of base
learners by one ``vmap`` of :func:`bandits_jax.bco.two_point.oogd_step` (Algorithm 1's update).

* Algorithm 5: Algorithm-1 learners with the step pool (E.1) under Optimistic-Hedge
  (:mod:`bandits_jax.bco.meta`) on the surrogate losses (E.4) and their hints.
* Algorithm 6: Table 2's base learners (the strongly convex pool (E.6), a convex and a linear
  learner, equal as printed: errata 17) under Optimistic-Adapt-ML-Prod with the hints (E.8). The
  hints need ``p_{t+1}``, which needs the hints (errata 17): ``optimism="fixed_point"`` solves
  ``psi(u) = u - sum_j p_j(u) a_j = 0`` by :mod:`bandits_jax.linalg.roots`; ``"lagged"`` puts
  this round's weights on the new base iterates.
* ``preset="practical"``: pool ``1e-3 * 2^k`` (``k < 10``), ``gamma`` and ``C0`` scaled by 0.01,
  meta scale 30 (the paper's values freeze the meta-weights).

A round whose observations or new iterates are not finite keeps the state and sets ``status =
NONFINITE``; ``num_failures`` counts failed rounds (a capped fixed-point solve included).
Surrogates, hints and the fixed point's bracket: ``docs/evidence.md``, "bco.ensembles".
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax import checks
from bandits_jax.bco import domains as dom
from bandits_jax.bco import estimators as est
from bandits_jax.bco import meta
from bandits_jax.bco import schedules as sch
from bandits_jax.bco.learner import from_query
from bandits_jax.bco.two_point import (
    CoordAux,
    check_hparams,
    coordinate_feedback,
    oogd_step,
    query_coordinates,
)
from bandits_jax.learner_base import Learner, accept, all_finite, grid, start
from bandits_jax.linalg.roots import bracketed_newton
from bandits_jax.status import CONVERGED

Array = jax.Array

ENSEMBLE_PRESETS = ("theorem", "practical")  # the ``preset=`` of both ensembles
OPTIMISM_MODES = ("fixed_point", "lagged")
PRACTICAL_POOL_BASE = 1e-3
PRACTICAL_POOL_SIZE = 10
PRACTICAL_DYNAMIC_META_FACTOR = 0.01  # multiplies Theorem 9's gamma and C0
PRACTICAL_UNIVERSAL_META_SCALE = 30.0  # multiplies Algorithm 6's meta-loss normaliser


# --- shared pieces ---------------------------------------------------------------------------


def _logs(d: int, horizon: float) -> tuple[float, float]:
    """``log d`` and ``log(dT)`` floored at 1 (errata 16: ``log d = 0`` at ``d = 1``)."""
    return max(math.log(d), 1.0), max(math.log(d * horizon), 1.0)


def _check_preset(preset: str) -> None:
    if preset not in ENSEMBLE_PRESETS:
        raise ValueError(f"preset: expected one of {ENSEMBLE_PRESETS}, got {preset!r}")


def _geometry(d: int, domain, horizon, smoothness) -> tuple[int, float, float, float, Any]:
    """One grid point's validated ``(T, L, R, r, dtype)``."""
    horizon = checks.check_horizon(horizon)
    smoothness = float(checks.check_float("smoothness", smoothness, low_open=False, shape=()))
    dom.check_dim(domain, d)
    return horizon, smoothness, *dom.concrete_radii(domain), dom.dtype_of(domain)


def _positive(name: str, value) -> float:
    return float(checks.check_float(name, value, shape=()))


def _pool(name: str, values, size: str) -> np.ndarray:
    """A validated non-empty ``(size,)`` pool of positive values."""
    values = checks.check_float(name, values)
    if values.ndim != 1 or values.shape[0] < 1:
        raise ValueError(f"{name}: expected shape ({size},) with {size} >= 1, got {values.shape}")
    return values


def _scalars(dtype, *xs) -> list[Array]:
    return [jnp.asarray(x, dtype) for x in xs]


def _pool_zeros(shape: tuple[int, int], dtype, *names: str) -> dict[str, Array]:
    """A zero ``(N, d)`` stack of base iterates for each field name (the pools' start)."""
    return {name: jnp.zeros(shape, dtype) for name in names}


def _stacked_oogd(domain, xi, w_hat, g, hint, eta_t, eta_next):
    """One OOGD step for a stack of base learners: ``w_hat`` (N, d), steps (N,); ``g`` and
    ``hint`` are (d,) (shared by the stack) or (N, d)."""
    g, hint = jnp.broadcast_to(g, w_hat.shape), jnp.broadcast_to(hint, w_hat.shape)
    return jax.vmap(functools.partial(oogd_step, domain, xi))(w_hat, g, hint, eta_t, eta_next)


def _pool_steps(kind: str, d: int, pool, sched, sched_next) -> tuple[Array, Array]:
    """``(eta_t, eta_{t+1})`` of schedule ``kind`` for every base learner of ``pool`` (its
    stacked schedule parameters)."""
    step = functools.partial(sch.step_size, kind, d)
    return jax.vmap(lambda params: (step(params, sched), step(params, sched_next)))(pool)


# --- Algorithm 5: dynamic regret -------------------------------------------------------------


def theorem_step_pool(d: int, horizon, smoothness=1.0, radius=1.0) -> np.ndarray:
    """Step-size pool (E.1) without the duplicates the cap makes (errata 16).

    ``eta_i = min(1 / (20 L sqrt(d^3 log dT)), sqrt(R^2 / (d^3 T log d)) 2^{i-1})``: the pool
    keeps the entries below the cap, and the cap once if some entry reaches it. Both logs are
    floored at 1."""
    T = float(horizon)
    L = max(float(smoothness), 1.0)
    log_d, log_dT = _logs(d, T)
    cap = 1.0 / (20.0 * L * math.sqrt(d**3 * log_dT))
    base = math.sqrt(float(radius) ** 2 / (d**3 * T * log_d))
    n = math.ceil(math.log2(1.0 + math.sqrt(T * log_d) / (16.0 * L * math.sqrt(log_dT)))) + 1
    entries = [base * 2.0**i for i in range(n)]
    below = [e for e in entries if e < cap]
    return np.asarray(below + ([cap] if len(below) < len(entries) else []))


def practical_step_pool(size: int = PRACTICAL_POOL_SIZE, base: float = PRACTICAL_POOL_BASE):
    """``base * 2^k`` for ``k < size`` (the practical preset)."""
    return base * 2.0 ** np.arange(size)


def theorem9_meta_constants(d: int, horizon, num_base: int, smoothness=1.0, radius=1.0):
    """Theorem 9's ``(gamma, C0)`` (``ln N`` floored at ``ln 2``)."""
    L = max(float(smoothness), 1.0)
    _, log_dT = _logs(d, float(horizon))
    gamma = 5.0 * L * math.sqrt(d**3 * log_dT)
    c0 = 16.0 * float(radius) ** 2 * L * math.sqrt(d**3 * log_dT * math.log(max(num_base, 2)))
    return gamma, c0


class DynamicHyperparams(NamedTuple):
    """Hyperparameters of Algorithm 5 (arrays): the domain, ``delta`` and ``xi``
    (``estimators.exploration``), the (N,) fixed base step sizes ``etas``, the correction
    parameter ``gamma`` of (E.4) and Lemma 15's ``C0``."""

    domain: Any
    delta: Array
    xi: Array
    etas: Array
    gamma: Array
    c0: Array


class DynamicState(NamedTuple):
    """State of Algorithm 5 before round ``t``.

    Attributes:
      w: combined decision ``w_t = sum_i p_{t,i} w_{t,i}``.
      base_w, base_w_hat: (N, d) base decisions ``w_{t,i}`` and internal iterates ``w^_{t,i}``.
      base_w_prev: (N, d) ``w_{t-1,i}`` (``= w_{1,i}`` at ``t = 1``) for the (E.4) correction.
      g_tilde: optimism ``g~_t`` of eq. (2.2).
      meta: :class:`bandits_jax.bco.meta.OptimisticHedgeState` (``weights`` are ``p_t``).
      vbar: ``sum_{s<t} ||g_s - g~_s||^2`` (diagnostics).
      status, num_failures: last status and count of rejected rounds (int32).
      hparams: :class:`DynamicHyperparams`.
    """

    w: Array
    base_w: Array
    base_w_hat: Array
    base_w_prev: Array
    g_tilde: Array
    meta: meta.OptimisticHedgeState
    vbar: Array
    status: Array
    num_failures: Array
    hparams: DynamicHyperparams


def _dynamic_point(*, d, domain, horizon, smoothness, preset, etas, gamma, c0, delta):
    horizon, smoothness, R, r, dtype = _geometry(d, domain, horizon, smoothness)
    if etas is None and preset == "theorem":
        etas = theorem_step_pool(d, horizon, smoothness, R)
    elif etas is None:
        etas = practical_step_pool()
    etas = _pool("etas", etas, "N")
    g_th, c_th = theorem9_meta_constants(d, horizon, etas.shape[0], smoothness, R)
    factor = 1.0 if preset == "theorem" else PRACTICAL_DYNAMIC_META_FACTOR
    gamma = factor * g_th if gamma is None else gamma
    c0 = factor * c_th if c0 is None else c0
    checks.check_float("gamma", gamma, low_open=False, shape=())
    _positive("c0", c0)
    delta_v, xi_v = est.exploration(d, horizon, smoothness, R, r, dtype, delta)
    return DynamicHyperparams(domain, *_scalars(dtype, delta_v, xi_v, etas, gamma, c0))


def dynamic_ensemble(*, dim: int) -> Learner:
    """Algorithm 5: gradient-variation dynamic regret with two-point feedback, in dimension
    ``dim`` (static)."""
    d = checks.check_int("dim", dim)

    def hyperparams(
        domain,
        *,
        horizon,
        smoothness=1.0,
        preset: str = "theorem",
        etas=None,
        gamma=None,
        c0=None,
        delta=None,
    ) -> DynamicHyperparams:
        """Builds :class:`DynamicHyperparams` for this learner's ``dim``, with eager validation
        (``ValueError`` naming the argument); ``horizon``, ``smoothness``, ``gamma``, ``c0`` and
        ``delta`` may be arrays, broadcast into leading grid axes.

        Args:
          domain: ``Ball`` or ``Box`` (its dtype is the run's dtype).
          preset: ``"theorem"`` (pool E.1, Theorem 9's ``gamma, C0``) or ``"practical"`` (pool
            ``1e-3 * 2^k``, ``gamma, C0`` times 0.01).
          etas, gamma, c0: explicit values overriding the preset.
          delta: exploration radius (default: Lemma 6's, raised to the dtype floor).
        """
        _check_preset(preset)
        gridded = dict(horizon=horizon, smoothness=smoothness, gamma=gamma, c0=c0, delta=delta)
        return grid(_dynamic_point, gridded, d=d, domain=domain, preset=preset, etas=etas)

    def init(hp: DynamicHyperparams) -> DynamicState:
        check_hparams(hp, DynamicHyperparams, d)
        n = hp.etas.shape[0]
        dtype = hp.delta.dtype
        own = dict(
            **_pool_zeros((n, d), dtype, "base_w", "base_w_hat", "base_w_prev"),
            meta=meta.optimistic_hedge_init(n, hp.c0, dtype=dtype),
            vbar=jnp.zeros((), dtype),
        )
        return start(DynamicState, hp, d, "w", "g_tilde", **own)

    def update(state: DynamicState, aux: CoordAux, values: Array) -> DynamicState:
        hp = state.hparams
        g, g_tilde_next, err_sq = coordinate_feedback(state.g_tilde, aux, values)

        # Meta feedback of round t (E.4); m_t is stored in the Hedge state.
        move = jnp.sum((state.base_w - state.base_w_prev) ** 2, axis=-1)
        hedge = meta.optimistic_hedge_observe(state.meta, state.base_w @ g + hp.gamma * move)

        # Base learners: Algorithm 1 with fixed steps on the shared estimator.
        base_w_hat, base_w = _stacked_oogd(
            hp.domain, hp.xi, state.base_w_hat, g, g_tilde_next, hp.etas, hp.etas
        )
        move_next = jnp.sum((base_w - state.base_w) ** 2, axis=-1)
        hedge = meta.optimistic_hedge_predict(hedge, base_w @ g_tilde_next + hp.gamma * move_next)
        new = state._replace(
            w=hedge.weights @ base_w,
            base_w=base_w,
            base_w_hat=base_w_hat,
            base_w_prev=state.base_w,
            g_tilde=g_tilde_next,
            meta=hedge,
            vbar=state.vbar + err_sq,
        )
        return accept(state, new, all_finite(values, err_sq, base_w, hedge.weights))

    return from_query(init, query_coordinates, update, hyperparams, d)


# --- Algorithm 6: universal regret -----------------------------------------------------------


def strongly_convex_pool(horizon) -> np.ndarray:
    """(E.6): ``2^{i-1} / T`` for ``i = 1..ceil(log2 T) + 1``."""
    T = float(horizon)
    n = math.ceil(math.log2(T)) + 1 if T > 1 else 1
    return 2.0 ** np.arange(n) / T


class UniversalHyperparams(NamedTuple):
    """Hyperparameters of Algorithm 6 (arrays): the domain, ``delta``, ``xi``, the schedule
    parameters of the strongly convex pool (``sc``: axis ``N_sc``, kind ``strongly_convex``,
    scale 4, ``lam = lambda_i``) and of the convex and linear learners (``cvx``: axis 2, kind
    ``convex``, scale 2, offset ``d^2`` by default), the meta-loss scale ``s = meta_scale / (2
    sqrt(10) d G R)`` and E.9's ``lr_cap``."""

    domain: Any
    delta: Array
    xi: Array
    sc: sch.ScheduleParams
    cvx: sch.ScheduleParams
    loss_scale: Array
    lr_cap: Array


class UniversalState(NamedTuple):
    """State of Algorithm 6 before round ``t``.

    Attributes:
      w: combined decision ``w_t``.
      sc_w, sc_w_hat: (N_sc, d) strongly convex base decisions and internal iterates.
      cvx_w, cvx_w_hat: (2, d) convex and linear base decisions and internal iterates.
      g_tilde: optimism ``g~_t`` of eq. (2.2).
      sched: schedule state (``t - 1``, ``Vbar_{t-1}``) shared by all base learners.
      meta: :class:`bandits_jax.bco.meta.AdaptMLProdState` over the ``N_sc + 2`` learners (the
        strongly convex pool first, then convex, linear).
      fixed_point_steps: Newton steps of the last fixed-point solve (int32; 0 when lagged).
      status, num_failures: the fixed-point solve's status (``NONFINITE`` for a rejected round)
        and count of rounds whose status was a failure.
      hparams: :class:`UniversalHyperparams`.
    """

    w: Array
    sc_w: Array
    sc_w_hat: Array
    cvx_w: Array
    cvx_w_hat: Array
    g_tilde: Array
    sched: sch.ScheduleState
    meta: meta.AdaptMLProdState
    fixed_point_steps: Array
    status: Array
    num_failures: Array
    hparams: UniversalHyperparams


def _universal_point(
    *,
    d,
    domain,
    horizon,
    lipschitz,
    smoothness,
    preset,
    lams,
    meta_scale,
    cvx_offsets,
    lr_cap,
    delta,
):
    horizon, smoothness, R, r, dtype = _geometry(d, domain, horizon, smoothness)
    G = _positive("lipschitz", lipschitz)
    lams = _pool("lams", strongly_convex_pool(horizon) if lams is None else lams, "N_sc")
    if meta_scale is None:
        meta_scale = 1.0 if preset == "theorem" else PRACTICAL_UNIVERSAL_META_SCALE
    meta_scale = _positive("meta_scale", meta_scale)
    if cvx_offsets is None:
        cvx_offsets = (float(d * d), float(d * d))
    cvx_offsets = checks.check_float("cvx_offsets", cvx_offsets)
    if cvx_offsets.shape != (2,):
        raise ValueError(f"cvx_offsets: expected 2 values, got shape {cvx_offsets.shape}")
    _positive("lr_cap", lr_cap)
    delta_v, xi_v = est.exploration(d, horizon, smoothness, R, r, dtype, delta)
    pool = functools.partial(
        sch.schedule_params, d=d, radius=R, horizon=horizon, lipschitz=G, dtype=dtype
    )
    sc = checks.stack_trees([pool(sch.STRONGLY_CONVEX, lam=float(lam), scale=4.0) for lam in lams])
    cvx = checks.stack_trees([pool(sch.CONVEX, scale=2.0, offset=float(o)) for o in cvx_offsets])
    loss_scale = meta_scale / (2.0 * math.sqrt(10.0) * d * G * R)
    return UniversalHyperparams(
        domain, *_scalars(dtype, delta_v, xi_v), sc, cvx, *_scalars(dtype, loss_scale, lr_cap)
    )


def _universal_hints(weights, prod, a, n_sc: int, optimism: str, max_steps: int):
    """The meta-hints of round ``t+1`` (E.8): ``u - a_i`` for the convex and linear learners and
    0 for the strongly convex pool, with ``u = <p_t, a>`` (``"lagged"``, ``weights = p_t``) or
    the root of ``psi(u) = u - sum_j p_j(u) a_j`` (``"fixed_point"``, ``prod`` giving
    ``p_{t+1}(u)``). Returns ``(hints, status, newton_steps)``."""
    is_cvx = jnp.arange(a.shape[0]) >= n_sc

    def hints(u):
        return jnp.where(is_cvx, u - a, 0.0)

    if optimism == "lagged":
        return hints(weights @ a), jnp.asarray(CONVERGED, jnp.int32), jnp.zeros((), jnp.int32)

    def psi(u):
        return u - meta.adapt_ml_prod_weights(prod, hints(u)) @ a

    def fn(u):
        return jax.jvp(psi, (u,), (jnp.ones_like(u),))

    lo, hi = jnp.min(a), jnp.max(a)
    eps = jnp.finfo(a.dtype).eps
    ftol = 4 * eps * (1.0 + jnp.max(jnp.abs(a)))
    res = bracketed_newton(
        fn, lo, hi, 0.5 * (lo + hi), max_steps=max_steps, ftol=ftol, xtol=4 * eps
    )
    return hints(res.x), res.status, res.steps


def universal_ensemble(
    *, dim: int, optimism: str = "fixed_point", fixed_point_steps: int = 32
) -> Learner:
    """Algorithm 6: gradient-variation universal regret with two-point feedback.

    Args:
      dim: dimension (static).
      optimism: ``"fixed_point"`` (solve E.8's hint consistently with ``p_{t+1}``) or
        ``"lagged"`` (module docstring).
      fixed_point_steps: iteration cap of the fixed-point solve (static).
    """
    d = checks.check_int("dim", dim)
    if optimism not in OPTIMISM_MODES:
        raise ValueError(f"optimism: expected one of {OPTIMISM_MODES}, got {optimism!r}")
    fixed_point_steps = checks.check_int("fixed_point_steps", fixed_point_steps)

    def hyperparams(
        domain,
        *,
        horizon,
        lipschitz,
        smoothness=1.0,
        preset: str = "theorem",
        lams=None,
        meta_scale=None,
        cvx_offsets=None,
        lr_cap=0.125,
        delta=None,
    ) -> UniversalHyperparams:
        """Builds :class:`UniversalHyperparams` for this learner's ``dim``, with eager validation
        (``ValueError`` naming the argument); ``horizon``, ``lipschitz``, ``smoothness``,
        ``meta_scale``, ``lr_cap`` and ``delta`` may be arrays, broadcast into leading grid axes.

        Args:
          lipschitz: ``G`` (enters the meta-loss normaliser).
          preset: ``"theorem"`` (``meta_scale = 1``) or ``"practical"`` (``meta_scale = 30``).
          lams: the strongly convex pool (default E.6).
          meta_scale: explicit meta-loss multiplier overriding the preset.
          cvx_offsets: the two offsets under the convex/linear learners' square roots (default
            ``(d^2, d^2)``, Table 2).
          lr_cap: E.9's cap.
          delta: exploration radius (default: Lemma 6's, raised to the dtype floor).
        """
        _check_preset(preset)
        gridded = dict(
            horizon=horizon,
            lipschitz=lipschitz,
            smoothness=smoothness,
            meta_scale=meta_scale,
            lr_cap=lr_cap,
            delta=delta,
        )
        fixed = dict(d=d, domain=domain, preset=preset, lams=lams, cvx_offsets=cvx_offsets)
        return grid(_universal_point, gridded, **fixed)

    def init(hp: UniversalHyperparams) -> UniversalState:
        check_hparams(hp, UniversalHyperparams, d)
        dtype = hp.delta.dtype
        n_sc, n_cvx = hp.sc.lam.shape[0], hp.cvx.lam.shape[0]
        own = dict(
            **_pool_zeros((n_sc, d), dtype, "sc_w", "sc_w_hat"),
            **_pool_zeros((n_cvx, d), dtype, "cvx_w", "cvx_w_hat"),
            sched=sch.init_schedule(dtype),
            meta=meta.adapt_ml_prod_init(n_sc + n_cvx, lr_cap=hp.lr_cap, dtype=dtype),
            fixed_point_steps=jnp.zeros((), jnp.int32),
        )
        return start(UniversalState, hp, d, "w", "g_tilde", **own)

    def update(state: UniversalState, aux: CoordAux, values: Array) -> UniversalState:
        hp = state.hparams
        g, g_tilde_next, err_sq = coordinate_feedback(state.g_tilde, aux, values)
        sched_next = sch.advance(state.sched, err_sq)

        # Meta feedback of round t: r_{t,i} = s <g_t, w_t - w_{t,i}> (m_t is in the state).
        base_w = jnp.concatenate([state.sc_w, state.cvx_w])
        prod = meta.adapt_ml_prod_observe(state.meta, hp.loss_scale * ((state.w - base_w) @ g))

        # Base learners (Table 2): the strongly convex pool on h^sc (gradient and hint at the
        # base decision), the convex and linear learners on <g_t, x>.
        eta_sc = _pool_steps(sch.STRONGLY_CONVEX, d, hp.sc, state.sched, sched_next)
        pull = 0.5 * hp.sc.lam[:, None] * (state.sc_w - state.w)
        sc_w_hat, sc_w = _stacked_oogd(
            hp.domain, hp.xi, state.sc_w_hat, g + pull, g_tilde_next + pull, *eta_sc
        )
        eta_cvx = _pool_steps(sch.CONVEX, d, hp.cvx, state.sched, sched_next)
        cvx_w_hat, cvx_w = _stacked_oogd(
            hp.domain, hp.xi, state.cvx_w_hat, g, g_tilde_next, *eta_cvx
        )

        # Hints for round t+1 (E.8) and p_{t+1}.
        base_w_next = jnp.concatenate([sc_w, cvx_w])
        a = hp.loss_scale * (base_w_next @ g_tilde_next)
        hints, fp_status, fp_steps = _universal_hints(
            state.meta.weights, prod, a, state.sc_w.shape[0], optimism, fixed_point_steps
        )
        prod = meta.adapt_ml_prod_predict(prod, hints)
        new = state._replace(
            w=prod.weights @ base_w_next,
            sc_w=sc_w,
            sc_w_hat=sc_w_hat,
            cvx_w=cvx_w,
            cvx_w_hat=cvx_w_hat,
            g_tilde=g_tilde_next,
            sched=sched_next,
            meta=prod,
            fixed_point_steps=fp_steps,
        )
        ok = all_finite(values, err_sq, base_w_next, prod.weights, prod.log_potential)
        return accept(state, new, ok, fp_status)

    return from_query(init, query_coordinates, update, hyperparams, d)
