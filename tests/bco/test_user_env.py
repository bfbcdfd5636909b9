"""A user's own BCO loss sequence needs four things (``protocols.BCOEnv``: ``init``, ``step``,
``loss``, ``domain``) to run with any BCO learner through ``bco.interact`` and
``sim.make_rollout``; the analysis part (``protocols.BCOAnalysis``) is optional and only changes
what the bookkeeping can report, never the run."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import bco, protocols, sim
from bandits_jax.bco.rounds import BCOMetrics
from bandits_jax.envs import bco_losses as bl
from bandits_jax.status import CONVERGED, INACTIVE

D, T, N = 3, 12, 2


class MyState(NamedTuple):
    t: jax.Array
    centre: jax.Array


class MyEnv(NamedTuple):
    init: Any
    step: Any
    loss: Any
    domain: Any


def my_env(domain) -> MyEnv:
    """A drifting quadratic written as a user would: nothing but the four members."""

    def init(key):
        return MyState(jnp.zeros((), jnp.int32), 0.5 * jax.random.normal(key, (D,)))

    def step(state):
        return state._replace(t=state.t + 1)

    def loss(state, t, x):
        c = state.centre * jnp.cos(0.1 * t)
        return 0.5 * jnp.sum((x - c) ** 2, axis=-1)

    return MyEnv(init, step, loss, domain)


LEARNERS = {
    "two_point": lambda dom: (lambda L: (L, L.hyperparams(dom, horizon=T)))(
        bco.two_point_learner(dim=D)
    ),
    "sphere": lambda dom: (lambda L: (L, L.hyperparams(dom, horizon=T)))(
        bco.sphere_learner(dim=D, schedule="sqrt_t")
    ),
    "box_ftrl": lambda dom: (lambda L: (L, L.hyperparams(0.05, dom.lower, dom.upper)))(
        bco.box_ftrl(dim=D)
    ),
}


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_own_four_function_env_runs_through_interact_and_make_rollout(name):
    domain = bco.box(-np.ones(D), np.ones(D)) if name == "box_ftrl" else bco.ball(1.0)
    env = my_env(domain)
    assert isinstance(env, protocols.BCOEnv) and not isinstance(env, protocols.BCOAnalysis)
    learner, hp = LEARNERS[name](domain)
    step = bco.interact(learner, env)
    run = sim.make_rollout(step, T, trials=True)
    keys = jax.random.split(jax.random.key(0), N)
    env_states = jax.vmap(env.init)(keys)
    metrics = run(learner.init(hp), env_states, keys)
    assert isinstance(metrics, BCOMetrics)
    assert metrics.loss.shape == (N, T) and np.all(np.isfinite(np.asarray(metrics.loss)))
    assert np.all(np.asarray(metrics.status) == CONVERGED)
    assert bool(jnp.all(metrics.in_domain))
    assert np.all(np.isnan(np.asarray(metrics.comparator_loss)))  # no analysis part: NaN
    summ = jax.vmap(lambda e, m: bco.summarize(env, e, m, T))(env_states, metrics)
    np.testing.assert_allclose(summ.cum_loss, np.asarray(metrics.loss).sum(-1), rtol=1e-12)
    assert np.all(np.asarray(summ.best_point_status) == INACTIVE)
    assert np.all(np.isnan(np.asarray(summ.regret))) and np.all(np.isnan(np.asarray(summ.W_T)))
    assert int(np.sum(summ.num_failures)) == 0


def test_analysis_is_optional_and_does_not_change_the_run():
    env = bl.quadratic(D, lam=1.0, base_norm=2.0, amplitude=0.2, omega=0.05)
    learner = bco.two_point_learner(dim=D)
    hp = learner.hyperparams(env.domain, horizon=T)
    keys = jax.random.split(jax.random.key(1), N)
    es = jax.vmap(env.init)(keys)
    full = sim.make_rollout(bco.interact(learner, env), T, trials=True)(learner.init(hp), es, keys)
    lean = sim.make_rollout(bco.interact(learner, env, analysis=False), T, trials=True)(
        learner.init(hp), es, keys
    )
    np.testing.assert_array_equal(np.asarray(full.loss), np.asarray(lean.loss))
    assert np.all(np.isfinite(np.asarray(full.comparator_loss)))
    assert np.all(np.isnan(np.asarray(lean.grad_var)))


def test_analysis_requested_of_an_env_without_it_is_refused():
    env = my_env(bco.ball(1.0))
    with pytest.raises(ValueError, match="analysis"):
        bco.interact(bco.two_point_learner(dim=D), env, analysis=True)
