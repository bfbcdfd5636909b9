"""Tests of Algorithm 4 (one-point linear bandits on a box): bandits_jax/bco/one_point.py."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.bco import interact, summarize
from bandits_jax.bco import one_point as op
from bandits_jax.bco.domains import Box
from bandits_jax.bco.learner import Query
from bandits_jax.bco.rounds import hindsight_loss
from bandits_jax.envs import bco_losses
from bandits_jax.linalg.roots import CONVERGED, NONFINITE
from bandits_jax.sim.runner import init_run, play, rollout
from references.bco_box_numpy import run_box_ftrl_numpy
from tests import xla_defaults

D = 4
T = 60
LEARNER = op.box_ftrl(dim=D)


def _recording_step(loss_vectors):
    """Round function on ``f_t(x) = <l_t, x>`` that records the draws and iterates (for the
    comparison with the numpy reference, which needs the same ``(i_t, eps_t)``)."""

    def step(learner_state, t, key):
        points, aux = query = LEARNER.act(learner_state, None, key)
        values = points @ loss_vectors[t]
        new_state = LEARNER.update(learner_state, query, values)
        metrics = {
            "loss": values[0],
            "w": learner_state.w,
            "coord": aux.coord,
            "sign": aux.sign,
            "status": new_state.status,
        }
        return new_state, t + 1, metrics

    return step


@functools.partial(xla_defaults.jit, static_argnums=(3,))
def _run(hparams, losses, key, num_rounds):
    """Plays Algorithm 4 on linear losses; returns the per-round metrics and the final state
    (compiled at XLA's defaults: the runs compared with the numpy reference are what users get)."""
    state = LEARNER.init(hparams)
    step = _recording_step(losses)
    run, metrics = play(step, init_run(state, jnp.zeros((), jnp.int32), key), num_rounds)
    return dict(metrics, final=run.learner)


_update = jax.jit(LEARNER.update)
_query = jax.jit(lambda s, k: LEARNER.act(s, None, k))
_solve = jax.jit(functools.partial(op.solve_theta, max_steps=64))


def _losses(seed, shift):
    rng = np.random.default_rng(seed)
    return jnp.asarray(shift + 0.3 * rng.standard_normal((T, D)))


def _paper_F(x, eta, grad_sum, c, lower, upper):
    """Eq. (D.4) evaluated directly in x (numpy float64) and the size of its terms."""
    left, right = x - lower, upper - x
    sqrt_f2 = np.sqrt(1 / left**2 + 1 / right**2)
    f1 = 1 / right - 1 / left
    value = eta * (grad_sum + c * sqrt_f2) + f1
    scale = np.abs(eta * grad_sum) + np.abs(eta * c) * sqrt_f2 + 1 / right + 1 / left
    return value, scale


def test_iterates_strictly_inside_box_and_queries_in_box():
    # A box away from the origin (Algorithm 2's w_1 = 0 would be infeasible; errata 15) and a
    # large step so the iterate is pushed towards the faces.
    lower = jnp.array([1.0, -3.0, 0.5, 10.0])
    upper = jnp.array([2.0, -1.0, 0.6, 10.001])
    hp = LEARNER.hyperparams(5.0, lower, upper)
    losses = _losses(0, jnp.array([3.0, -3.0, 2.0, -1.0]))
    m = _run(hp, losses, jax.random.key(1), T)
    w = np.asarray(m["w"])
    lo, hi = np.asarray(lower), np.asarray(upper)
    assert np.all(w > lo) and np.all(w < hi)
    # The iterate did approach the faces (the test can fail if clipping were missing).
    assert np.max(np.minimum(w[-1] - lo, hi - w[-1]) / (hi - lo)) < 1e-3
    state = LEARNER.init(hp)
    for k in range(20):
        points, _ = aux = _query(state, jax.random.key(k))
        x = np.asarray(points[0])
        assert points.shape == (1, D)
        assert np.all(x >= lo) and np.all(x <= hi)
        state = _update(state, aux, points @ losses[k])
        assert np.all(np.asarray(state.w) > lo) and np.all(np.asarray(state.w) < hi)


def test_first_iterate_is_barrier_minimiser():
    lower = jnp.array([1.0, -3.0, 0.5, 10.0])
    upper = jnp.array([2.0, -1.0, 0.6, 11.0])
    state = LEARNER.init(LEARNER.hyperparams(0.1, lower, upper))
    np.testing.assert_allclose(state.w, 0.5 * (lower + upper), rtol=1e-15)


def test_roots_satisfy_eq_D4():
    rng = np.random.default_rng(3)
    eta = 0.7
    lower = rng.uniform(-2, 0, size=16)
    upper = lower + rng.uniform(0.01, 3, size=16)
    grad_sum = rng.standard_normal(16) * np.array([1, 10, 1e3, 1e6] * 4)
    c = rng.uniform(-0.85, 0.85, size=16) / eta  # |eta c| < 1 (Lemma 11)
    kappa = eta * grad_sum * 0.5 * (upper - lower)
    res = _solve(jnp.asarray(kappa), jnp.asarray(eta * c), jnp.zeros(16))
    assert np.all(np.asarray(res.status) == CONVERGED)
    x = np.asarray(op.point_from_theta(res.x, jnp.asarray(lower), jnp.asarray(upper)))
    assert np.all(x > lower) and np.all(x < upper)
    value, scale = _paper_F(x, eta, grad_sum, c, lower, upper)
    assert np.max(np.abs(value) / scale) < 1e-10
    # A coarse bisection in x on the paper's F brackets the same root.
    lo, hi = lower.copy(), upper.copy()
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        f, _ = _paper_F(mid, eta, grad_sum, c, lower, upper)
        lo, hi = np.where(f < 0, mid, lo), np.where(f < 0, hi, mid)
    np.testing.assert_allclose(x, 0.5 * (lo + hi), rtol=1e-9, atol=1e-12)


def test_update_solves_eq_D4_with_its_own_buffers():
    lower, upper = jnp.array([-1.0, 0.0, 2.0, -5.0]), jnp.array([1.0, 3.0, 2.5, 5.0])
    hp = LEARNER.hyperparams(0.3, lower, upper)
    state = LEARNER.init(hp)
    ell = jnp.array([0.5, -1.0, 2.0, 0.1])
    for k in range(15):
        points, _ = aux = _query(state, jax.random.key(100 + k))
        state = _update(state, aux, points @ ell)
    assert int(state.status) == CONVERGED
    c = 0.5 * (np.asarray(state.r_plus) - np.asarray(state.r_minus))
    assert np.all(np.abs(0.3 * c) < 0.9)  # the cap did not bind: this is the paper's F
    value, scale = _paper_F(
        np.asarray(state.w),
        0.3,
        np.asarray(state.grad_sum),
        c,
        np.asarray(lower),
        np.asarray(upper),
    )
    assert np.max(np.abs(value) / scale) < 1e-10


@pytest.mark.parametrize("cap", [0.9, 0.02])
def test_jax_matches_numpy_reference(cap):
    # cap = 0.02 makes |eta c_i| exceed the cap (Lemma 11's enforced condition binds): both
    # implementations must shrink the optimism the same way.
    eta = 0.05
    lower = jnp.array([-1.0, 0.5, -2.0, 0.0])
    upper = jnp.array([1.0, 1.5, 3.0, 0.2])
    hp = LEARNER.hyperparams(eta, lower, upper, optimism_cap=cap)
    losses = _losses(5, jnp.array([1.0, -0.5, 0.2, 2.0]))
    m = _run(hp, losses, jax.random.key(7), T)
    ref = run_box_ftrl_numpy(
        eta,
        np.asarray(lower),
        np.asarray(upper),
        np.asarray(losses),
        np.asarray(m["coord"]),
        np.asarray(m["sign"]),
        optimism_cap=cap,
    )
    np.testing.assert_allclose(np.asarray(m["w"]), ref["w"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.asarray(m["loss"]), ref["loss"], rtol=1e-9, atol=1e-12)
    final = m["final"]
    np.testing.assert_allclose(np.asarray(final.w), ref["w_final"], rtol=1e-9, atol=1e-12)
    assert (int(final.num_capped) > 0) == (cap < 0.5)


def _expected_gradient(state, ell):
    """E over (i_t, eps_t) of g_t, enumerated exactly (2d outcomes)."""
    coords = jnp.repeat(jnp.arange(D, dtype=jnp.int32), 2)
    signs = jnp.tile(jnp.array([1.0, -1.0]), D)

    def one(i, s):
        sqrt_lam = op.barrier_sqrt_hessian(
            state.theta[i], state.hparams.lower[i], state.hparams.upper[i]
        )
        x = state.w.at[i].add(s / sqrt_lam)
        new = LEARNER.update(state, Query(x[None], op.OnePointAux(i, s, x)), (x @ ell)[None])
        return new.grad_sum - state.grad_sum

    return jnp.mean(jax.vmap(one)(coords, signs), axis=0)


_expected_gradient_jit = jax.jit(_expected_gradient)


@pytest.mark.parametrize("cap", [0.9, 0.02])
def test_estimator_unbiased_with_and_without_cap(cap):
    # E[g_t] = l_t (Appendix D.2) must survive the Lemma 11 cap (module docstring).
    eta = 0.05
    lower, upper = jnp.array([-1.0, 0.0, 1.0, -2.0]), jnp.array([1.0, 2.0, 1.5, 2.0])
    hp = LEARNER.hyperparams(eta, lower, upper, optimism_cap=cap)
    state = LEARNER.init(hp)
    rng = np.random.default_rng(11)
    for k in range(25):
        points, _ = aux = _query(state, jax.random.key(200 + k))
        ell_k = jnp.asarray(rng.standard_normal(D) * 3)
        state = _update(state, aux, points @ ell_k)
    c = 0.5 * (state.r_plus - state.r_minus)
    capped = np.abs(eta * np.asarray(c)) > cap
    assert capped.any() == (cap < 0.5)
    ell = jnp.array([0.3, -1.2, 0.7, 2.0])
    np.testing.assert_allclose(_expected_gradient_jit(state, ell), ell, rtol=1e-9, atol=1e-9)


def test_bad_input():
    lower, upper = jnp.zeros(D), jnp.ones(D)
    with pytest.raises(ValueError, match="lower, upper"):
        LEARNER.hyperparams(0.1, lower, upper.at[2].set(0.0))  # empty box a_i >= b_i
    with pytest.raises(ValueError, match="eta"):
        LEARNER.hyperparams(0.0, lower, upper)
    with pytest.raises(ValueError, match="eta"):
        LEARNER.hyperparams(jnp.nan, lower, upper)
    with pytest.raises(ValueError, match="optimism_cap"):
        LEARNER.hyperparams(0.1, lower, upper, optimism_cap=1.0)
    with pytest.raises(ValueError, match="lower, upper"):
        LEARNER.hyperparams(0.1, jnp.zeros(3), jnp.ones(4))
    with pytest.raises(ValueError, match=r"lower, upper: expected shape \(4,\)"):
        LEARNER.hyperparams(0.1, jnp.zeros(3), jnp.ones(3))  # the learner's dim is 4
    with pytest.raises(ValueError, match="hparams.lower"):
        LEARNER.init(op.box_ftrl(dim=3).hyperparams(0.1, jnp.zeros(3), jnp.ones(3)))
    with pytest.raises(ValueError, match="dim"):
        op.box_ftrl(dim=0)
    state = LEARNER.init(LEARNER.hyperparams(0.1, lower, upper))
    points, _ = aux = _query(state, jax.random.key(0))
    with pytest.raises(ValueError, match="values"):
        LEARNER.update(state, aux, jnp.ones(2))
    # NaN feedback inside jit: the state is kept and the status says NONFINITE.
    state1 = _update(state, aux, jnp.array([0.3]))
    state2 = _update(state1, aux, jnp.array([jnp.nan]))
    assert int(state2.status) == NONFINITE
    assert int(state2.num_failures) == int(state1.num_failures) + 1
    np.testing.assert_array_equal(state2.w, state1.w)
    np.testing.assert_array_equal(state2.grad_sum, state1.grad_sum)
    assert np.all(np.isfinite(np.asarray(state2.w)))
    state3 = _update(state2, aux, jnp.array([0.1]))
    assert int(state3.status) == CONVERGED


EPS32 = float(np.finfo(np.float32).eps)


def test_float32_path():
    """float32 Algorithm 4 against the float64 numpy reference (``bco_box_numpy``) on the float32
    run's own draws and inputs, round by round."""
    lower = jnp.array([-1.0, 0.5, -2.0, 0.0], jnp.float32)
    upper = jnp.array([1.0, 1.5, 3.0, 0.2], jnp.float32)
    eta = jnp.float32(0.2)
    hp = LEARNER.hyperparams(eta, lower, upper)
    assert hp.eta.dtype == jnp.float32
    num_rounds = 30
    losses = _losses(9, jnp.array([1.0, -0.5, 0.2, 2.0])).astype(jnp.float32)
    m = _run(hp, losses, jax.random.key(3), num_rounds)
    w = np.asarray(m["w"])
    assert w.dtype == np.float32
    assert np.all(w > np.asarray(lower)) and np.all(w < np.asarray(upper))
    assert np.all(np.asarray(m["status"]) == CONVERGED)
    # The reference gets the float32 run's numbers exactly (faces, eta, losses, draws), so the
    # difference is float32's rounding alone.
    lo64, hi64 = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
    loss64 = np.asarray(losses, np.float64)[:num_rounds]
    ref = run_box_ftrl_numpy(
        float(eta), lo64, hi64, loss64, np.asarray(m["coord"]), np.asarray(m["sign"])
    )
    # Tolerance (the model of tests/test_float32.py): a round rounds each quantity at eps32 of
    # its scale, c = 16 roundings, and independent roundings of successive rounds add like a
    # random walk: 16 eps32 sqrt(t) scale. The scale of w: the faces, max(|a|, |b|), plus what a
    # rounded estimate moves it by: g_i's error eps32 d |v - z| sqrt(lam_i) becomes
    # eta / lam_i times that in w (eq. D.4's slope in x is ~ lam_i), i.e. <= eta d 2F h with
    # F = max |<l_t, x_t>| and h the largest half-width.
    F = float(np.max(np.abs(ref["loss"])))
    h = float(np.max(hi64 - lo64)) / 2
    scale_w = float(np.max(np.maximum(np.abs(lo64), np.abs(hi64)))) + float(eta) * D * 2 * F * h
    bound = 16 * EPS32 * np.sqrt(np.arange(1, num_rounds + 1)) * scale_w
    err_w = np.abs(w - ref["w"]).max(axis=1)
    assert np.all(err_w <= bound), (np.flatnonzero(err_w > bound), float(np.max(err_w / bound)))
    # <l_t, x_t> with |x_t - x_t^ref| <= |w - w^ref| + the query's offset rounding (eps32 scale).
    err_loss = np.abs(np.asarray(m["loss"], np.float64) - ref["loss"])
    bound_loss = np.sum(np.abs(loss64), axis=1) * (bound + 16 * EPS32 * scale_w)
    assert np.all(err_loss <= bound_loss), float(np.max(err_loss / bound_loss))
    assert err_w.max() > 0  # float32 did round differently from float64


def test_runs_through_interact_on_linear_env_with_box():
    # The shared runner step and the linear loss family on a box that excludes the origin.
    box = Box(jnp.array([1.0, -2.0, 0.0, 3.0]), jnp.array([2.0, -1.0, 0.5, 4.0]))
    env = bco_losses.linear(D, domain=box, base_norm=1.0, amplitude=0.2, omega=0.05)
    hp = LEARNER.hyperparams(0.1, box.lower, box.upper)
    num_rounds = 200
    step = interact(LEARNER, env)

    @jax.jit
    @jax.vmap
    def run(key):
        k_env, k_run = jax.random.split(key)
        env_state = env.init(k_env)
        metrics = rollout(step, LEARNER.init(hp), env_state, k_run, num_rounds)
        centre_loss = hindsight_loss(env, env_state, 0.5 * (box.lower + box.upper), num_rounds)
        return summarize(env, env_state, metrics, num_rounds), centre_loss

    summary, centre_loss = run(jax.random.split(jax.random.key(0), 4))
    assert bool(jnp.all(summary.all_in_domain))
    assert int(jnp.sum(summary.num_failures)) == 0
    # It learns: its mean regret is well below that of always playing the centre.
    centre_regret = float(jnp.mean(centre_loss - summary.best_loss))
    assert 0 < float(jnp.mean(summary.regret)) < 0.8 * centre_regret
