"""Loss sequences for two-point BCO with knobs for the gradient variation (BCO paper, eq. 1.1).

Every family is an oblivious sequence ``f_t``, a pure function of ``(t, x, env state)`` (the
round's data come from ``fold_in(key, t)``), so it can be re-evaluated offline. The drift
(``t`` 0-based) is ``b + amplitude p_t + noise z_t`` with ``||b|| = base_norm``, ``z_t ~ N(0, I)``
and ``p_t = cos(omega t) u + sin(omega t) v`` (``V_T ~ T (amplitude omega)^2``) or, with
``switch_every = S > 0``, a random unit direction redrawn every S rounds
(``V_T ~ 2 (T / S) amplitude^2``); noise gives ``V_T ~ 2 d noise^2 T``.

Families on a ball of radius ``R`` (or a box): :func:`quadratic`, :func:`linear` and
:func:`regression` (ball only). Each reports ``V_T`` (eq. 1.1; an upper bound for regression),
``W_T`` (eq. 3.4; linear losses only, else NaN), ``F_T`` (eq. 3.5, ``X+ = X + (G/L) B``,
``L >= 1``) and ``P_T`` of the per-round minimiser over ``X`` (``Pi_X(theta_t)`` for regression).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from bandits_jax import checks
from bandits_jax.bco import domains as dom
from bandits_jax.linalg import lapack
from bandits_jax.status import CONVERGED, MAX_STEPS, NONFINITE

Array = jax.Array


class BCOEnvState(NamedTuple):
    """Environment state: the next round ``t`` (int32), the PRNG ``key`` of the round data, the
    drift's ``base`` and rotation plane ``u, v`` and its knobs ``amplitude, omega, noise``
    (scalars; a batch of them is a grid; ``noise`` acts only if the family has noise)."""

    t: Array
    key: Array
    base: Array
    u: Array
    v: Array
    amplitude: Array
    omega: Array
    noise: Array


class BCOEnvFunctions(NamedTuple):
    """A loss family (:class:`~bandits_jax.protocols.BCOEnv` and
    :class:`~bandits_jax.protocols.BCOAnalysis`): pure functions plus static constants.

    Attributes:
      grad: ``(state, t, x) -> grad f_t(x)`` for ``x`` of shape (..., d).
      grad_variance: NaN where not available.
      d, lam, smoothness, lipschitz: constants (``lam = 0`` if not strongly convex;
        ``lipschitz`` is a high-probability bound when ``noise > 0``).
      variation_exact: whether ``grad_variation`` is exact (else an upper bound).
    """

    init: Callable
    loss: Callable
    grad: Callable
    step: Callable
    comparator: Callable
    grad_variation: Callable
    min_loss_plus: Callable
    best_fixed_point: Callable
    grad_variance: Callable
    domain: Any
    d: int
    lam: float
    smoothness: float
    lipschitz: float
    variation_exact: bool
    name: str

    @property
    def dim(self) -> int:
        """The dimension ``d`` (the name every factory uses, as in the MLogB environments)."""
        return self.d


_K_SWITCH, _K_NOISE, _K_DATA, _K_LABEL = 1, 2, 3, 4


def _unit(z):
    return z / jnp.linalg.norm(z)


def _normal(key, shape, dtype):
    """Standard normal draws made in float32 and cast, so that float32 and float64 runs of the
    same family and key see the same sequence (up to rounding)."""
    return jax.random.normal(key, shape, jnp.float32).astype(dtype)


def _make_init(d, base_norm, amplitude, omega, noise, dtype):
    def init(key: Array) -> BCOEnvState:
        kb, ku, kv, kk = jax.random.split(key, 4)
        base = base_norm * _unit(_normal(kb, (d,), dtype))
        if d >= 2:
            u = _unit(_normal(ku, (d,), dtype))
            v = _normal(kv, (d,), dtype)
            v = _unit(v - jnp.dot(v, u) * u)
        else:
            u = jnp.ones((1,), dtype)
            v = jnp.zeros((1,), dtype)
        return BCOEnvState(
            t=jnp.zeros((), jnp.int32),
            key=kk,
            base=base,
            u=u,
            v=v,
            amplitude=jnp.asarray(amplitude, dtype),
            omega=jnp.asarray(omega, dtype),
            noise=jnp.asarray(noise, dtype),
        )

    return init


def _drift(es: BCOEnvState, t, switch_every: int, with_noise: bool = True) -> Array:
    """``b + amplitude p_t (+ noise z_t)`` for round ``t``; ``with_noise`` is static."""
    dtype = es.base.dtype
    d = es.base.shape[-1]
    if switch_every > 0:
        k = t // switch_every
        ks = jax.random.fold_in(jax.random.fold_in(es.key, _K_SWITCH), k)
        p = _unit(_normal(ks, (d,), dtype))
    else:
        ang = es.omega * jnp.asarray(t, dtype)
        p = jnp.cos(ang) * es.u + jnp.sin(ang) * es.v
    out = es.base + es.amplitude * p
    if with_noise:
        kn = jax.random.fold_in(jax.random.fold_in(es.key, _K_NOISE), t)
        out = out + es.noise * _normal(kn, (d,), dtype)
    return out


def _step(es: BCOEnvState) -> BCOEnvState:
    return es._replace(t=es.t + 1)


def _over_rounds(fn, es, T):
    """``vmap`` of ``fn(es, t)`` over ``t = 0..T-1``."""
    return jax.vmap(lambda t: fn(es, t))(jnp.arange(T, dtype=jnp.int32))


def _high_prob_norm(base_norm, amplitude, noise, d):
    return float(base_norm) + float(amplitude) + 3.0 * float(noise) * math.sqrt(d)


def _no_grad_variance(es, T: int):
    """W_T (eq. 3.4) is exact only for linear losses; other families report NaN."""
    return jnp.asarray(jnp.nan, es.base.dtype)


def _family(
    name: str,
    init: Callable,
    per_round: tuple[Callable, ...],
    domain: dom.Domain,
    d: int,
    *,
    lipschitz: float,
    lam: float = 0.0,
    smoothness: float = 0.0,
    variation_exact: bool = True,
    grad_variance: Callable = _no_grad_variance,
) -> BCOEnvFunctions:
    """A :class:`BCOEnvFunctions` from ``init`` and ``per_round = (loss, grad, comparator,
    grad_variation, min_loss_plus, best_fixed_point)``."""
    loss, grad, comparator, grad_variation, min_loss_plus, best_fixed_point = per_round
    return BCOEnvFunctions(
        init=init,
        loss=loss,
        grad=grad,
        step=_step,
        comparator=comparator,
        grad_variation=grad_variation,
        min_loss_plus=min_loss_plus,
        best_fixed_point=best_fixed_point,
        grad_variance=grad_variance,
        domain=domain,
        d=d,
        lam=lam,
        smoothness=smoothness,
        lipschitz=lipschitz,
        variation_exact=variation_exact,
        name=name,
    )


def _drifting(dim, radius, base_norm, amplitude, omega, switch_every, noise, domain, dtype):
    """The validated set-up of every family: ``(d, domain, signal, init, dtype)`` with the
    per-round drift ``signal(es, t)`` (centre or loss vector)."""
    d = checks.check_int("dim", dim)
    checks.check_int("switch_every", switch_every, 0)
    knobs = (("amplitude", amplitude), ("omega", omega), ("noise", noise), ("base_norm", base_norm))
    for name, val in knobs:
        if not (math.isfinite(float(val)) and float(val) >= 0):
            raise ValueError(f"{name}: expected a finite value >= 0, got {val}")
    dtype = jnp.dtype(dtype) if dtype is not None else jnp.result_type(float)
    if domain is None:
        domain = dom.ball(radius, dtype=dtype)
    dom.check_dim(domain, d)
    has_noise = float(noise) > 0

    def signal(es, t):
        return _drift(es, t, switch_every, has_noise)

    return d, domain, signal, _make_init(d, base_norm, amplitude, omega, noise, dtype), dtype


def quadratic(
    dim: int,
    *,
    lam: float = 1.0,
    radius: float = 1.0,
    base_norm: float = 2.0,
    amplitude: float = 0.5,
    omega: float = 0.0,
    switch_every: int = 0,
    noise: float = 0.0,
    domain: dom.Domain | None = None,
    dtype=None,
) -> BCOEnvFunctions:
    """``f_t(x) = lam/2 ||x - c_t||^2`` with drifting centres (module docstring): ``lam``-strongly
    convex and smooth, ``V_T = lam^2 sum_t ||c_t - c_{t-1}||^2`` exactly. With
    ``base_norm > R`` the constrained optimum has a non-zero gradient."""
    if not (math.isfinite(float(lam)) and float(lam) > 0):
        raise ValueError(f"lam: expected lambda > 0, got {lam}")
    d, domain, centre, init, _ = _drifting(
        dim, radius, base_norm, amplitude, omega, switch_every, noise, domain, dtype
    )
    R = float(dom.outer_radius(domain))
    lam = float(lam)
    G = lam * (R + _high_prob_norm(base_norm, amplitude, noise, d))
    L_conv = max(lam, 1.0)

    def loss(es, t, x):
        c = centre(es, t)
        return 0.5 * lam * jnp.sum((x - c) ** 2, axis=-1)

    def grad(es, t, x):
        return lam * (x - centre(es, t))

    def comparator(es, t):
        return dom.project(domain, centre(es, t))

    def grad_variation(es, t):
        dc = centre(es, t) - centre(es, jnp.maximum(t - 1, 0))
        return jnp.where(t > 0, lam**2 * jnp.sum(dc * dc), 0.0)

    def min_loss_plus(es, t):
        c = centre(es, t)
        gap = jnp.maximum(jnp.linalg.norm(c - dom.project(domain, c), axis=-1) - G / L_conv, 0.0)
        return 0.5 * lam * gap**2

    def best_fixed_point(es, T: int):
        cbar = jnp.mean(_over_rounds(centre, es, T), axis=0)
        return dom.project(domain, cbar), jnp.asarray(CONVERGED, jnp.int32)

    per_round = (loss, grad, comparator, grad_variation, min_loss_plus, best_fixed_point)
    return _family("quadratic", init, per_round, domain, d, lipschitz=G, lam=lam, smoothness=lam)


def linear(
    dim: int,
    *,
    radius: float = 1.0,
    base_norm: float = 1.0,
    amplitude: float = 0.5,
    omega: float = 0.0,
    switch_every: int = 0,
    noise: float = 0.0,
    domain: dom.Domain | None = None,
    dtype=None,
) -> BCOEnvFunctions:
    """``f_t(x) = <l_t, x>`` with drifting ``l_t`` (module docstring); ``V_T`` and
    ``W_T = sum_t ||l_t - mean(l)||^2`` are exact."""
    d, domain, vec, init, _ = _drifting(
        dim, radius, base_norm, amplitude, omega, switch_every, noise, domain, dtype
    )
    G = _high_prob_norm(base_norm, amplitude, noise, d)
    L_conv = 1.0  # L = 0 for linear losses; the paper's L >= 1 convention

    def loss(es, t, x):
        return jnp.sum(x * vec(es, t), axis=-1)

    def grad(es, t, x):
        return jnp.broadcast_to(vec(es, t), x.shape)

    def comparator(es, t):
        return dom.linear_minimiser(domain, vec(es, t))

    def grad_variation(es, t):
        dl = vec(es, t) - vec(es, jnp.maximum(t - 1, 0))
        return jnp.where(t > 0, jnp.sum(dl * dl), 0.0)

    def min_loss_plus(es, t):
        l = vec(es, t)
        return -dom.max_abs_value_on(domain, l) - (G / L_conv) * jnp.linalg.norm(l)

    def best_fixed_point(es, T: int):
        total = jnp.sum(_over_rounds(vec, es, T), axis=0)
        return dom.linear_minimiser(domain, total), jnp.asarray(CONVERGED, jnp.int32)

    def grad_variance(es, T: int):
        ls = _over_rounds(vec, es, T)
        return jnp.sum((ls - ls.mean(axis=0)) ** 2)

    per_round = (loss, grad, comparator, grad_variation, min_loss_plus, best_fixed_point)
    return _family("linear", init, per_round, domain, d, lipschitz=G, grad_variance=grad_variance)


def projected_gradient_solve(
    value_and_grad: Callable[[Array], tuple[Array, Array]],
    domain: dom.Domain,
    x0: Array,
    lipschitz_grad: Array,
    *,
    max_steps: int = 5000,
    tol: float | None = None,
) -> tuple[Array, Array]:
    """Accelerated projected gradient (FISTA) on a smooth convex objective over ``X``.

    Bounded ``lax.while_loop``; stops when the gradient-mapping step ``||x_{k+1} - y_k||`` is
    below ``tol * (1 + ||x||)`` (default ``tol = 100 eps``). Returns ``(x, status)`` with
    ``CONVERGED``/``MAX_STEPS``/``NONFINITE`` (falls back to the last finite iterate).
    """
    dtype = x0.dtype
    tol = 100 * float(jnp.finfo(dtype).eps) if tol is None else tol
    step = 1.0 / lipschitz_grad

    def cond(c):
        x, y, tk, k, gap, bad = c
        return (k < max_steps) & (gap > tol * (1.0 + jnp.linalg.norm(x))) & ~bad

    def body(c):
        x, y, tk, k, _, _ = c
        _, g = value_and_grad(y)
        x_new = dom.project(domain, y - step * g)
        t_new = 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * tk * tk))
        y_new = x_new + ((tk - 1.0) / t_new) * (x_new - x)
        gap = jnp.linalg.norm(x_new - y)
        bad = ~(jnp.all(jnp.isfinite(x_new)) & jnp.isfinite(gap))
        x_new = jnp.where(bad, x, x_new)
        y_new = jnp.where(bad, x, y_new)
        return x_new, y_new, t_new, k + 1, gap, bad

    x0 = dom.project(domain, x0)
    big = jnp.asarray(jnp.finfo(dtype).max, dtype)
    init = (x0, x0, jnp.asarray(1.0, dtype), jnp.asarray(0, jnp.int32), big, jnp.asarray(False))
    x, _, _, k, gap, bad = lax.while_loop(cond, body, init)
    status = jnp.where(
        bad, NONFINITE, jnp.where(gap > tol * (1.0 + jnp.linalg.norm(x)), MAX_STEPS, CONVERGED)
    ).astype(jnp.int32)
    return x, status


class _RegressionKind(NamedTuple):
    """The parts of :func:`regression` that depend on its ``kind``.

    Attributes:
      constants: ``(a_max, R, theta_max, noise) -> (G, L_smooth)`` over the ball of radius R.
      label: ``(es, key, z, dtype) -> y_t`` from the clean score ``z = a_t.theta_t``.
      loss, slope: ``(z, y) -> f`` and ``df/dz`` of the score ``z = a.x``.
      variation: ``(a1, y1, a0, y0, R) ->`` a bound on ``sup_x ||grad f_t - grad f_{t-1}||^2``.
      min_loss_plus: ``(y, reach) -> min f_t`` over ``X+`` where ``|a.x| <= reach``.
      objective: ``(a, y, T) -> (value_and_grad, gradient Lipschitz)`` of ``1/T sum_t f_t``.
    """

    constants: Callable
    label: Callable
    loss: Callable
    slope: Callable
    variation: Callable
    min_loss_plus: Callable
    objective: Callable


def _lsq_variation(a1, y1, a0, y0, R):
    # M = a1 a1^T - a0 a0^T: its non-zero eigenvalues are those of diag(1,-1) Gram.
    g11, g00, g10 = a1 @ a1, a0 @ a0, a1 @ a0
    tr = g11 - g00
    det = -(g11 * g00 - g10 * g10)
    disc = jnp.sqrt(jnp.maximum(tr * tr / 4 - det, 0.0))
    m_norm = jnp.maximum(jnp.abs(tr / 2 + disc), jnp.abs(tr / 2 - disc))
    b_norm = jnp.linalg.norm(y1 * a1 - y0 * a0)
    return (m_norm * R + b_norm) ** 2


def _lsq_objective(a, y, T):
    H = a.T @ a / T
    b = a.T @ y / T

    def vg(x):
        g = H @ x - b
        return 0.5 * x @ H @ x - b @ x, g

    return vg, lapack.eigvalsh(H)[-1]


def _logistic_loss(z, y):
    return jax.nn.softplus(-y * z)


def _logistic_slope(z, y):
    return -y * jax.nn.sigmoid(-y * z)


def _logistic_label(es, key, z, dtype):
    u = jax.random.uniform(key, (), jnp.float32).astype(dtype)
    return jnp.where(u < jax.nn.sigmoid(z), 1.0, -1.0)


def _logistic_objective(a, y, T):
    def vg(x):
        z = a @ x
        return jnp.mean(_logistic_loss(z, y)), a.T @ _logistic_slope(z, y) / T

    return vg, lapack.eigvalsh(a.T @ a / T)[-1] / 4.0


_REGRESSION_KINDS = {
    "least_squares": _RegressionKind(
        constants=lambda a_max, R, th, noise: (a_max * (a_max * (R + th) + 3.0 * noise), a_max**2),
        label=lambda es, key, z, dtype: z + es.noise * _normal(key, (), dtype),
        loss=lambda z, y: 0.5 * (z - y) ** 2,
        slope=lambda z, y: z - y,
        variation=_lsq_variation,
        min_loss_plus=lambda y, reach: 0.5 * jnp.maximum(jnp.abs(y) - reach, 0.0) ** 2,
        objective=_lsq_objective,
    ),
    "logistic": _RegressionKind(
        constants=lambda a_max, R, th, noise: (a_max, a_max**2 / 4.0),
        label=_logistic_label,
        loss=_logistic_loss,
        slope=_logistic_slope,
        variation=lambda a1, y1, a0, y0, R: (jnp.linalg.norm(a1) + jnp.linalg.norm(a0)) ** 2,
        min_loss_plus=lambda y, reach: jax.nn.softplus(-reach),
        objective=_logistic_objective,
    ),
}


def regression(
    dim: int,
    *,
    kind: str = "least_squares",
    radius: float = 1.0,
    base_norm: float = 2.0,
    amplitude: float = 0.5,
    omega: float = 0.0,
    switch_every: int = 0,
    noise: float = 0.1,
    dtype=None,
    solver_steps: int = 5000,
) -> BCOEnvFunctions:
    """Online regression with ``a_t ~ N(0, I/d)`` and a drifting parameter ``theta_t``.

    Least squares: ``y_t = a_t.theta_t + noise eps_t``, ``f_t(x) = 1/2 (a_t.x - y_t)^2``;
    logistic: ``P(y_t = 1) = sigmoid(a_t.theta_t)``, ``f_t(x) = log(1 + exp(-y_t a_t.x))``.
    ``grad_variation`` is an upper bound; :func:`projected_gradient_solve` gives ``x*``.
    """
    if kind not in _REGRESSION_KINDS:
        raise ValueError(f"kind: expected 'least_squares' or 'logistic', got {kind!r}")
    fam = _REGRESSION_KINDS[kind]
    d, domain, _, init, dtype = _drifting(
        dim, radius, base_norm, amplitude, omega, switch_every, noise, None, dtype
    )
    R = float(radius)
    a_max = 1.0 + 3.0 / math.sqrt(d)  # high-probability bound on ||a_t||
    G, L_smooth = fam.constants(a_max, R, float(base_norm) + float(amplitude), float(noise))
    rplus = R + G / max(L_smooth, 1.0)

    def theta(es, t):
        return _drift(es, t, switch_every, with_noise=False)

    def data(es, t):
        k = jax.random.fold_in(jax.random.fold_in(es.key, _K_DATA), t)
        a = _normal(k, (d,), dtype) / math.sqrt(d)
        kl = jax.random.fold_in(jax.random.fold_in(es.key, _K_LABEL), t)
        return a, fam.label(es, kl, jnp.dot(a, theta(es, t)), dtype).astype(dtype)

    def loss(es, t, x):
        a, y = data(es, t)
        return fam.loss(x @ a, y)

    def grad(es, t, x):
        a, y = data(es, t)
        return fam.slope(x @ a, y)[..., None] * a

    def comparator(es, t):
        return dom.project(domain, theta(es, t))

    def grad_variation(es, t):
        a1, y1 = data(es, t)
        a0, y0 = data(es, jnp.maximum(t - 1, 0))
        return jnp.where(t > 0, fam.variation(a1, y1, a0, y0, R), 0.0)

    def min_loss_plus(es, t):
        a, y = data(es, t)
        return fam.min_loss_plus(y, rplus * jnp.linalg.norm(a))

    def best_fixed_point(es, T: int):
        vg, lip = fam.objective(*_over_rounds(data, es, T), T)
        x0 = jnp.zeros((d,), dtype)
        return projected_gradient_solve(vg, domain, x0, lip, max_steps=solver_steps)

    per_round = (loss, grad, comparator, grad_variation, min_loss_plus, best_fixed_point)
    return _family(
        kind, init, per_round, domain, d, lipschitz=G, smoothness=L_smooth, variation_exact=False
    )
