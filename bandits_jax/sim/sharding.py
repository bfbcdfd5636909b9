"""Sharding a batch of runs over devices: a 1-D mesh over the flattened run axis.

A sweep's runs are independent, so they are split over a 1-D :class:`jax.sharding.Mesh` (axis
``"runs"``): every device plays its slice with the same vmapped scan (``jax.shard_map`` in
:class:`bandits_jax.sim.chunks.ChunkFn`), with no communication, and each run gets the numbers
of the unsharded call. The run count is padded to a multiple of the device count by repeating
the last run (:func:`pad_runs`). Over several hosts, :func:`shard_runs` builds global arrays of
which each host materialises only its own devices' slices (``docs/sweeps.md``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["AXIS", "run_mesh", "pad_runs", "shard_runs", "num_runs"]

AXIS = "runs"
PyTree = Any


def run_mesh(devices: Any = None) -> Mesh:
    """A 1-D mesh with axis ``"runs"`` over ``devices`` (default: all of ``jax.devices()``)."""
    devs = np.asarray(jax.devices() if devices is None else list(devices))
    if devs.size == 0:
        raise ValueError("devices: expected at least one device")
    return Mesh(devs.reshape(-1), (AXIS,))


def num_runs(tree: PyTree) -> int:
    """The length of the leading run axis (checked to be the same on every leaf)."""
    sizes = {int(np.shape(x)[0]) if np.ndim(x) else None for x in jax.tree_util.tree_leaves(tree)}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(f"tree: every leaf needs the same leading run axis, got sizes {sizes}")
    return sizes.pop()


def pad_runs(tree: PyTree, multiple: int) -> tuple[PyTree, int]:
    """``(padded_tree, original_run_count)``: the run axis padded to a multiple of ``multiple``
    by repeating the last run."""
    n = num_runs(tree)
    extra = (-n) % multiple
    if extra == 0:
        return tree, n

    def pad(x):
        return jnp.concatenate([x, jnp.repeat(x[-1:], extra, axis=0)], axis=0)

    return jax.tree_util.tree_map(pad, tree), n


def shard_runs(tree: PyTree, mesh: Mesh) -> PyTree:
    """Places a batch of runs (padded to a multiple of ``mesh.size``) over the mesh.

    Works across hosts too: each process only builds the slices its devices hold.
    """
    n = num_runs(tree)
    if n % mesh.size:
        raise ValueError(f"tree: {n} runs is not a multiple of the {mesh.size} devices; pad_runs")
    sharding = NamedSharding(mesh, PartitionSpec(AXIS))
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)

    def place(x):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            # Typed keys have no numpy form: place their raw data and wrap it again.
            data = place(jax.random.key_data(x))
            return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
        host = np.asarray(jax.device_get(x))
        return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])

    return jax.tree_util.tree_map(place, tree)
