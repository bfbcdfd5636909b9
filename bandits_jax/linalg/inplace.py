"""A large matrix's rank-one update written in place, which XLA's CPU runtime runs on one thread.

XLA's CPU compiler splits an element-wise loop over more than 256 KiB of traffic into parallel
tasks on its thread pool (``ParallelTaskAssigner``) and waits for every task: with another
process busy on a core, the round then waits for the busy core's time slice
(docs/xla_cpu_hang.md, "A busy core"). An in-place ``dynamic_update_slice`` is never split, so
:func:`subtract_outer` writes rows ``0..D-2`` of ``A - u v^T`` into ``A`` as one in-place update
and the last row as another (one whole-matrix update would be simplified to a plain, split, loop).
Elsewhere (a GPU) the same program is two in-place writes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def subtract_outer(A: jax.Array, u: jax.Array, v: jax.Array, ok: jax.Array) -> jax.Array:
    """``A - u v^T`` where ``ok``, else ``A`` (the rejected-step guard, in the same write); ``A``
    (D, E), ``u`` (D,), ``v`` (E,)."""
    if A.shape[0] < 2:
        return jnp.where(ok, A - jnp.outer(u, v), A)
    head = lax.slice_in_dim(A, 0, A.shape[0] - 1, axis=0)
    head = jnp.where(ok, head - jnp.outer(u[:-1], v), head)
    A = lax.dynamic_update_slice_in_dim(A, head, 0, axis=0)
    return A.at[-1].set(jnp.where(ok, A[-1] - u[-1] * v, A[-1]))
