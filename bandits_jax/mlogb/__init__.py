"""Multinomial logistic bandits: EOFD-MLogB and its full-Hessian parent OFUL-MLogB, and the
baselines in the same protocol (uniform random, greedy online Newton, LinUCB and its sketched
SOFUL, ada-OFU-ECOLog, linear and logistic Thompson sampling, the exact-fit reference).

The face holds the learner factories, the hyperparameter builders ``hyperparams`` and
``section4``, the recipes ``tuned`` and ``practical`` and the runner step ``interact``; the rest
stays in its module, e.g. ``from bandits_jax.mlogb.linucb import LinUCBState``.

Paper: He, Zhang, Yang, Zhang, "Efficient Multinomial Logistic Bandit via Frequent Directions".
"""

from bandits_jax.mlogb.ecolog import ecolog
from bandits_jax.mlogb.eofd import eofd
from bandits_jax.mlogb.eofd_buffer import eofd_buffered
from bandits_jax.mlogb.exact import exact
from bandits_jax.mlogb.greedy import greedy
from bandits_jax.mlogb.hparams import hyperparams, section4
from bandits_jax.mlogb.interact import interact
from bandits_jax.mlogb.lin_ts import lin_ts
from bandits_jax.mlogb.linucb import linucb
from bandits_jax.mlogb.logistic_ts import logistic_ts
from bandits_jax.mlogb.oful import oful
from bandits_jax.mlogb.recipes import practical, tuned
from bandits_jax.mlogb.soful import soful
from bandits_jax.mlogb.uniform import uniform

__all__ = [
    "ecolog",
    "eofd",
    "eofd_buffered",
    "exact",
    "greedy",
    "hyperparams",
    "interact",
    "lin_ts",
    "linucb",
    "logistic_ts",
    "oful",
    "practical",
    "section4",
    "soful",
    "tuned",
    "uniform",
]
