"""Sweeps spread over several processes (and machines) with ``jax.distributed``.

Every process plays its own contiguous share of each experiment's flattened (grid x seed) runs
(run ``g * N + n`` is grid point ``g`` on seed ``n``, as in :func:`bandits_jax.sim.sweep.run_sweep`)
on its own local devices, with no communication while playing; the per-round metrics are then
gathered with one ``process_allgather``. Seeds give every run the same environment draw and
round keys wherever it is played, so the gathered result is the one-process sweep's.

Usage on several machines: start the same script on every machine (or several processes on one
machine), each with its rank, before anything else touches JAX::

    from bandits_jax.sim import distributed

    distributed.initialize(
        coordinator_address="10.0.0.1:12345",  # process 0's host and a free port, reachable
        num_processes=4,                       # by all processes
        process_id=rank,                       # 0 .. num_processes - 1
    )
    result = distributed.run_sweep(experiments, num_rounds=T, seeds=range(32))
    if result is not None:                     # process 0 (gather="process0"); every
        print(sweep.table(result))  # process with gather="all"

On CPU, cross-process collectives need an implementation: :func:`initialize` selects gloo
(``jax_cpu_collectives_implementation``; the default "none" cannot gather across processes).
On GPU hosts JAX uses NCCL and one process per host sees all its GPUs (``local_device_ids``
restricts them). Within a process the share is sharded over the local devices
(:mod:`bandits_jax.sim.sharding`), e.g. several host devices on a multi-core CPU via
``XLA_FLAGS=--xla_force_host_platform_device_count=N``. Every process must call
:func:`run_sweep` with the same experiments, rounds and seeds (they compile the same program
and the gather is collective).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

from bandits_jax.sim import sharding as sh
from bandits_jax.sim.chunks import ChunkFn, run_chunked
from bandits_jax.sim.sweep import Experiment, SweepResult, build_runs, collect, keep_fields

__all__ = ["initialize", "share", "run_sweep"]

PyTree = Any


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
      num_processes: number of processes in all.
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
    experiments: Sequence[Experiment],
    *,
    num_rounds: int,
    seeds: Sequence[int],
    chunk_size: int | None = None,
    fields: Sequence[str] | None = None,
    gather: str = "all",
) -> SweepResult | None:
    """:func:`bandits_jax.sim.sweep.run_sweep` spread over the ``jax.distributed`` processes.

    Each process plays its :func:`share` of every experiment's ``G * N`` runs on its local
    devices, then the metrics are gathered. With one process it is an ordinary sweep.

    Args:
      experiments, num_rounds, seeds, chunk_size, fields: as in ``sweep.run_sweep``.
      gather: ``"all"`` (every process returns the full result) or ``"process0"`` (other
        processes return ``None``; the gather itself is still collective).

    Returns:
      :class:`bandits_jax.sim.sweep.SweepResult` with metrics of shape ``(G, N, T)``;
      ``run_seconds`` and ``compile_seconds`` are this process's; ``devices`` counts all
      processes' devices.
    """
    if gather not in ("all", "process0"):
        raise ValueError(f"gather: expected 'all' or 'process0', got {gather!r}")
    if not experiments:
        raise ValueError("experiments: expected at least one")
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: expected at least one")
    P, p = jax.process_count(), jax.process_index()
    local = jax.local_devices()
    mesh = sh.run_mesh(local) if len(local) > 1 else None
    states, shares = [], []
    for exp in experiments:
        R = exp.grid_size * len(seeds)
        start, stop, size = share(R, P, p)
        idx = np.clip(np.arange(start, start + size), 0, R - 1)  # padding repeats a run
        runs = jax.tree_util.tree_map(lambda x, i=idx: x[i], build_runs(exp, seeds))
        if mesh is not None:  # ChunkFn places the padded batch on the local mesh
            runs, _ = sh.pad_runs(runs, mesh.size)
        states.append(runs)
        shares.append((R, size))
    chunk_fn = ChunkFn(tuple(e.step for e in experiments), batched=True, mesh=mesh)
    res = run_chunked(
        chunk_fn,
        tuple(states),
        num_rounds,
        chunk_size=chunk_size or max(num_rounds, 1),
        keep=lambda ms: tuple(
            keep_fields(fields, e.regret)(m) for e, m in zip(experiments, ms, strict=True)
        ),
    )
    mine = tuple(
        {k: np.asarray(v)[:size] for k, v in m.items()}
        for m, (_, size) in zip(res.metrics, shares, strict=True)
    )
    gathered = multihost_utils.process_allgather(mine, tiled=False) if P > 1 else mine
    if gather == "process0" and p != 0:
        return None
    joined = []
    for m, (_, size) in zip(gathered, shares, strict=True):
        # (P, size, T, ...) -> (P * size, T, ...): the processes' shares in run order.
        joined.append(
            {
                k: np.asarray(v).reshape((P * size,) + np.shape(v)[2:]) if P > 1 else np.asarray(v)
                for k, v in m.items()
            }
        )
    return collect(experiments, joined, seeds, num_rounds, res.stats, len(jax.devices()))
