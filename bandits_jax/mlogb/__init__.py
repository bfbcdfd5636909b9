"""Multinomial logistic bandits: EOFD-MLogB and its full-Hessian parent OFUL-MLogB.

Paper: He, Zhang, Yang, Zhang, "Efficient Multinomial Logistic Bandit via Frequent Directions".
"""

from bandits_jax.mlogb.bonus import argmax_tie
from bandits_jax.mlogb.eofd import EOFDState, eofd
from bandits_jax.mlogb.hyperparams import MLogBHyperparams, Section4, hyperparams, section4
from bandits_jax.mlogb.interact import MLogBMetrics, interact
from bandits_jax.mlogb.learner import MLogBLearner, UpdateInfo
from bandits_jax.mlogb.oful import OFULState, oful

__all__ = [
    "EOFDState",
    "MLogBHyperparams",
    "MLogBLearner",
    "MLogBMetrics",
    "OFULState",
    "Section4",
    "UpdateInfo",
    "argmax_tie",
    "eofd",
    "hyperparams",
    "interact",
    "oful",
    "section4",
]
