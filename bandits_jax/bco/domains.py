"""Feasible domains of two-point BCO and projection onto the shrunk domain ``(1 - xi) X``.

The geometry of Assumption 1 (``r B <= X <= R B``) for the paper's two domains: the Euclidean ball
of radius ``R`` about the origin (``r = R``) and boxes ``prod_i [a_i, b_i]`` with ``a_i < 0 <
b_i`` (Assumption 5; ``r = min_i min(-a_i, b_i)``, ``R = ||max(|a|, |b|)||``). Algorithms 1 and 3
project onto ``(1 - xi) X`` with ``xi = delta / r`` so that the queries ``w +- delta e`` stay in
``X``. Domains are NamedTuples of arrays (pytrees, so they live in hyperparameters and vmap);
their kind is a static choice.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax.projections as oproj

from bandits_jax.checks import is_concrete

Array = jax.Array


class Ball(NamedTuple):
    """Euclidean ball ``{x : ||x|| <= radius}`` (Assumption 1 with ``r = R = radius``).

    Attributes:
      radius: scalar array ``R > 0``.
    """

    radius: Array


class Box(NamedTuple):
    """Hyper-rectangle ``prod_i [lower_i, upper_i]`` with ``lower < 0 < upper`` (Assumption 5).

    Attributes:
      lower: ``(d,)`` array of lower ends ``a``.
      upper: ``(d,)`` array of upper ends ``b``.
    """

    lower: Array
    upper: Array


Domain = Ball | Box


def _float_dtype(dtype, *values):
    """``dtype``, else that of the first floating array among ``values``, else JAX's default."""
    for v in values:
        if dtype is None and hasattr(v, "dtype") and jnp.issubdtype(v.dtype, jnp.floating):
            dtype = v.dtype
    return jnp.dtype(dtype) if dtype is not None else jnp.result_type(float)


def ball(radius, *, dtype=None) -> Ball:
    """Builds a :class:`Ball`, checking eagerly that ``radius`` is a positive finite scalar.

    ``dtype`` defaults to that of ``radius`` if it is a floating array, else JAX's default float.
    """
    dtype = _float_dtype(dtype, radius)
    if is_concrete(radius):
        r = np.asarray(radius, dtype=np.float64)
        if r.shape != ():
            raise ValueError(f"radius: expected a scalar, got shape {r.shape}")
        if not (np.isfinite(r) and r > 0):
            raise ValueError(f"radius: expected R > 0 and finite, got {float(r)}")
    return Ball(jnp.asarray(radius, dtype))


def box(lower, upper, *, dtype=None) -> Box:
    """Builds a :class:`Box`, checking shapes, finite ends and ``lower < 0 < upper`` eagerly.

    The origin must be interior: Algorithm 1 starts at ``w_1 = 0`` and shrinks the domain towards
    it (``(1 - xi) X``), which needs ``r B <= X`` with ``r > 0``.
    """
    dtype = _float_dtype(dtype, lower, upper)
    if is_concrete(lower) and is_concrete(upper):
        lo = np.asarray(lower, dtype=np.float64)
        hi = np.asarray(upper, dtype=np.float64)
        if lo.ndim != 1 or lo.shape[0] < 1:
            raise ValueError(f"lower: expected shape (d,) with d >= 1, got {lo.shape}")
        if hi.shape != lo.shape:
            raise ValueError(f"upper: expected shape {lo.shape} (that of lower), got {hi.shape}")
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise ValueError("lower/upper: expected finite ends")
        if np.any(lo >= hi):
            k = int(np.argmax(lo >= hi))
            raise ValueError(
                f"lower/upper: empty box, expected lower < upper, got lower[{k}]={lo[k]} >= "
                f"upper[{k}]={hi[k]}"
            )
        if np.any(lo >= 0) or np.any(hi <= 0):
            raise ValueError(
                "lower/upper: expected lower < 0 < upper (origin interior, Assumption 5), got "
                f"min(upper)={hi.min()}, max(lower)={lo.max()}"
            )
    return Box(jnp.asarray(lower, dtype), jnp.asarray(upper, dtype))


