"""A grid of BCO hyperparameters is a batch of learner states: one compiled call equals each
grid point run alone (the runner's grid axis, shared with the MLogB learners)."""

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.bco import interact
from bandits_jax.bco import two_point as tp
from bandits_jax.envs import bco_losses as bl
from bandits_jax.sim.runner import make_rollout, rollout


def test_schedule_scale_grid_equals_each_point_alone():
    T = 60
    env = bl.quadratic(3, lam=1.0, base_norm=2.0, amplitude=0.2, omega=0.01)
    learner = tp.two_point_learner(dim=env.d, schedule="variance")
    scales = [0.25, 1.0, 4.0]
    hps = [learner.hyperparams(env.domain, horizon=T, scale=s) for s in scales]
    states = [learner.init(hp) for hp in hps]
    grid = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *states)
    keys = jax.random.split(jax.random.key(3), 2)
    env_states = jax.vmap(env.init)(keys)
    step = interact(learner, env)
    batched = make_rollout(step, T, trials=True, grid=True)(grid, env_states, keys)
    single = jax.jit(lambda s, e, k: rollout(step, s, e, k, T))
    for g, s0 in enumerate(states):
        for i in range(2):
            es = jax.tree_util.tree_map(lambda a, i=i: a[i], env_states)
            ref = single(s0, es, keys[i])
            np.testing.assert_allclose(batched.loss[g, i], ref.loss, rtol=1e-12)
    # The grid points really differ (the scale changes the iterates).
    assert not np.allclose(batched.loss[0], batched.loss[2])
