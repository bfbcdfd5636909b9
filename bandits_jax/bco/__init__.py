"""Bandit convex optimisation with gradient variation.

Paper: "Improved Dimension Dependence for Bandit Convex Optimization with Gradient Variation".
The learners follow ``bandits_jax.protocols.BCOLearner``; :func:`interact` (``rounds``) plays
them on any ``bandits_jax.protocols.BCOEnv``. Modules: ``domains`` (Assumption 1 geometry,
projection onto ``(1 - xi) X``), ``estimators`` (eq. 2.2 coordinate estimator with optimism, the
sphere estimator, ``delta``/``xi``), ``schedules`` (step sizes of Theorems 1-4 and the Chiang et
al. 2013 baseline, as optax stateful schedules), ``two_point`` (Algorithms 1 and 3, and their
steps as optax transformations), ``rounds`` (the runner step :func:`interact` and the regret
bookkeeping :func:`summarize`), ``one_point`` (Algorithms 2/4 on boxes), ``meta``
(Optimistic-Hedge and Optimistic-Adapt-ML-Prod) and ``ensembles`` (Algorithms 5/6).
"""

from bandits_jax.bco import ensembles, one_point, rounds, schedules, two_point
from bandits_jax.bco.domains import Ball, Box, ball, box, project
from bandits_jax.bco.ensembles import (
    DynamicState,
    UniversalState,
    dynamic_ensemble,
    universal_ensemble,
)
from bandits_jax.bco.estimators import (
    coordinate_estimate,
    coordinate_queries,
    directional_derivative,
    exploration,
    sphere_estimate,
    sphere_queries,
)
from bandits_jax.bco.meta import (
    AdaptMLProdState,
    OptimisticHedgeState,
    adapt_ml_prod_init,
    adapt_ml_prod_update,
    optimistic_hedge_init,
    optimistic_hedge_update,
)
from bandits_jax.bco.one_point import BoxFTRLState, box_ftrl
from bandits_jax.bco.rounds import (
    BCOMetrics,
    BCOSummary,
    hindsight_loss,
    interact,
    regret_curve,
    summarize,
)
from bandits_jax.bco.schedules import (
    PRESETS,
    Preset,
    ScheduleParams,
    ScheduleState,
    VariationSchedule,
    stateful,
    step_size,
)
from bandits_jax.bco.two_point import (
    CoordAux,
    Learner,
    SphereAux,
    SphereState,
    TwoPointHyperparams,
    TwoPointState,
    from_preset,
    oogd_step,
    optimistic_ogd,
    projected_gd,
    sphere_learner,
    two_point_learner,
)

__all__ = [
    "BCOMetrics",
    "BCOSummary",
    "VariationSchedule",
    "ensembles",
    "one_point",
    "rounds",
    "optimistic_ogd",
    "projected_gd",
    "schedules",
    "stateful",
    "two_point",
    "AdaptMLProdState",
    "BoxFTRLState",
    "DynamicState",
    "OptimisticHedgeState",
    "UniversalState",
    "adapt_ml_prod_init",
    "adapt_ml_prod_update",
    "box_ftrl",
    "dynamic_ensemble",
    "optimistic_hedge_init",
    "optimistic_hedge_update",
    "universal_ensemble",
    "Ball",
    "Box",
    "CoordAux",
    "Learner",
    "PRESETS",
    "Preset",
    "ScheduleParams",
    "ScheduleState",
    "SphereAux",
    "SphereState",
    "TwoPointHyperparams",
    "TwoPointState",
    "ball",
    "box",
    "coordinate_estimate",
    "coordinate_queries",
    "directional_derivative",
    "exploration",
    "from_preset",
    "hindsight_loss",
    "interact",
    "oogd_step",
    "project",
    "regret_curve",
    "sphere_estimate",
    "sphere_learner",
    "sphere_queries",
    "step_size",
    "summarize",
    "two_point_learner",
]
