"""bandits_jax: provably efficient online learners as compiled, vmappable JAX functions.

Subpackages: ``linalg`` (shared numerics), ``mlogb`` (multinomial logistic bandits, EOFD-MLogB and
OFUL-MLogB), ``bco`` (bandit convex optimisation with gradient variation), ``envs``
(environments), ``sim`` (one runner for every learner), ``reference`` (numpy references).
"""

__version__ = "0.1.0"
