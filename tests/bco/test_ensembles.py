"""Tests of the dynamic (Algorithm 5) and universal (Algorithm 6) ensembles."""

import math
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.bco import domains as dom
from bandits_jax.bco import ensembles as ens
from bandits_jax.bco import interact, summarize
from bandits_jax.bco import two_point as tp
from bandits_jax.envs import bco_losses
from bandits_jax.linalg.roots import CONVERGED, NONFINITE
from bandits_jax.sim.runner import init_run, play, rollout
from references.bco_ensemble_numpy import prod_weights

D = 3
T = 1000
TRIALS = 4
KEYS = jax.random.split(jax.random.key(0), TRIALS)


def _batched_runner(learner, env, *, grid: bool = False):
    """jit(vmap over trials [and over a grid of hyperparameters]) of a whole run's summary.

    The hyperparameters are an argument, so presets of the same shapes share one compilation.
    """
    step = interact(learner, env)

    def one(hp, key):
        k_env, k_run = jax.random.split(key)
        env_state = env.init(k_env)
        metrics = rollout(step, learner.init(hp), env_state, k_run, T)
        return summarize(env, env_state, metrics, T)

    fn = jax.vmap(one, in_axes=(None, 0))
    if grid:
        fn = jax.vmap(fn, in_axes=(0, None))
    return jax.jit(fn)


def _stack(hps):
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *hps)


# ---------------------------------------------------------------------------------------------
# Pools and constants
# ---------------------------------------------------------------------------------------------


def test_theorem_pool_has_no_duplicates_and_respects_cap():
    for d, horizon in [(1, 100), (2, 1e4), (10, 1e4), (10, 1e7), (50, 1e5)]:
        pool = ens.theorem_step_pool(d, horizon)
        log_dT = max(math.log(d * horizon), 1.0)
        cap = 1.0 / (20.0 * math.sqrt(d**3 * log_dT))
        assert np.all(np.isfinite(pool)) and np.all(pool > 0)
        assert len(np.unique(pool)) == len(pool)
        assert np.all(np.diff(pool) > 0) and pool[-1] == pytest.approx(cap)
    # The raw (E.1) pool at d = 5, T = 2000 has several entries equal to the cap (errata 16).
    d, horizon = 5, 2000
    n = (
        math.ceil(
            math.log2(
                1 + math.sqrt(horizon * math.log(d)) / (16 * math.sqrt(math.log(d * horizon)))
            )
        )
        + 1
    )
    raw = [
        min(
            1 / (20 * math.sqrt(d**3 * math.log(d * horizon))),
            math.sqrt(1 / (d**3 * horizon * math.log(d))) * 2**i,
        )
        for i in range(n)
    ]
    assert len(set(raw)) < len(raw)
    assert len(ens.theorem_step_pool(d, horizon)) == len(set(raw))


def test_strongly_convex_pool_is_E6():
    pool = ens.strongly_convex_pool(1000)
    np.testing.assert_allclose(pool, 2.0 ** np.arange(11) / 1000)


# ---------------------------------------------------------------------------------------------
# Algorithm 6: universal ensemble
# ---------------------------------------------------------------------------------------------

SC_ENV = bco_losses.quadratic(D, lam=1.0, radius=1.0, base_norm=0.5, amplitude=0.1)
UNIVERSAL = ens.universal_ensemble(dim=D)
_universal_run = _batched_runner(UNIVERSAL, SC_ENV)


def _universal_hp(**kw):
    return UNIVERSAL.hyperparams(
        SC_ENV.domain, horizon=T, lipschitz=SC_ENV.lipschitz, smoothness=SC_ENV.smoothness, **kw
    )


