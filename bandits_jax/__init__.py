"""bandits_jax: provably efficient online learners as compiled, vmappable JAX functions.

Subpackages: ``linalg`` (shared numerics), ``mlogb`` (multinomial logistic bandits, EOFD-MLogB and
OFUL-MLogB), ``bco`` (bandit convex optimisation with gradient variation), ``envs``
(environments), ``sim`` (one runner for every learner), ``cli`` (the ``bandits-jax`` command).
The numpy references the tests compare against live beside the package (``references/``).
:class:`Learner` is the one learner type of both papers (``learner_base``), ``protocols`` holds
the state and environment protocols, ``status`` the one status space of every solve, update and
selection.
"""

from bandits_jax import bco, envs, linalg, mlogb, protocols, sim, status
from bandits_jax.learner_base import Learner
from bandits_jax.status import Status, count_status, raise_on_failure

__version__ = "0.2.0"

__all__ = [
    "Learner",
    "Status",
    "bco",
    "count_status",
    "envs",
    "linalg",
    "mlogb",
    "protocols",
    "raise_on_failure",
    "sim",
    "status",
]
