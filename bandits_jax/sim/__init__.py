"""One runner for every learner: scan over rounds, vmap over trials and grids, chunks with
progress and checkpoints, sharding over devices, sweeps with honest tuning."""

from bandits_jax.sim.checkpoint import CheckpointError, restore, save
from bandits_jax.sim.chunks import ChunkFn, ChunkStats, Progress, run_chunked
from bandits_jax.sim.runner import (
    RunState,
    StepFn,
    init_run,
    make_rollout,
    play,
    rollout,
)
from bandits_jax.sim.sharding import run_mesh, shard_runs
from bandits_jax.sim.sweep import Experiment, run_sweep, table, tune_and_evaluate

__all__ = [
    "CheckpointError",
    "ChunkFn",
    "ChunkStats",
    "Experiment",
    "Progress",
    "RunState",
    "StepFn",
    "init_run",
    "make_rollout",
    "play",
    "restore",
    "rollout",
    "run_chunked",
    "run_mesh",
    "run_sweep",
    "save",
    "shard_runs",
    "table",
    "tune_and_evaluate",
]