def test_universal_ensemble_matches_best_base_learner_on_strongly_convex_family():
    practical = _universal_run(_universal_hp(preset="practical"), KEYS)
    theorem = _universal_run(_universal_hp(preset="theorem"), KEYS)
    assert int(jnp.sum(practical.num_failures)) == 0
    assert bool(jnp.all(practical.all_in_domain))

    # Every base learner of Table 2 run alone (Algorithm 1 on the true losses).
    sc = tp.two_point_learner(dim=D, schedule="strongly_convex")
    sc_hps = _stack(
        [
            sc.hyperparams(
                SC_ENV.domain,
                horizon=T,
                lam=float(lam),
                scale=4.0,
                smoothness=SC_ENV.smoothness,
                lipschitz=SC_ENV.lipschitz,
            )
            for lam in ens.strongly_convex_pool(T)
        ]
    )
    sc_regret = _batched_runner(sc, SC_ENV, grid=True)(sc_hps, KEYS).regret
    cvx = tp.two_point_learner(dim=D, schedule="convex")
    cvx_hp = cvx.hyperparams(
        SC_ENV.domain,
        horizon=T,
        scale=2.0,
        offset="d2",
        smoothness=SC_ENV.smoothness,
        lipschitz=SC_ENV.lipschitz,
    )
    cvx_regret = _batched_runner(cvx, SC_ENV)(cvx_hp, KEYS).regret
    base_means = np.concatenate([np.asarray(sc_regret.mean(axis=1)), [float(cvx_regret.mean())]])
    best, worst = base_means.min(), base_means.max()
    ours = float(practical.regret.mean())
    assert best > 0  # the comparison is meaningful: positive regrets on this family
    # Within a constant factor of the best base learner, far from the worst one.
    assert ours < 4.0 * best
    assert ours < 0.2 * worst
    # With the paper's normalisation the meta-weights barely move: worse than the preset.
    assert float(theorem.regret.mean()) > ours


_universal_query = jax.jit(lambda s, k: UNIVERSAL.act(s, None, k))
_universal_update = jax.jit(UNIVERSAL.update)
_sc_loss = jax.jit(SC_ENV.loss)
SC_ENV_STATE = SC_ENV.init(jax.random.key(5))


def _one_universal_round(state, key):
    points, _ = aux = _universal_query(state, key)
    return _universal_update(state, aux, _sc_loss(SC_ENV_STATE, 0, points)), aux


def test_universal_fixed_point_hint_is_consistent():
    """The stored (p_{t+1}, m_{t+1}) against E.8's hints recomputed in numpy and E.7's weights
    from ``bco_ensemble_numpy.prod_weights`` (numpy, not ``bandits_jax.bco.meta``)."""
    # E.8's hint for round t+1 uses w_{t+1} = sum_j p_{t+1,j} w_{t+1,j}, which depends on the
    # weights it produces: after an update the stored hints must match the stored weights.
    state = UNIVERSAL.init(_universal_hp(preset="practical", meta_scale=3000.0))
    for k in range(30):
        state, _ = _one_universal_round(state, jax.random.key(k))
        assert int(state.status) == CONVERGED
    hp = state.hparams
    base_w = np.concatenate([np.asarray(state.sc_w), np.asarray(state.cvx_w)])
    p = np.asarray(state.meta.weights)
    w = p @ base_w
    np.testing.assert_allclose(np.asarray(state.w), w, rtol=1e-12, atol=1e-14)
    s = float(hp.loss_scale)
    g_tilde = np.asarray(state.g_tilde)
    n_sc = state.sc_w.shape[0]
    expected = np.where(np.arange(len(p)) >= n_sc, s * ((w - base_w) @ g_tilde), 0.0)
    np.testing.assert_allclose(np.asarray(state.meta.optimism), expected, atol=1e-12)
    assert np.any(np.abs(expected) > 1e-6)  # the hints are not trivially zero
    # E.7: p ∝ eps exp(eps m) W with the state's eps_t and W_t = exp(log W_t) (the fixed point
    # solve stops at |psi| <= 4 eps (1 + max|a|): p moves by eps_t times that, << 1e-10).
    lr, potential = np.asarray(state.meta.lr), np.exp(np.asarray(state.meta.log_potential))
    np.testing.assert_allclose(prod_weights(lr, potential, expected), p, rtol=1e-10)


