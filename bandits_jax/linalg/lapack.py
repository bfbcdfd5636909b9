"""Dense factorizations and solves that never deadlock XLA's CPU runtime when batched.

jaxlib's CPU LAPACK kernels split a batch into pieces on XLA's intra-op thread pool and block the
calling pool thread until they finish; when as many batched calls wait as the pool has threads,
the program never returns (``docs/xla_cpu_hang.md``). So each function here, under ``vmap`` on
CPU, maps over the batch one matrix a call (``lax.map``), and stays one batched call elsewhere.
Unbatched they are the ``jax.numpy`` / ``jax.scipy`` functions they name. ``jax.jvp`` goes
through them; reverse mode does not (``custom_vmap``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy import linalg as jsl


def _one_matrix_a_call(fn: Callable) -> Callable:
    """``fn`` whose ``vmap`` is ``lax.map`` on CPU, ``vmap`` elsewhere; a one-argument ``fn``
    maps leading axes past two the same way (solves take one matrix: vmap them)."""
    mapped = jax.custom_batching.custom_vmap(fn)

    @mapped.def_vmap
    def rule(axis_size, in_batched, *args):
        args = [a if b else jnp.broadcast_to(a, (axis_size, *jnp.shape(a)))
                for a, b in zip(args, in_batched, strict=True)]  # fmt: skip
        out = lax.platform_dependent(
            *args,
            cpu=lambda *a: lax.map(lambda one: mapped(*one), a),
            default=jax.vmap(fn),
        )
        return out, jax.tree.map(lambda _: True, out)

    @functools.wraps(fn)
    def call(a, *rest):
        if jnp.ndim(a) > 2:  # an explicit batch: as under vmap
            if rest:
                raise ValueError(f"linalg.lapack.{fn.__name__}: a must be one matrix (2-D; vmap "
                                 f"over a batch), got shape {jnp.shape(a)}")  # fmt: skip
            return jax.vmap(call)(a)
        return mapped(a, *rest)

    return call


@_one_matrix_a_call
def cholesky(a: jax.Array) -> jax.Array:
    """The lower Cholesky factor of ``a`` (``jnp.linalg.cholesky``)."""
    return jnp.linalg.cholesky(a)


@_one_matrix_a_call
def eigh(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Eigenvalues (ascending) and eigenvectors of a symmetric ``a`` (``jnp.linalg.eigh``)."""
    return jnp.linalg.eigh(a)


@_one_matrix_a_call
def eigvalsh(a: jax.Array) -> jax.Array:
    """Eigenvalues (ascending) of a symmetric ``a``, upper triangle read (``eigvalsh``)."""
    return jnp.linalg.eigvalsh(a, UPLO="U")


@_one_matrix_a_call
def solve(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a^{-1} b`` by LU (``jnp.linalg.solve``)."""
    return jnp.linalg.solve(a, b)


@_one_matrix_a_call
def lower_solve(L: jax.Array, b: jax.Array) -> jax.Array:
    """``L^{-1} b`` for a lower-triangular ``L``."""
    return jsl.solve_triangular(L, b, lower=True)


@_one_matrix_a_call
def lower_solve_t(L: jax.Array, b: jax.Array) -> jax.Array:
    """``L^{-T} b`` for a lower-triangular ``L``."""
    return jsl.solve_triangular(L, b, lower=True, trans="T")


@_one_matrix_a_call
def cho_solve(L: jax.Array, b: jax.Array) -> jax.Array:
    """``(L L^T)^{-1} b`` for a lower Cholesky factor ``L`` (``cho_solve((L, True), b)``)."""
    return jsl.cho_solve((L, True), b)


@_one_matrix_a_call
def svd(a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The thin SVD ``(u, s, vh)`` of ``a`` (``jnp.linalg.svd(a, full_matrices=False)``)."""
    return jnp.linalg.svd(a, full_matrices=False)


@_one_matrix_a_call
def qr(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The reduced QR factors of ``a`` (``jnp.linalg.qr``)."""
    return jnp.linalg.qr(a)
