"""Dense factorizations and solves that never deadlock XLA's CPU runtime when batched, and the
choice between a LAPACK form and a batched form of a learner's linear algebra.

jaxlib splits a batched LAPACK call over XLA's thread pool where the batch's work (batch times
its FLOP estimate for one matrix) reaches :data:`MIN_SPLIT_WORK`, and such calls can wait on each
other forever (``docs/xla_cpu_hang.md``). So under ``vmap`` on CPU each function here makes one
call on a batch below that work and a ``scan`` over chunks of such batches above it; elsewhere one
batched call. Unbatched they are the ``jax.numpy`` / ``jax.scipy`` functions they name.
``jax.jvp`` goes through them; reverse mode does not (``custom_vmap``).

A GPU runs some batched solver calls as a loop over the batch (an ``eigh`` above 32 x 32,
``docs/gpu.md``): where a learner has a LAPACK form that is faster on the CPU and a form a GPU
keeps as one batch, :func:`by_platform` picks by its ``solver`` (:data:`SOLVERS`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy import linalg as jsl

#: A learner's ``solver``: ``"lapack"`` (its LAPACK form, fastest on the CPU), ``"batched"`` (the
#: form a GPU keeps as one batch: secular updates, Cholesky solves) or ``"auto"`` (the first on
#: the CPU, the second elsewhere); the two agree to rounding.
SOLVERS = ("auto", "lapack", "batched")


def check_solver(fn: str, solver: object) -> str:
    """``solver`` if it is one of :data:`SOLVERS`, else a ``ValueError`` naming ``fn``."""
    if not isinstance(solver, str) or solver not in SOLVERS:
        raise ValueError(f"{fn}: solver: expected one of {SOLVERS}, got {solver!r}")
    return solver


def by_platform(solver: str, by_lapack: Callable, batched: Callable, *args):
    """``by_lapack(*args)`` or ``batched(*args)`` as ``solver`` says; ``"auto"``: a
    ``lax.platform_dependent`` choice (LAPACK on the CPU). The two must return the same types."""
    if solver == "lapack":
        return by_lapack(*args)
    if solver == "batched":
        return batched(*args)
    return lax.platform_dependent(*args, cpu=by_lapack, default=batched)


# jaxlib's ``GetLapackBatchChunkSize``: a batch whose work is below this runs in one piece.
MIN_SPLIT_WORK = 200_000
_UNROLL = 8  # chunks a loop step, where a batch is mapped


def _limited(cost: Callable[..., int]) -> Callable[[Callable], Callable]:
    """Decorates a one-matrix ``fn``; ``cost(*shapes)``: jaxlib's work estimate for one call
    (its largest LAPACK kernel) from the shapes of one matrix's arguments."""

    def wrap(fn: Callable) -> Callable:
        @functools.cache
        def level(depth: int) -> Callable:  # arguments with ``depth`` leading batch axes
            f = fn
            for _ in range(depth):
                f = jax.vmap(f)
            g = jax.custom_batching.custom_vmap(f)

            @g.def_vmap
            def rule(axis_size, in_batched, *args):
                args = [a if b else jnp.broadcast_to(a, (axis_size, *jnp.shape(a)))
                        for a, b in zip(args, in_batched, strict=True)]  # fmt: skip
                inner = math.prod(args[0].shape[1 : 1 + depth])
                unit = inner * cost(*(a.shape[1 + depth :] for a in args))
                most = max(1, (MIN_SPLIT_WORK - 1) // unit)  # matrices a call
                chunk = -(-axis_size // -(-axis_size // most))  # as even as the pieces go
                out = lax.platform_dependent(
                    *args,
                    cpu=lambda *a: _chunked(a, axis_size, chunk, level(depth + 1)),
                    default=jax.vmap(f),
                )
                return out, jax.tree.map(lambda _: True, out)

            return g

        @functools.wraps(fn)
        def call(a, *rest):
            if jnp.ndim(a) > 2:  # an explicit batch: as under vmap
                if rest:
                    raise ValueError(f"linalg.lapack.{fn.__name__}: a must be one matrix (2-D; "
                                     f"vmap over a batch), got shape {jnp.shape(a)}")  # fmt: skip
                return jax.vmap(call)(a)
            return level(0)(a, *rest)

        return call

    return wrap


def _chunked(args: list, n: int, chunk: int, batched: Callable):
    """``batched`` (one call) over chunks of ``chunk`` along the leading axis of ``args``: a
    ``scan`` over the chunks (``_UNROLL`` a step), the remainder in one more call. A chunk of
    one matrix is a call on one matrix, which jaxlib never splits."""
    if chunk >= n:
        return batched(*args)
    q = n // chunk
    head = [a[: q * chunk].reshape(q, chunk, *a.shape[1:]) for a in args]
    out = lax.scan(lambda c, x: (c, batched(*x)), None, head, unroll=min(q, _UNROLL))[1]
    out = jax.tree.map(lambda o: o.reshape(q * chunk, *o.shape[2:]), out)
    if n > q * chunk:
        tail = batched(*(a[q * chunk :] for a in args))
        out = jax.tree.map(lambda o, t: jnp.concatenate([o, t]), out, tail)
    return out


def _cols(b: tuple[int, ...]) -> int:
    return b[1] if len(b) == 2 else 1


@_limited(lambda a: a[0] ** 3 // 3)  # ?potrf
def cholesky(a: jax.Array) -> jax.Array:
    """The lower Cholesky factor of ``a`` (``jnp.linalg.cholesky``)."""
    return jnp.linalg.cholesky(a)


@_limited(lambda a: 5 * a[0] ** 3)  # ?syevd
def eigh(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Eigenvalues (ascending) and eigenvectors of a symmetric ``a`` (``jnp.linalg.eigh``)."""
    return jnp.linalg.eigh(a)


@_limited(lambda a: 5 * a[0] ** 3)  # ?syevd
def eigvalsh(a: jax.Array) -> jax.Array:
    """Eigenvalues (ascending) of a symmetric ``a``, upper triangle read (``eigvalsh``)."""
    return jnp.linalg.eigvalsh(a, UPLO="U")


@_limited(lambda a, b: max(a[0] ** 3, a[0] ** 2 * _cols(b)))  # ?getrf, ?trsm
def solve(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a^{-1} b`` by LU (``jnp.linalg.solve``)."""
    return jnp.linalg.solve(a, b)


@_limited(lambda L, b: L[0] ** 2 * _cols(b))  # ?trsm
def lower_solve(L: jax.Array, b: jax.Array) -> jax.Array:
    """``L^{-1} b`` for a lower-triangular ``L``."""
    return jsl.solve_triangular(L, b, lower=True)


@_limited(lambda L, b: L[0] ** 2 * _cols(b))  # ?trsm
def lower_solve_t(L: jax.Array, b: jax.Array) -> jax.Array:
    """``L^{-T} b`` for a lower-triangular ``L``."""
    return jsl.solve_triangular(L, b, lower=True, trans="T")


@_limited(lambda L, b: L[0] ** 2 * _cols(b))  # ?trsm, twice
def cho_solve(L: jax.Array, b: jax.Array) -> jax.Array:
    """``(L L^T)^{-1} b`` for a lower Cholesky factor ``L`` (``cho_solve((L, True), b)``)."""
    return jsl.cho_solve((L, True), b)


@_limited(lambda a: 4 * a[0] * a[1] * min(a))  # ?geqrf, ?orgqr (bounds both)
def qr(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The reduced QR factors of ``a`` (``jnp.linalg.qr``)."""
    return jnp.linalg.qr(a)
