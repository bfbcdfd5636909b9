"""The optax forms of Algorithm 1's and Algorithm 3's steps give the learners' iterates."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from bandits_jax.bco import domains as dom
from bandits_jax.bco import estimators as est
from bandits_jax.bco import schedules as sch
from bandits_jax.bco import two_point as tp

D, T = 4, 30


def _loss(x):
    target = jnp.linspace(-1.5, 1.5, D)
    return 0.5 * jnp.sum((x - target) ** 2, axis=-1) + jnp.sum(x**4, axis=-1)


@pytest.mark.parametrize("schedule", ["variance", "convex", "strongly_convex"])
def test_optimistic_ogd_transformation_equals_algorithm_1(schedule):
    learner = tp.two_point_learner(dim=D, schedule=schedule)
    hp = learner.hyperparams(dom.ball(1.0), horizon=T, lam=1.0, offset=float(D * D))
    opt = tp.optimistic_ogd(
        domain=hp.domain, xi=hp.xi, schedule=sch.stateful(schedule, D, hp.schedule)
    )
    # A user's chain: clipping that never binds, then the optimistic step.
    chained = optax.chain(optax.clip_by_global_norm(1e9), opt)
    state = learner.init(hp)
    w = jnp.zeros(D)
    opt_state = chained.init(w)
    g_tilde = jnp.zeros(D)
    for key in jax.random.split(jax.random.key(0), T):
        # The learner's round.
        points, aux = query = learner.act(state, None, key)
        state = learner.update(state, query, _loss(points))
        # The same round by hand: coordinate estimator on any JAX function, optax step.
        points2, aux2 = tp.coordinate_query(w, hp.delta, key)
        g, g_tilde_next, _ = tp.coordinate_feedback(g_tilde, aux2, _loss(points2))
        updates, opt_state = chained.update(g, opt_state, w, hint=g_tilde_next)
        w, g_tilde = optax.apply_updates(w, updates), g_tilde_next
        np.testing.assert_allclose(np.asarray(w), np.asarray(state.w), rtol=1e-10, atol=1e-12)
    assert float(jnp.linalg.norm(state.w)) > 0.1  # it moved


def test_projected_gd_transformation_equals_algorithm_3():
    learner = tp.sphere_learner(dim=D, schedule="sqrt_t")
    hp = learner.hyperparams(dom.box(-jnp.ones(D), jnp.ones(D)), horizon=T)
    opt = tp.projected_gd(
        domain=hp.domain, xi=hp.xi, schedule=sch.stateful("sqrt_t", D, hp.schedule)
    )
    state, w = learner.init(hp), jnp.zeros(D)
    opt_state = opt.init(w)
    for key in jax.random.split(jax.random.key(1), T):
        points, aux = query = learner.act(state, None, key)
        state = learner.update(state, query, _loss(points))
        u = est.sample_sphere(key, D, w.dtype)
        pts, spacing = est.sphere_queries(w, u, hp.delta)
        g = est.sphere_estimate(_loss(pts), u, spacing)
        updates, opt_state = opt.update(g, opt_state, w)
        w = optax.apply_updates(w, updates)
        np.testing.assert_allclose(np.asarray(w), np.asarray(state.w), rtol=1e-10, atol=1e-12)


def test_stateful_schedule_is_an_optax_stateful_schedule():
    hp = tp.two_point_learner(dim=2, schedule="variance").hyperparams(dom.ball(1.0), horizon=10)
    s = sch.stateful("variance", 2, hp.schedule)
    assert isinstance(s, optax.schedules.StatefulSchedule)
    st = s.update(s.init(), err_sq=jnp.asarray(5.0))
    np.testing.assert_allclose(float(s(st)), 1.0 / np.sqrt(4.0 + 5.0), rtol=1e-14)


def test_learner_hyperparams_grid_broadcasts():
    learner = tp.two_point_learner(dim=2, schedule="strongly_convex")
    hp = learner.hyperparams(
        dom.ball(1.0), horizon=10, lam=np.array([[1.0], [2.0]]), scale=np.array([0.5, 1.0, 2.0])
    )
    assert hp.schedule.lam.shape == (2, 3) and hp.delta.shape == (2, 3)
    np.testing.assert_array_equal(np.asarray(hp.schedule.scale[1]), [0.5, 1.0, 2.0])
    one = learner.hyperparams(dom.ball(1.0), horizon=10, lam=2.0, scale=1.0)
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(a[1, 1], b), hp, one)
