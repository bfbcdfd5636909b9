"""Two-point gradient estimators: the coordinate estimator with optimism (eq. 2.2) and the sphere
estimator of Algorithm 3 (Appendix C.5), plus the exploration radius ``delta`` and shrinkage
``xi`` of Algorithm 1.

Coordinate estimator (eq. 2.2, Chiang et al. 2013): with ``i_t`` uniform on ``[d]`` and
``v_t = (f_t(w_t + delta e_i) - f_t(w_t - delta e_i)) / (2 delta)``,

    g_t        = d (v_t - g~_{t,i_t}) e_{i_t} + g~_t,
    g~_{t+1}   =   (v_t - g~_{t,i_t}) e_{i_t} + g~_t,

so ``g~`` holds the latest directional-derivative estimate of every coordinate (Lemma 6 (i)).
Sphere estimator: ``g_t = d / (2 delta) (f_t(w + delta u) - f_t(w - delta u)) u``, ``u`` uniform
on the unit sphere. Both divide by the *realised* spacing of the two queries. The paper's
``delta`` is far below float32's resolution (errata 12), so :func:`exploration` raises it to
``R sqrt(eps(dtype))``, the classical optimal finite-difference spacing (``docs/bco.md``,
"Numerics"); linear losses get the paper's ``L >= 1`` convention (errata 13).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

Array = jax.Array

# --- exploration radius and shrinkage (Algorithm 1, Lemma 6; Algorithm 3, Theorem 8) ---------


def theorem_delta(d: int, horizon, smoothness, radius) -> float:
    """``delta = 1 / (2 d^2 L T R)`` of Algorithm 1 / Lemma 6 with ``L <- max(L, 1)`` (Python
    floats; Algorithm 3's ``1 / (2 d^2 T R)`` is the case ``L = 1``)."""
    L = max(float(smoothness), 1.0)
    return 1.0 / (2.0 * d * d * L * float(horizon) * float(radius))


def delta_floor(dtype, radius) -> float:
    """Dtype-aware lower bound ``R * sqrt(eps(dtype))`` on the exploration radius (see module)."""
    eps = float(jnp.finfo(jnp.dtype(dtype)).eps)
    return float(radius) * eps**0.5


def exploration(
    d: int, horizon, smoothness, outer_radius, inner_radius, dtype, delta=None
) -> tuple[float, float]:
    """``(delta, xi = delta / r)`` for Algorithms 1/3: ``delta`` (default :func:`theorem_delta`)
    raised to :func:`delta_floor` of the run's ``dtype``.

    Raises:
      ValueError: naming ``delta`` if it is not positive or ``delta >= r`` (empty shrunk domain).
    """
    if delta is None:
        delta = theorem_delta(d, horizon, smoothness, outer_radius)
    delta = float(delta)
    if not (math.isfinite(delta) and delta > 0):
        raise ValueError(f"delta: expected a positive finite exploration radius, got {delta}")
    delta = max(delta, delta_floor(dtype, outer_radius))
    r = float(inner_radius)
    if delta >= r:
        raise ValueError(f"delta: expected delta < r = {r} (xi = delta / r < 1), got {delta}")
    return delta, delta / r


# --- Coordinate estimator with optimism (eq. 2.2) ------------------------------------------------


def sample_coordinate(key: Array, d: int) -> Array:
    """``i_t`` uniform on ``{0, ..., d - 1}`` (int32)."""
    return jax.random.randint(key, (), 0, d, dtype=jnp.int32)


def coordinate_queries(w: Array, i: Array, delta: Array) -> tuple[Array, Array]:
    """The two queries ``x_t = w + delta e_i``, ``x'_t = w - delta e_i`` of Algorithm 1.

    Returns:
      ``points`` of shape ``(2, d)`` and the realised spacing ``x_t[i] - x'_t[i]`` (``~ 2 delta``).
    """
    e = jax.nn.one_hot(i, w.shape[-1], dtype=w.dtype)
    delta = jnp.asarray(delta, w.dtype)
    plus = w + delta * e
    minus = w - delta * e
    return jnp.stack([plus, minus]), plus[i] - minus[i]


def directional_derivative(values: Array, spacing: Array) -> Array:
    """``v_t = (f_t(x_t) - f_t(x'_t)) / (x_t - x'_t)_{i_t}`` (eq. 2.2, realised spacing)."""
    return (values[0] - values[1]) / spacing


def coordinate_estimate(g_tilde: Array, i: Array, v: Array) -> tuple[Array, Array]:
    """Eq. (2.2): returns ``(g_t, g~_{t+1})`` from the optimism ``g~_t``, ``i_t`` and ``v_t``.

    ``g_t = d (v - g~_i) e_i + g~`` and ``g~_{t+1} = (v - g~_i) e_i + g~`` (so ``g~_{t+1,i} = v``).
    """
    d = g_tilde.shape[-1]
    e = jax.nn.one_hot(i, d, dtype=g_tilde.dtype)
    gap = v - g_tilde[i]
    g = d * gap * e + g_tilde
    g_tilde_next = jnp.where(e > 0, v, g_tilde)  # exactly v on coordinate i (no cancellation)
    return g, g_tilde_next


def coordinate_error_sq(g_tilde: Array, i: Array, v: Array) -> Array:
    """``||g_t - g~_t||^2 = d^2 (v_t - g~_{t,i_t})^2`` (eq. 2.3's summand; Vbar's increment)."""
    d = g_tilde.shape[-1]
    return (d * (v - g_tilde[i])) ** 2


# --- Sphere estimator (Algorithm 3) --------------------------------------------------------------


def sample_sphere(key: Array, d: int, dtype) -> Array:
    """``u`` uniform on the unit sphere of ``R^d``."""
    z = jax.random.normal(key, (d,), dtype=dtype)
    return z / jnp.linalg.norm(z)


def sphere_queries(w: Array, u: Array, delta: Array) -> tuple[Array, Array]:
    """Queries ``w +- delta u``; returns ``points (2, d)`` and the realised spacing
    ``<x_+ - x_-, u>`` (``~ 2 delta``)."""
    delta = jnp.asarray(delta, w.dtype)
    plus = w + delta * u
    minus = w - delta * u
    return jnp.stack([plus, minus]), jnp.dot(plus - minus, u)


def sphere_estimate(values: Array, u: Array, spacing: Array) -> Array:
    """Algorithm 3: ``g_t = d (f(w + delta u) - f(w - delta u)) / (2 delta) u``."""
    d = u.shape[-1]
    return d * (values[0] - values[1]) / spacing * u
