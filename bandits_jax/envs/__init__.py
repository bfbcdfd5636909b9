"""Environments as pure functions of PRNG keys.

MLogB environments (``init``, ``observe``, ``outcome``, ``expected_rewards``): the Section 4
synthetic stream, replays of recorded streams, and classification data as a bandit (digits,
a multinomial digits variant, MNIST). BCO loss families live in :mod:`bandits_jax.envs.bco_losses`.
"""

from bandits_jax.envs.classification import (
    ClassificationEnv,
    classification_bandit,
    digits,
    digits_multinomial,
    mnist,
)
from bandits_jax.envs.mnist import IDXFormatError, MNISTNotFoundError, load_mnist, read_idx
from bandits_jax.envs.replay import ReplayState, replay_mlogb, replay_state
from bandits_jax.envs.synthetic_mlogb import MLogBEnv, SyntheticState, synthetic_mlogb

__all__ = [
    "ClassificationEnv",
    "IDXFormatError",
    "MLogBEnv",
    "MNISTNotFoundError",
    "ReplayState",
    "SyntheticState",
    "classification_bandit",
    "digits",
    "digits_multinomial",
    "load_mnist",
    "mnist",
    "read_idx",
    "replay_mlogb",
    "replay_state",
    "synthetic_mlogb",
]
