"""Environments as pure functions of PRNG keys.

MLogB environments (``init``, ``observe``, ``outcome``, ``expected_rewards``): the Section 4
synthetic stream, its low-rank and heavy-tailed variants, replays of recorded streams, and
classification data as a bandit. BCO loss families live in :mod:`bandits_jax.envs.bco_losses`.
Named settings (``make("synth-100-4", S=8)``, ``parse``, the grammar) are
:mod:`bandits_jax.envs.registry`'s. The face holds the factories, ``make`` and ``parse``; state
classes, ``replay_state`` and the MNIST reader stay in their modules
(``from bandits_jax.envs.mnist import MNISTNotFoundError``).
"""

# The MNIST reader module loads first, so that the factory ``mnist`` below is what ``envs.mnist``
# names (a submodule loaded later would rebind the package attribute to itself).
from bandits_jax.envs import mnist as _mnist_reader  # noqa: F401
from bandits_jax.envs.classification import (
    breast_cancer,
    classification_bandit,
    digits,
    digits_multinomial,
    iris,
    mnist,
    wine,
)
from bandits_jax.envs.heavy_tail_mlogb import heavy_tail_mlogb
from bandits_jax.envs.lowrank_mlogb import lowrank_mlogb
from bandits_jax.envs.registry import Setting, SettingSpec, make, parse
from bandits_jax.envs.replay import replay_mlogb
from bandits_jax.envs.synthetic_mlogb import synthetic_mlogb

__all__ = [
    "breast_cancer",
    "classification_bandit",
    "digits",
    "digits_multinomial",
    "heavy_tail_mlogb",
    "iris",
    "lowrank_mlogb",
    "make",
    "mnist",
    "parse",
    "replay_mlogb",
    "Setting",
    "SettingSpec",
    "synthetic_mlogb",
    "wine",
]
