"""Eager validation, NaN guards and tree stacking shared by both families (one of each).

* :func:`is_concrete`: the one "can this be checked eagerly" test (tracers are skipped: values
  built inside ``jit`` are the caller's responsibility and failures there become status codes).
* :func:`check_int`, :func:`check_float`: the one validator family. A bool is not an int, a float
  is not an int (``horizon=2.5`` is an error, not a truncation), NaN fails every range check.
* :func:`guard`: keep the last good state where an update was rejected
  (``optax.tree_utils.tree_where``, argument order ``(ok, new, old)``).
* :func:`stack_trees`: stack pytrees along a new leading axis (grids, pools).
* :func:`fresh`: a copy with its own buffer (states must not share buffers, to be donated).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax.tree_utils as otu

Array = jax.Array


def is_concrete(*xs: Any) -> bool:
    """True when no argument is a tracer (so its value can be validated eagerly)."""
    return not any(isinstance(x, jax.core.Tracer) for x in xs)


def check_int(name: str, value: Any, minimum: int = 1) -> int:
    """``value`` as a Python int ``>= minimum``; bools, floats and NaN raise ``ValueError``."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name}: expected an int >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name}: expected an int >= {minimum}, got {value!r}")
    return int(value)


def check_float(
    name: str,
    value: Any,
    *,
    low: float = 0.0,
    high: float = math.inf,
    low_open: bool = True,
    high_open: bool = False,
    shape: tuple[int, ...] | None = None,
) -> np.ndarray:
    """Validates a real scalar or array entry by entry (finite, in the interval); returns float64.

    ``shape=()`` demands a scalar; ``None`` accepts any shape (a grid). Tracers pass unchecked.
    """
    if isinstance(value, jax.core.Tracer):
        return value
    if isinstance(value, bool | np.bool_):
        raise ValueError(f"{name}: expected a real number, got {value!r}")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: expected a real number, got {value!r}") from exc
    if shape is not None and arr.shape != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {arr.shape}")
    lo_ok = arr > low if low_open else arr >= low
    hi_ok = arr < high if high_open else arr <= high
    if not np.all(np.isfinite(arr) & lo_ok & hi_ok):
        lb = "(" if low_open else "["
        rb = ")" if high_open else "]"
        raise ValueError(f"{name}: expected finite values in {lb}{low}, {high}{rb}, got {value!r}")
    return arr


def check_horizon(value: Any) -> int:
    """``T``: an int ``>= 1`` (a float horizon would silently change ``delta`` and the pools)."""
    if isinstance(value, float | np.floating) and float(value).is_integer():
        value = int(value)
    return check_int("horizon", value, 1)


def check_one_point(batch: tuple[int, ...]) -> None:
    """``init``'s refusal of a batch of hyperparameter points (``batch``: their leading axes, a
    scalar field's shape; ``()`` for one point)."""
    if batch:
        raise ValueError(
            f"init: hparams is a batch of hyperparameter points (leading axes {tuple(batch)}); "
            "initialise one state per point with jax.vmap(learner.init)(hparams)"
        )


def guard(ok: Array, new: Any, old: Any) -> Any:
    """``new`` where ``ok`` else ``old``, leaf by leaf (the rejected-step guard)."""
    return otu.tree_where(ok, new, old)


def stack_trees(trees: Sequence[Any]) -> Any:
    """Stacks pytrees of equal structure along a new leading axis."""
    return jax.tree_util.tree_map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *trees)


def fresh(x: Array) -> Array:
    """A copy with its own buffer (states must not share buffers, so that they can be donated)."""
    return jnp.array(x, copy=True)


def named(fn: str, check: Any, *args: Any, **kwargs: Any) -> Any:
    """``check(*args, **kwargs)``, its ValueError prefixed by the public function's name."""
    try:
        return check(*args, **kwargs)
    except ValueError as exc:
        raise ValueError(f"{fn}: {exc}") from None


def cast_checked(fn: str, name: str, a: Any, dtype: Any, positive: bool) -> np.ndarray:
    """``a`` cast to ``dtype``, checked to stay finite and ``> 0`` (``positive``) or ``>= 0``
    (a value that over- or underflows there is bad input of ``fn``)."""
    with np.errstate(over="ignore", under="ignore"):
        c = np.asarray(a, float).astype(dtype)
    if np.any(~np.isfinite(c) | ((c <= 0) if positive else (c < 0))):
        raise ValueError(f"{fn}: {name} must stay finite and {'> 0' if positive else '>= 0'} "
                         f"in {np.dtype(dtype).name}, got {a!r}")  # fmt: skip
    return c