# ---------------------------------------------------------------------------------------------
# Algorithm 5: dynamic ensemble
# ---------------------------------------------------------------------------------------------

SWITCH_ENV = bco_losses.quadratic(
    D, lam=1.0, radius=1.0, base_norm=0.0, amplitude=0.8, switch_every=100
)
DYNAMIC = ens.dynamic_ensemble(dim=D)


def test_dynamic_ensemble_tracks_switching_comparator():
    def hp(**kw):
        return DYNAMIC.hyperparams(
            SWITCH_ENV.domain, horizon=T, smoothness=SWITCH_ENV.smoothness, **kw
        )

    # Single fixed-step learners: a pool whose entries are all equal to eta is Algorithm 1 with
    # that step (identical base learners, so the weights do not matter). Each step of the
    # practical pool, and the paper's (E.1) pool, which collapses to one step here. Padding to
    # the practical pool's shape puts every run in one compiled grid.
    practical = hp(preset="practical")
    n = practical.etas.shape[0]
    theorem_pool = ens.theorem_step_pool(D, T)
    assert len(theorem_pool) == 1
    singles = [*ens.practical_step_pool(), *theorem_pool]
    grid = _stack([practical] + [hp(etas=[eta] * n, preset="practical") for eta in singles])
    out = _batched_runner(DYNAMIC, SWITCH_ENV, grid=True)(grid, KEYS)
    assert int(jnp.sum(out.num_failures)) == 0
    assert float(jnp.min(out.P_T)) > 1.0  # the comparator does switch
    means = np.asarray(out.dynamic_regret.mean(axis=1))
    ours_mean, single_means = means[0], means[1:]
    # Much better than a small fixed step (the theorem's single step, the pool's smallest) ...
    assert ours_mean < 0.3 * single_means[-1]
    assert ours_mean < 0.3 * single_means[0]
    # ... and as good as the best fixed step in hindsight, up to a small factor.
    assert ours_mean < 1.5 * single_means.min()


_dynamic_query = jax.jit(lambda s, k: DYNAMIC.act(s, None, k))
_dynamic_update = jax.jit(DYNAMIC.update)
_switch_loss = jax.jit(SWITCH_ENV.loss)


def _one_dynamic_round(state, key, env_key):
    points, _ = aux = _dynamic_query(state, key)
    values = _switch_loss(SWITCH_ENV.init(env_key), 0, points)
    return _dynamic_update(state, aux, values), points, values


def test_dynamic_round_matches_hand_computation():
    hp = DYNAMIC.hyperparams(
        SWITCH_ENV.domain, horizon=T, smoothness=SWITCH_ENV.smoothness, preset="practical"
    )
    state0 = DYNAMIC.init(hp)
    state1, _, _ = _one_dynamic_round(state0, jax.random.key(1), jax.random.key(2))
    state2, points, values = _one_dynamic_round(state1, jax.random.key(3), jax.random.key(4))
    # Round 2 by hand (eq. 2.2, E.4, OOGD with fixed steps, E.3).
    i = int(np.flatnonzero(np.asarray(points[0] - points[1]))[0])
    v = float(values[0] - values[1]) / float(points[0, i] - points[1, i])
    gt = np.asarray(state1.g_tilde)
    g = gt.copy()
    g[i] += D * (v - gt[i])
    gt_next = gt.copy()
    gt_next[i] = v
    etas = np.asarray(hp.etas)[:, None]
    radius = (1 - float(hp.xi)) * float(SWITCH_ENV.domain.radius)

    def proj(x):
        n = np.linalg.norm(x, axis=-1, keepdims=True)
        return np.where(n > radius, x * radius / n, x)

    w_hat = proj(np.asarray(state1.base_w_hat) - etas * g)
    w_new = proj(w_hat - etas * gt_next)
    np.testing.assert_allclose(state2.base_w, w_new, rtol=1e-12, atol=1e-15)
    w1, w0 = np.asarray(state1.base_w), np.asarray(state0.base_w)
    gamma = float(hp.gamma)
    losses = w1 @ g + gamma * np.sum((w1 - w0) ** 2, axis=1)
    np.testing.assert_allclose(
        state2.meta.cum_loss, np.asarray(state1.meta.cum_loss) + losses, rtol=1e-12
    )
    hint = w_new @ gt_next + gamma * np.sum((w_new - w1) ** 2, axis=1)
    err = (
        float(state1.meta.err_sq_sum)
        + np.max(np.abs(losses - np.asarray(state1.meta.optimism))) ** 2
    )
    lr = math.sqrt(math.log(len(etas)) / (float(hp.c0) ** 2 + err))
    logits = -lr * (np.asarray(state2.meta.cum_loss) + hint)
    p = np.exp(logits - logits.max())
    p /= p.sum()
    np.testing.assert_allclose(state2.meta.weights, p, rtol=1e-10)
    np.testing.assert_allclose(state2.w, p @ w_new, rtol=1e-10, atol=1e-15)


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


