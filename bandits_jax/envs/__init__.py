"""Environments as pure functions of PRNG keys."""

from bandits_jax.envs.synthetic_mlogb import MLogBEnv, SyntheticState, synthetic_mlogb

__all__ = ["MLogBEnv", "SyntheticState", "synthetic_mlogb"]
