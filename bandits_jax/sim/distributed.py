"""Sweeps spread over several processes (and machines) with ``jax.distributed``.

Every process plays its own contiguous share of each experiment's runs (as in
:func:`bandits_jax.sim.sweep.run_sweep`) on its local devices, with no communication while
playing; the metrics are then gathered with one ``process_allgather``. Seeds fix every run's
environment draw and round keys, so the gathered result is the one-process sweep's. Every process
calls :func:`initialize` first, then :func:`run_sweep` with the same experiments, rounds and
seeds; ``docs/sweeps.md`` shows the launch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import numpy as np
from jax.experimental import multihost_utils

from bandits_jax.sim import sharding as sh
from bandits_jax.sim import sweep
from bandits_jax.sim.chunks import ChunkFn, run_chunked

__all__ = ["initialize", "share", "run_sweep"]


def initialize(
    coordinator_address: str,
    num_processes: int,
    process_id: int,
    *,
    cpu_collectives: str = "gloo",
    local_device_ids: Sequence[int] | None = None,
    initialization_timeout: int = 300,
) -> None:
    """``jax.distributed.initialize`` with CPU collectives enabled (call before any JAX work).

    Args:
      coordinator_address: ``"host:port"`` of process 0, reachable from every process.
      process_id: this process's rank, ``0 <= process_id < num_processes``.
      cpu_collectives: ``jax_cpu_collectives_implementation`` for CPU processes (``"gloo"``;
        ``"mpi"`` where JAX was built with it).
      local_device_ids: restrict this process to some of its local accelerators.
      initialization_timeout: seconds to wait for every process to join.
    """
    if not isinstance(num_processes, int) or num_processes < 1:
        raise ValueError(f"num_processes: expected a positive int, got {num_processes!r}")
    if not isinstance(process_id, int) or not 0 <= process_id < num_processes:
        raise ValueError(f"process_id: expected an int in [0, {num_processes}), got {process_id!r}")
    if ":" not in coordinator_address:
        raise ValueError(f"coordinator_address: expected 'host:port', got {coordinator_address!r}")
    jax.config.update("jax_cpu_collectives_implementation", cpu_collectives)
    jax.distributed.initialize(
        coordinator_address=coordinator_address,
        num_processes=num_processes,
        process_id=process_id,
        local_device_ids=local_device_ids,
        initialization_timeout=initialization_timeout,
    )


def share(num_runs: int, num_processes: int, process_id: int) -> tuple[int, int, int]:
    """``(start, stop, size)``: process ``process_id`` plays runs ``start .. stop - 1``; every
    share is padded to ``size = ceil(num_runs / num_processes)`` runs so that all processes
    compile and gather the same shapes."""
    size = max(1, math.ceil(num_runs / num_processes))
    start = min(process_id * size, num_runs)
    return start, min(start + size, num_runs), size


def run_sweep(
    experiments: Sequence[sweep.Experiment],
    *,
    num_rounds: int,
    seeds: Sequence[int],
    chunk_size: int | None = None,
    fields: Sequence[str] | None = None,
    gather: str = "all",
) -> sweep.SweepResult | None:
    """:func:`bandits_jax.sim.sweep.run_sweep` spread over the ``jax.distributed`` processes,
    each playing its :func:`share` of every experiment's runs; with one process, a plain sweep.

    Args:
      gather: ``"all"`` (every process returns the full result) or ``"process0"`` (other
        processes return ``None``; the gather itself is still collective).

    Returns:
      The :class:`bandits_jax.sim.sweep.SweepResult`, with this process's ``run_seconds`` and
      ``compile_seconds`` and all processes' ``devices``.
    """
    if gather not in ("all", "process0"):
        raise ValueError(f"gather: expected 'all' or 'process0', got {gather!r}")
    seeds = sweep.checked_seeds(experiments, seeds)
    P, p = jax.process_count(), jax.process_index()
    local = jax.local_devices()
    mesh = sh.run_mesh(local) if len(local) > 1 else None
    states, sizes = [], []
    for exp in experiments:
        R = exp.grid_size * len(seeds)
        start, _, size = share(R, P, p)
        runs = sweep.build_runs(exp, seeds, np.clip(np.arange(start, start + size), 0, R - 1))
        if mesh is not None:  # padding repeats a run; ChunkFn places the batch on the local mesh
            runs, _ = sh.pad_runs(runs, mesh.size)
        states.append(runs)
        sizes.append(size)
    chunk_fn = ChunkFn(tuple(e.step for e in experiments), batched=True, mesh=mesh)
    res = run_chunked(
        chunk_fn,
        tuple(states),
        num_rounds,
        chunk_size=chunk_size or max(num_rounds, 1),
        keep=sweep.keep_fields(fields, experiments),
    )
    mine = tuple(
        {k: np.asarray(v)[:size] for k, v in m.items()}
        for m, size in zip(res.metrics, sizes, strict=True)
    )
    # tiled: the processes' shares concatenated along the run axis, in run order
    joined = multihost_utils.process_allgather(mine, tiled=True) if P > 1 else mine
    if gather == "process0" and p != 0:
        return None
    stats = res.stats
    exps = sweep.collect(experiments, joined, seeds)
    return sweep.SweepResult(
        exps, num_rounds, stats.run_seconds, stats.compile_seconds, len(jax.devices())
    )