def test_bad_input():
    ball = dom.ball(1.0)
    with pytest.raises(ValueError, match="domain"):
        DYNAMIC.hyperparams(dom.box(-jnp.ones(4), jnp.ones(4)), horizon=T)  # d mismatch
    with pytest.raises(ValueError, match="etas"):
        DYNAMIC.hyperparams(ball, horizon=T, etas=[0.1, -1.0])
    with pytest.raises(ValueError, match="c0"):
        DYNAMIC.hyperparams(ball, horizon=T, c0=0.0)
    with pytest.raises(ValueError, match="preset"):
        DYNAMIC.hyperparams(ball, horizon=T, preset="fast")
    with pytest.raises(ValueError, match="lipschitz"):
        UNIVERSAL.hyperparams(ball, horizon=T, lipschitz=0.0)
    with pytest.raises(ValueError, match="lams"):
        UNIVERSAL.hyperparams(ball, horizon=T, lipschitz=1.0, lams=[0.0, 1.0])
    with pytest.raises(ValueError, match="radius"):
        dom.ball(-1.0)
    with pytest.raises(ValueError, match="optimism"):
        ens.universal_ensemble(dim=D, optimism="future")
    with pytest.raises(ValueError, match="hparams"):
        DYNAMIC.init(_universal_hp(preset="practical"))
    state = UNIVERSAL.init(_universal_hp(preset="practical"))
    _, aux = query = UNIVERSAL.act(state, None, jax.random.key(0))
    with pytest.raises(ValueError, match="values"):
        UNIVERSAL.update(state, query, jnp.ones(3))
    # NaN feedback inside jit: state kept, status surfaced.
    state1, aux = _one_universal_round(state, jax.random.key(1))
    bad = _universal_update(state1, aux, jnp.array([jnp.nan, 0.0]))
    assert int(bad.status) == NONFINITE
    assert int(bad.num_failures) == int(state1.num_failures) + 1
    np.testing.assert_array_equal(bad.w, state1.w)
    np.testing.assert_array_equal(bad.meta.weights, state1.meta.weights)
    dyn = DYNAMIC.init(DYNAMIC.hyperparams(ball, horizon=T, preset="practical"))
    daux = _dynamic_query(dyn, jax.random.key(0))
    dbad = _dynamic_update(dyn, daux, jnp.array([0.0, jnp.inf]))
    assert int(dbad.status) == NONFINITE
    assert np.all(np.isfinite(np.asarray(dbad.w)))


# float32 against float64 on the same draws (the same delta, the float32 floor R sqrt(eps32), so
# that both run the same algorithm). The float32 run differs from the float64 one mainly by the
# rounding of the two observed values (a relative eps32 each), which the finite difference divides
# by 2 delta (an amplification F / delta ~ 2.5e3 here); the rest of a round rounds at eps32 of
# quantities of size <= 1. How the closed loop carries such roundings to later rounds (the meta
# weights feed back into the queries) is measured, not guessed: the float64 run is replayed with
# its observed values multiplied by 1 + eps32 u, u uniform on [-1, 1] (two seeds), and the float32
# run must stay within 8 times the largest deviation of those replays up to that round, plus
# 16 eps32 times the quantity's size (its own rounding).
F32_ROUNDS = 50
F32_DELTA = float(np.sqrt(np.finfo(np.float32).eps))  # estimators.delta_floor(float32, R = 1)
EPS32 = float(np.finfo(np.float32).eps)


