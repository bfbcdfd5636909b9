"""One runner for every learner: scan over rounds, vmap over trials and grids, chunks with
progress and checkpoints, sharding over devices, sweeps with honest tuning.

The face holds the runners, sweeps, sharding and checkpoints; the run carry (``RunState``,
``init_run``, ``play``), the chunk machinery and the error classes stay in their modules, e.g.
``from bandits_jax.sim.runner import play``."""

from bandits_jax.sim.checkpoint import restore, save
from bandits_jax.sim.chunks import run_chunked
from bandits_jax.sim.runner import make_rollout, rollout
from bandits_jax.sim.sharding import run_mesh, shard_runs
from bandits_jax.sim.sweep import Experiment, run_sweep, table, tune_and_evaluate

__all__ = [
    "Experiment",
    "make_rollout",
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
