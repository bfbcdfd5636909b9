"""Shared simulation machinery: scan over rounds, vmap over trials and grids."""

from bandits_jax.sim.runner import RunState, StepFn, init_run, make_rollout, play, rollout

__all__ = ["RunState", "StepFn", "init_run", "make_rollout", "play", "rollout"]
