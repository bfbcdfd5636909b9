"""Bounded, bracketed scalar Newton iteration inside ``lax.while_loop``.

Used for the projection's dual root (EOFD-MLogB, Lemma 2, eq. 24-25) and the one-point box
learner's FTRL equations (BCO paper, Algorithm 4, eq. D.4). Running out of steps and non-finite
values become int32 status codes (:mod:`bandits_jax.status`), never exceptions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

# The solver codes of the library's one status space, re-exported for ``roots.CONVERGED`` etc.
from bandits_jax.status import CONVERGED, INACTIVE, INEXACT, MAX_STEPS, NONFINITE  # noqa: F401


class RootResult(NamedTuple):
    """Result of :func:`bracketed_newton`.

    Attributes:
      x: the root estimate (the last finite iterate; a bracket end point on failure).
      status: ``CONVERGED``, ``MAX_STEPS`` or ``NONFINITE`` (int32).
      lo, hi: the final bracket (``f(lo) <= 0 <= f(hi)`` as far as ``fn`` was evaluated).
    """

    x: jax.Array
    fx: jax.Array
    steps: jax.Array
    status: jax.Array
    lo: jax.Array
    hi: jax.Array


def bracketed_newton(
    fn: Callable[[jax.Array], tuple[jax.Array, jax.Array]],
    lo: jax.Array,
    hi: jax.Array,
    x0: jax.Array,
    *,
    max_steps: int,
    ftol: jax.Array | float,
    xtol: jax.Array | float,
    stacked: bool = True,
) -> RootResult:
    """Finds a root of an increasing scalar function on ``[lo, hi]`` by Newton steps from ``x0``;
    a step that is non-finite or leaves the shrinking bracket is replaced by bisection.

    Args:
      fn: ``x -> (f(x), f'(x))``, increasing, ``f(lo) <= 0 <= f(hi)``.
      max_steps: static iteration cap.
      ftol: stop when ``|f(x)| <= ftol``.
      xtol: stop when ``hi - lo <= xtol * (1 + |x|)``.
      stacked: carry the loop's floats as one stacked array (fewer loop outputs, less compile
        time); ``False`` carries them one by one: the same iteration, which XLA then groups, and
        so rounds, otherwise.
    """
    dtype = jnp.result_type(lo, hi, x0)
    lo = jnp.asarray(lo, dtype)
    hi = jnp.asarray(hi, dtype)
    x0 = jnp.clip(jnp.asarray(x0, dtype), lo, hi)

    def done_fn(x, fx, lo, hi):
        small_f = jnp.abs(fx) <= ftol
        small_bracket = (hi - lo) <= xtol * (1.0 + jnp.abs(x))
        return small_f | small_bracket | ~jnp.isfinite(fx)

    # Stacked: x, lo, hi alone when fn's values have another dtype or shape than x.
    f_type, df_type = jax.eval_shape(fn, x0)
    one = f_type.dtype == df_type.dtype == dtype and f_type.shape == df_type.shape == x0.shape

    def pack(x, fx, dfx, lo, hi):
        if not stacked:
            return x, fx, dfx, lo, hi
        if one:
            return (jnp.stack([x, fx, dfx, lo, hi]),)
        return jnp.stack([x, lo, hi]), fx, dfx

    def unpack(v):
        if not stacked:
            return v
        if one:
            return tuple(v[0])
        (x, lo, hi), fx, dfx = v
        return x, fx, dfx, lo, hi

    def cond(carry):
        v, step, first = carry
        x, fx, _, lo, hi = unpack(v)
        return first | (~done_fn(x, fx, lo, hi) & (step < max_steps))

    def body(carry):
        # The first trip only evaluates fn at x0 (so fn is compiled once, in the body).
        v, step, first = carry
        x, fx, dfx, lo, hi = unpack(v)
        # The bracket keeps the sign change: f(lo) <= 0 <= f(hi).
        lo_step = jnp.where(fx < 0, x, lo)
        hi_step = jnp.where(fx > 0, x, hi)
        x_newton = x - fx / dfx
        ok = jnp.isfinite(x_newton) & (x_newton > lo_step) & (x_newton < hi_step)
        x_new = jnp.where(first, x, jnp.where(ok, x_newton, 0.5 * (lo_step + hi_step)))
        f_new, df_new = fn(x_new)
        lo, hi = jnp.where(first, lo, lo_step), jnp.where(first, hi, hi_step)
        step = step + jnp.where(first, 0, 1)
        return pack(x_new, f_new, df_new, lo, hi), step, jnp.zeros((), bool)

    zero_f, zero_df = jnp.zeros(f_type.shape, f_type.dtype), jnp.zeros(df_type.shape, df_type.dtype)
    init = (pack(x0, zero_f, zero_df, lo, hi), jnp.asarray(0, jnp.int32), jnp.ones((), bool))
    v, steps, _ = lax.while_loop(cond, body, init)
    x, fx, _, lo_f, hi_f = unpack(v)
    # The last evaluation also narrows the bracket.
    lo_f = jnp.where(fx < 0, x, lo_f)
    hi_f = jnp.where(fx > 0, x, hi_f)
    finite = jnp.isfinite(fx) & jnp.isfinite(x)
    converged = done_fn(x, fx, lo_f, hi_f) & finite
    status = jnp.where(~finite, NONFINITE, jnp.where(converged, CONVERGED, MAX_STEPS))
    status = status.astype(jnp.int32)
    return RootResult(x=x, fx=fx, steps=steps, status=status, lo=lo_f, hi=hi_f)
