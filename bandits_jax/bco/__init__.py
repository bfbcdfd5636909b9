"""Bandit convex optimisation with gradient variation.

Paper: "Improved Dimension Dependence for Bandit Convex Optimization with Gradient Variation".
The learners are ``bandits_jax.Learner``s; :func:`interact` (``rounds``) plays
them on any ``bandits_jax.protocols.BCOEnv``. Modules: ``domains`` (Assumption 1 geometry,
projection onto ``(1 - xi) X``), ``estimators`` (eq. 2.2 coordinate estimator with optimism, the
sphere estimator, ``delta``/``xi``), ``schedules`` (step sizes of Theorems 1-4 and the Chiang et
al. 2013 baseline, as optax stateful schedules), ``two_point`` (Algorithms 1 and 3, and their
steps as optax transformations), ``rounds`` (the runner step :func:`interact` and the regret
bookkeeping :func:`summarize`), ``one_point`` (Algorithms 2/4 on boxes), ``meta``
(Optimistic-Hedge and Optimistic-Adapt-ML-Prod) and ``ensembles`` (Algorithms 5/6).

The face holds the learner factories, ``from_preset`` and ``PRESETS``, the domains ``ball`` and
``box``, and ``interact`` and ``summarize``; state, hyperparameter and metric classes, the
estimators, schedules, meta-learners and optax steps stay in their modules, e.g.
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