F32_ENVS = {
    dt: bco_losses.quadratic(D, lam=1.0, base_norm=0.5, amplitude=0.1, dtype=dt)
    for dt in (jnp.float32, jnp.float64)
}


def _recorded_round(env):
    """The runner's round (``interact``) recording ``w_t`` and ``p_t`` before it."""
    step = interact(UNIVERSAL, env)

    def round_(ls, es, key):
        new_ls, new_es, metrics = step(ls, es, key)
        return new_ls, new_es, (metrics, ls.w, ls.meta.weights)

    return round_


def _f32_hp(env):
    return UNIVERSAL.hyperparams(
        env.domain,
        horizon=T,
        lipschitz=env.lipschitz,
        smoothness=env.smoothness,
        preset="practical",
        delta=F32_DELTA,
    )


@jax.jit
def _universal_f32_run(hp, key):
    env = F32_ENVS[jnp.float32]
    run = init_run(UNIVERSAL.init(hp), env.init(key), key)
    return play(_recorded_round(env), run, F32_ROUNDS)


@jax.jit
def _universal_f64_replays(hp, key, scales, pkeys):
    """The float64 run with its observed values times ``1 + scale u`` (one run per scale)."""
    env = F32_ENVS[jnp.float64]

    def one(scale, pkey):
        def loss(es, t, x):
            f = env.loss(es, t, x)
            u = jax.random.uniform(jax.random.fold_in(pkey, t), f.shape, f.dtype, -1.0, 1.0)
            return f * (1.0 + scale * u)

        run = init_run(UNIVERSAL.init(hp), env.init(key), key)
        return play(_recorded_round(env._replace(loss=loss)), run, F32_ROUNDS)[1]

    return jax.vmap(one)(scales, pkeys)


def test_universal_float32_path():
    """float32 Algorithm 6 against the float64 run on the same draws, round by round, within
    the spread of float64 replays under eps32-sized roundings of the observations."""
    hp32 = _f32_hp(F32_ENVS[jnp.float32])
    hp64 = _f32_hp(F32_ENVS[jnp.float64])
    assert hp32.delta.dtype == jnp.float32 and float(hp32.delta) == float(hp64.delta)
    key = jax.random.key(0)
    final, (m32, w32, p32) = _universal_f32_run(hp32, key)
    leaves = jax.tree_util.tree_leaves(final.learner)
    assert {str(x.dtype) for x in leaves} == {"float32", "int32"}
    assert np.all(np.asarray(m32.status) == CONVERGED)
    assert bool(jnp.all(m32.in_domain))

    scales = jnp.array([0.0, EPS32, EPS32])
    pkeys = jax.random.split(jax.random.key(zlib.crc32(b"float32 rounding model")), 3)
    m64, w64, p64 = _universal_f64_replays(hp64, key, scales, pkeys)
    for name, got, runs in (("loss", m32.loss, m64.loss), ("w", w32, w64), ("p", p32, p64)):
        runs = np.asarray(runs, np.float64).reshape(3, F32_ROUNDS, -1)
        base = runs[0]
        spread = np.maximum.accumulate(np.abs(runs[1:] - base).max(axis=(0, 2)))
        bound = 8.0 * spread + 16.0 * EPS32 * np.abs(base).max()
        err = np.abs(np.asarray(got, np.float64).reshape(F32_ROUNDS, -1) - base).max(axis=1)
        assert np.all(err <= bound), (name, np.flatnonzero(err > bound), np.max(err / bound))
        assert spread[-1] > 0 and err.max() > 0  # both precisions did round differently
    # The weights did move (the comparison is not between two uniform vectors).
    assert np.ptp(np.asarray(p64[0, -1])) > 0.05
