"""Environments as pure functions of PRNG keys.

MLogB environments (``init``, ``observe``, ``outcome``, ``expected_rewards``): the Section 4
synthetic stream, a low-rank variant (actions near an r-dimensional subspace), a heavy-tailed
variant (action covariance spectrum ~ i^-decay), replays of recorded
streams, and classification data as a bandit (digits, a multinomial digits variant, MNIST, and
scikit-learn's wine, iris and breast cancer sets). BCO loss families live in
:mod:`bandits_jax.envs.bco_losses`.
"""

from bandits_jax.envs.classification import (
    ClassificationEnv,
    ClassificationState,
    breast_cancer,
    classification_bandit,
    digits,
    digits_multinomial,
    iris,
    mnist,
    wine,
)
from bandits_jax.envs.heavy_tail_mlogb import HeavyTailState, heavy_tail_mlogb
from bandits_jax.envs.lowrank_mlogb import LowRankState, lowrank_mlogb
from bandits_jax.envs.mnist import IDXFormatError, MNISTNotFoundError, load_mnist, read_idx
from bandits_jax.envs.replay import ReplayState, replay_mlogb, replay_state
from bandits_jax.envs.synthetic_mlogb import MLogBEnvFunctions, SyntheticState, synthetic_mlogb

__all__ = [
    "ClassificationEnv",
    "ClassificationState",
    "HeavyTailState",
    "IDXFormatError",
    "LowRankState",
    "MLogBEnvFunctions",
    "MNISTNotFoundError",
    "ReplayState",
    "SyntheticState",
    "breast_cancer",
    "classification_bandit",
    "digits",
    "digits_multinomial",
    "heavy_tail_mlogb",
    "iris",
    "load_mnist",
    "lowrank_mlogb",
    "mnist",
    "read_idx",
    "replay_mlogb",
    "replay_state",
    "synthetic_mlogb",
    "wine",
]
