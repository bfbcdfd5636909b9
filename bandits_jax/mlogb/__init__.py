"""Multinomial logistic bandits: EOFD-MLogB and its full-Hessian parent OFUL-MLogB, and the
baselines in the same protocol (uniform random, greedy online Newton, LinUCB, ada-OFU-ECOLog,
linear and logistic Thompson sampling)
and the exact-fit reference (the regularised MLE refitted every round, O(t) a round).

Paper: He, Zhang, Yang, Zhang, "Efficient Multinomial Logistic Bandit via Frequent Directions".
"""

from bandits_jax.mlogb.bonus import argmax_tie
from bandits_jax.mlogb.ecolog import ECOLogHyperparams, ECOLogState, ecolog, ecolog_hyperparams
from bandits_jax.mlogb.eofd import EOFDState, eofd
from bandits_jax.mlogb.eofd_buffer import EOFDBufferState, eofd_buffered
from bandits_jax.mlogb.exact import ExactHyperparams, ExactState, exact, exact_hyperparams
from bandits_jax.mlogb.greedy import greedy
from bandits_jax.mlogb.hparams import MLogBHyperparams, Section4, hyperparams, section4
from bandits_jax.mlogb.interact import MLogBMetrics, interact
from bandits_jax.mlogb.learner import MLogBFunctions, UpdateInfo
from bandits_jax.mlogb.lin_ts import LinTSHyperparams, LinTSState, lin_ts, lin_ts_hyperparams
from bandits_jax.mlogb.linucb import LinUCBHyperparams, LinUCBState, linucb, linucb_hyperparams
from bandits_jax.mlogb.logistic_ts import (
    LogisticTSHyperparams,
    LogisticTSState,
    logistic_ts,
    logistic_ts_hyperparams,
)
from bandits_jax.mlogb.oful import OFULState, oful
from bandits_jax.mlogb.recipes import Tuned, practical, tuned
from bandits_jax.mlogb.uniform import (
    UniformHyperparams,
    UniformState,
    uniform,
    uniform_hyperparams,
)

__all__ = [
    "ECOLogHyperparams",
    "ECOLogState",
    "EOFDBufferState",
    "EOFDState",
    "ExactHyperparams",
    "ExactState",
    "LinTSHyperparams",
    "LinTSState",
    "LinUCBHyperparams",
    "LinUCBState",
    "LogisticTSHyperparams",
    "LogisticTSState",
    "MLogBHyperparams",
    "MLogBFunctions",
    "MLogBMetrics",
    "OFULState",
    "Section4",
    "Tuned",
    "UniformHyperparams",
    "UniformState",
    "UpdateInfo",
    "argmax_tie",
    "ecolog",
    "ecolog_hyperparams",
    "eofd",
    "eofd_buffered",
    "exact",
    "exact_hyperparams",
    "greedy",
    "hyperparams",
    "interact",
    "lin_ts",
    "lin_ts_hyperparams",
    "linucb",
    "linucb_hyperparams",
    "logistic_ts",
    "logistic_ts_hyperparams",
    "oful",
    "practical",
    "section4",
    "tuned",
    "uniform",
    "uniform_hyperparams",
]
