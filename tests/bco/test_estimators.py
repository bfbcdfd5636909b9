"""Eq. (2.2) coordinate estimator with optimism, Lemma 6 (i) and (xi), the sphere estimator,
delta / xi (with the float32 floor) and the step-size schedules."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.bco import estimators as est
from bandits_jax.bco import schedules as sch

D = 5


def _smooth_f(x, a):
    """f(x) = sum_k softplus(a_k . x): L = sum_k ||a_k||^2 / 4, non-zero third derivative."""
    return jnp.sum(jax.nn.softplus(a @ x))


A = jnp.asarray(np.random.default_rng(0).normal(size=(3, D)))
L_SMOOTH = float(jnp.sum(A * A)) / 4.0


@jax.jit
def _one_round(g_tilde, w, i, delta):
    pts, spacing = est.coordinate_queries(w, i, delta)
    vals = jax.vmap(_smooth_f, in_axes=(0, None))(pts, A)
    v = est.directional_derivative(vals, spacing)
    g, gt_next = est.coordinate_estimate(g_tilde, i, v)
    return g, gt_next, v, est.coordinate_error_sq(g_tilde, i, v)


def test_difference_supported_on_drawn_coordinate():
    rng = np.random.default_rng(1)
    g_tilde = jnp.asarray(rng.normal(size=D))
    w = jnp.asarray(rng.normal(size=D) * 0.3)
    for i in range(D):
        g, gt_next, v, err = _one_round(g_tilde, w, jnp.int32(i), 1e-4)
        mask = np.arange(D) != i
        np.testing.assert_array_equal(np.asarray(g - g_tilde)[mask], 0.0)
        np.testing.assert_array_equal(np.asarray(gt_next - g_tilde)[mask], 0.0)
        assert float(gt_next[i]) == float(v)
        assert np.isclose(float(g[i] - g_tilde[i]), D * (float(v) - float(g_tilde[i])))
        assert np.isclose(float(err), float(jnp.sum((g - g_tilde) ** 2)))


def test_optimism_holds_latest_directional_derivative():
    """Lemma 6 (i): g~_{t,i} = v_{alpha}, the estimate of the last round that drew i (0 if none)."""
    rng = np.random.default_rng(2)
    T = 40
    idx = jnp.asarray(rng.integers(0, D, size=T), jnp.int32)
    vs = jnp.asarray(rng.normal(size=T))

    def body(gt, iv):
        i, v = iv
        g, gt_next = est.coordinate_estimate(gt, i, v)
        return gt_next, (gt, g)

    _, (gts, gs) = jax.lax.scan(body, jnp.zeros(D), (idx, vs))
    latest = np.zeros(D)
    for t in range(T):
        np.testing.assert_array_equal(np.asarray(gts[t]), latest)  # g~_t before round t
        latest[int(idx[t])] = float(vs[t])
        # eq. 2.2 in full: g_t = d (v_t - g~_{t,i}) e_i + g~_t
        expect = np.asarray(gts[t]).copy()
        i = int(idx[t])
        expect[i] += D * (float(vs[t]) - expect[i])
        np.testing.assert_allclose(np.asarray(gs[t]), expect, rtol=1e-14)


def test_expected_estimate_matches_gradient_within_lemma6_bias():
    """Lemma 6 (xi): ||E_t[g_t] - grad f(w)|| <= sqrt(d) L delta / 2, whatever g~_t is.

    Exact expectation (average over the d equally likely coordinates) and a Monte Carlo average."""
    rng = np.random.default_rng(3)
    w = jnp.asarray(rng.normal(size=D) * 0.3)
    g_tilde = jnp.asarray(rng.normal(size=D) * 2.0)
    grad = np.asarray(jax.grad(_smooth_f)(w, A))
    delta = 0.2  # large, so the central-difference bias is visible
    bound = math.sqrt(D) * L_SMOOTH * delta / 2
    rounds = jax.vmap(_one_round, in_axes=(None, None, 0, None))
    g_all = np.asarray(rounds(g_tilde, w, jnp.arange(D, dtype=jnp.int32), delta)[0])
    exact_mean = g_all.mean(axis=0)
    bias = np.linalg.norm(exact_mean - grad)
    assert bias <= bound
    assert bias > 0  # the check is not vacuous: softplus has a real central-difference bias
    # Monte Carlo over i_t ~ U[d]
    n = 20000
    draws = jax.random.randint(jax.random.key(0), (n,), 0, D, dtype=jnp.int32)
    g_mc = np.asarray(rounds(g_tilde, w, draws, delta)[0])
    se = g_mc.std(axis=0) / math.sqrt(n)
    assert np.all(np.abs(g_mc.mean(axis=0) - grad) <= 5 * se + bound)
    # without the optimism correction (g~ ignored) the MC mean would not be unbiased
    assert np.linalg.norm(np.asarray(g_tilde) - grad) > 10 * bound


def test_sphere_estimate_expectation():
    """E[d/(2 delta)(f(w+du)-f(w-du)) u] = grad of the smoothed f, ~grad f for small delta."""
    w = jnp.asarray(np.random.default_rng(4).normal(size=D) * 0.3)
    grad = np.asarray(jax.grad(_smooth_f)(w, A))
    keys = jax.random.split(jax.random.key(1), 40000)

    @jax.jit
    def g_of(key):
        u = est.sample_sphere(key, D, w.dtype)
        pts, spacing = est.sphere_queries(w, u, 1e-3)
        vals = jax.vmap(_smooth_f, in_axes=(0, None))(pts, A)
        return est.sphere_estimate(vals, u, spacing)

    gs = np.asarray(jax.vmap(g_of)(keys))
    se = gs.std(axis=0) / math.sqrt(len(gs))
    assert np.all(np.abs(gs.mean(axis=0) - grad) <= 5 * se + 1e-3)


def test_exploration_delta_and_float32_floor():
    d, T, L, R = 20, 10_000, 2.0, 1.0
    delta64, xi64 = est.exploration(d, T, L, R, R, jnp.float64)
    assert np.isclose(delta64, 1.0 / (2 * d * d * L * T * R))  # the theorem's value
    assert np.isclose(xi64, delta64)
    delta32, _ = est.exploration(d, T, L, R, R, jnp.float32)
    assert delta32 == pytest.approx(R * np.finfo(np.float32).eps ** 0.5)
    # linear losses: L = 0 uses L >= 1
    assert np.isclose(est.exploration(d, T, 0.0, R, R, jnp.float64)[0], 1 / (2 * d * d * T * R))
    with pytest.raises(ValueError, match="delta"):
        est.exploration(d, T, L, R, 1e-3, jnp.float64, delta=0.01)

    # At the floor the float32 central difference has a small error; at the theorem's delta it
    # is garbage (errata 12).
    x = np.random.default_rng(5).uniform(-0.5, 0.5, size=d)
    f = lambda z: jnp.sum(jnp.cos(z)) + 3.0  # noqa: E731
    true = -np.sin(x[3])

    def fd(delta):
        w = jnp.asarray(x, jnp.float32)
        pts, sp = est.coordinate_queries(w, jnp.int32(3), delta)
        vals = jax.vmap(f)(pts)
        return float(est.directional_derivative(vals, sp))

    assert abs(fd(delta32) - true) < 0.01
    assert abs(fd(1.0 / (2 * d * d * L * T * R)) - true) > 0.05


def test_schedules_formulas():
    d, R, T, lam, G = 4, 2.0, 100, 0.5, 3.0
    st = sch.ScheduleState(jnp.int32(9), jnp.asarray(7.0))  # before round t = 10, Vbar_9 = 7
    p = sch.schedule_params(sch.CONVEX, d, radius=R, horizon=T, lam=lam, lipschitz=G)
    c = 1152 * d**3 * R**2 * math.log(d * T)
    assert np.isclose(float(sch.step_size(sch.CONVEX, d, p, st)), R / math.sqrt(c + 7.0))
    p2 = sch.schedule_params(sch.CONVEX, d, radius=R, horizon=T, offset="d2", scale=2.0)
    assert np.isclose(float(sch.step_size(sch.CONVEX, d, p2, st)), 2 * R / math.sqrt(d * d + 7))
    pv = sch.schedule_params(sch.VARIANCE, d, radius=R, horizon=T)
    assert np.isclose(float(sch.step_size(sch.VARIANCE, d, pv, st)), R / math.sqrt(d * d + 7.0))
    ps = sch.schedule_params(sch.STRONGLY_CONVEX, d, radius=R, horizon=T, lam=lam)
    assert np.isclose(float(sch.step_size(sch.STRONGLY_CONVEX, d, ps, st)), 1 / (lam * 10))
    pc = sch.schedule_params(sch.CHIANG, d, radius=R, horizon=T, lam=lam, lipschitz=G)
    expect = 1 / (lam * (1 + 7.0 / (4 * d * d * G * G)))
    assert np.isclose(float(sch.step_size(sch.CHIANG, d, pc, st)), expect)
    pq = sch.schedule_params(sch.SQRT_T, d, radius=R, horizon=T, lipschitz=G)
    assert np.isclose(float(sch.step_size(sch.SQRT_T, d, pq, st)), R / (G * math.sqrt(d * 10)))
    st2 = sch.advance(st, jnp.asarray(5.0))
    assert int(st2.t) == 10 and float(st2.vbar) == 12.0


def test_schedule_bad_input():
    with pytest.raises(ValueError, match="lam"):
        sch.schedule_params(sch.STRONGLY_CONVEX, 3, radius=1.0, horizon=10)
    with pytest.raises(ValueError, match="lam"):
        sch.schedule_params(sch.CHIANG, 3, radius=1.0, horizon=10, lam=-1.0)
    with pytest.raises(ValueError, match="radius"):
        sch.schedule_params(sch.VARIANCE, 3, radius=0.0, horizon=10)
    with pytest.raises(ValueError, match="kind"):
        sch.schedule_params("nope", 3, radius=1.0, horizon=10)
    with pytest.raises(ValueError, match="scale"):
        sch.schedule_params(sch.VARIANCE, 3, radius=1.0, horizon=10, scale=0.0)


def test_presets_build():
    from bandits_jax.bco import domains as dom
    from bandits_jax.bco import two_point as tp

    def two_rounds(learner, hp):
        state = learner.init(hp)
        for t in range(2):
            points, aux = query = learner.act(state, None, jax.random.key(t))
            state = learner.update(state, query, jnp.sum(points**2, axis=-1))
        return state.w

    for name, p in sch.PRESETS.items():
        learner, hp = tp.from_preset(name, dim=4, domain=dom.ball(1.0), horizon=100, lam=1.0)
        # the same as the preset's factory and kind built by hand
        direct = (tp.sphere_learner if p.algorithm == "alg3" else tp.two_point_learner)(
            dim=4, schedule=p.kind
        )
        hp_direct = direct.hyperparams(dom.ball(1.0), horizon=100, lam=1.0)
        np.testing.assert_array_equal(two_rounds(learner, hp), two_rounds(direct, hp_direct))
        if p.kind == sch.CONVEX:
            assert np.isclose(float(hp.schedule.offset), sch.theorem1_offset(4, 1.0, 1.0, 100))
    # The old names (0.1's aliases) and unknown names are a ValueError naming ``name``.
    for old in ("theorem1", "theorem3", "practical_convex", "sphere_convex", "fastest"):
        with pytest.raises(ValueError, match="name"):
            tp.from_preset(old, dim=4, domain=dom.ball(1.0), horizon=100)