def check_dim(domain: Domain, d: int) -> None:
    """Raises ``ValueError`` if a box's dimension differs from the learner's ``d``."""
    if isinstance(domain, Box):
        if domain.lower.shape[-1] != d:
            raise ValueError(
                f"domain: expected a box of dimension d={d}, got {domain.lower.shape[-1]}"
            )
    elif isinstance(domain, Ball):
        if domain.radius.ndim != 0 and is_concrete(domain.radius):
            raise ValueError(f"domain: expected a scalar radius, got {domain.radius.shape}")
    else:
        raise ValueError(f"domain: expected Ball or Box, got {type(domain).__name__}")


def concrete_radii(domain: Domain) -> tuple[float, float]:
    """``(R, r)`` as Python floats; ``ValueError`` naming ``domain`` if traced or ``R <= 0``."""
    R, r = outer_radius(domain), inner_radius(domain)
    if not is_concrete(R, r):
        raise ValueError("domain: hyperparams needs a concrete domain (build it outside jit)")
    if not (np.isfinite(float(R)) and float(R) > 0 and float(r) > 0):
        raise ValueError(f"domain: expected 0 < r <= R finite, got r={float(r)}, R={float(R)}")
    return float(R), float(r)


def dtype_of(domain: Domain):
    """The floating dtype a domain carries."""
    return domain.radius.dtype if isinstance(domain, Ball) else domain.lower.dtype


def inner_radius(domain: Domain) -> Array:
    """``r`` of Assumption 1: the largest ``r`` with ``r B <= X``."""
    if isinstance(domain, Ball):
        return domain.radius
    return jnp.minimum(jnp.min(-domain.lower, axis=-1), jnp.min(domain.upper, axis=-1))


def outer_radius(domain: Domain) -> Array:
    """``R`` of Assumption 1: the smallest ``R`` with ``X <= R B``."""
    if isinstance(domain, Ball):
        return domain.radius
    return jnp.linalg.norm(jnp.maximum(-domain.lower, domain.upper), axis=-1)


def project(domain: Domain, x: Array, shrink: Array | float = 0.0) -> Array:
    """Euclidean projection of ``x`` (shape ``(..., d)``) onto ``(1 - shrink) X``, the domain
    scaled about the origin (Algorithms 1 and 3), by ``optax.projections``."""
    if x.ndim > 1:
        return jax.vmap(lambda row: project(domain, row, shrink))(x)
    scale = 1.0 - jnp.asarray(shrink, x.dtype)
    if isinstance(domain, Ball):
        return oproj.projection_l2_ball(x, scale * domain.radius.astype(x.dtype))
    return oproj.projection_box(
        x, scale * domain.lower.astype(x.dtype), scale * domain.upper.astype(x.dtype)
    )


def contains(domain: Domain, x: Array, shrink: Array | float = 0.0, atol: float = 0.0) -> Array:
    """Whether ``x`` lies in ``(1 - shrink) X`` up to ``atol`` (boolean, shape ``x.shape[:-1]``)."""
    scale = 1.0 - jnp.asarray(shrink, x.dtype)
    if isinstance(domain, Ball):
        return jnp.linalg.norm(x, axis=-1) <= scale * domain.radius + atol
    lo, hi = scale * domain.lower, scale * domain.upper
    return jnp.all((x >= lo - atol) & (x <= hi + atol), axis=-1)


def max_abs_value_on(domain: Domain, direction: Array) -> Array:
    """``max_{x in X} <direction, x>`` (support function), used for linear losses."""
    if isinstance(domain, Ball):
        return domain.radius * jnp.linalg.norm(direction, axis=-1)
    return jnp.sum(jnp.maximum(direction * domain.upper, direction * domain.lower), axis=-1)


def linear_minimiser(domain: Domain, direction: Array) -> Array:
    """``argmin_{x in X} <l, x>`` for ``l = direction``: ``-R l / ||l||`` on the ball, the corner
    picked by the signs of ``l`` on the box (0 where ``l`` is 0)."""
    if isinstance(domain, Ball):
        nrm = jnp.linalg.norm(direction, axis=-1, keepdims=True)
        safe = jnp.where(nrm > 0, nrm, 1.0)
        return jnp.where(nrm > 0, -domain.radius * direction / safe, 0.0)
    return jnp.where(direction > 0, domain.lower, jnp.where(direction < 0, domain.upper, 0.0))
