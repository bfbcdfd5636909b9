"""Bandit convex optimisation with gradient variation (the BCO paper's Algorithms 1-6).

Modules: ``learner`` (the family's adapter onto the one learner type: ``Query``, ``from_query``),
``domains`` (Assumption 1, projection onto ``(1 - xi) X``), ``estimators`` (eq. 2.2 and
the sphere estimator, ``delta``/``xi``), ``schedules`` (Theorems 1-4's step sizes as optax
stateful schedules), ``two_point`` (Algorithms 1 and 3, and their optax steps), ``rounds`` (the
runner step :func:`interact`, the regret bookkeeping :func:`summarize`), ``one_point``
(Algorithms 2/4 on boxes), ``meta`` (Optimistic-Hedge, Optimistic-Adapt-ML-Prod) and
``ensembles`` (Algorithms 5/6). The face holds the learner factories, ``from_preset``,
``PRESETS``, ``ball``, ``box``, ``interact`` and ``summarize``; the rest stays in its module, e.g.
``from bandits_jax.bco.two_point import TwoPointState``.
"""

from bandits_jax.bco.domains import ball, box
from bandits_jax.bco.ensembles import dynamic_ensemble, universal_ensemble
from bandits_jax.bco.one_point import box_ftrl
from bandits_jax.bco.rounds import interact, summarize
from bandits_jax.bco.schedules import PRESETS
from bandits_jax.bco.two_point import from_preset, sphere_learner, two_point_learner

__all__ = [
    "PRESETS",
    "ball",
    "box",
    "box_ftrl",
    "dynamic_ensemble",
    "from_preset",
    "interact",
    "sphere_learner",
    "summarize",
    "two_point_learner",
    "universal_ensemble",
]
