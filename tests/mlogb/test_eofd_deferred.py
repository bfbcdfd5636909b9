"""EOFD-MLogB's per-round rule with the deferred basis rotation (``V = basis @ R``, spare basis
columns, ``V`` formed only when they run out): streams crossing many materialisations equal the
numpy reference and the learner without the deferral (``spare_columns = 0``, V formed every
round), robust and adaptive too; the materialisation round itself; a residual already in the
basis; the NaN guard in the middle of the spare columns and at a materialisation; float32;
m >= Kd; validation."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import mlogb
from bandits_jax.linalg import roots
from bandits_jax.mlogb.eofd import DEFER_MIN_DIM, default_spare_columns
from references import mlogb_numpy as ref
from tests.mlogb.test_eofd_adaptive import _runner
from tests.mlogb.test_learners import _hp
from tests.mlogb.test_numpy_equivalence import (
    assert_replay_matches,
    kappa_bound,
    replay_run,
    trajectory_tol,
)
from tests.rejected import assert_rejected


@functools.cache
def _learner(K, d, m, spare, reg="paper", m_max=None, tau=None):
    return mlogb.eofd(
        num_outcomes=K,
        dim=d,
        sketch_size=m,
        spare_columns=spare,
        regularization=reg,
        max_sketch_size=m_max,
        delta_target=tau,
    )


def _stream(K, d, T, seed, repeat_every=0):
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(T, d))
    xs = xs / np.linalg.norm(xs, axis=1, keepdims=True) * rng.uniform(0.5, 1.5, size=(T, 1))
    if repeat_every:  # x_t = x_{t-1}: already in the basis (not in V after a truncation)
        xs[repeat_every::repeat_every] = xs[repeat_every - 1 : -1 : repeat_every]
    ys = rng.integers(0, K + 1, size=T)
    return jnp.asarray(xs), jnp.asarray(ys), jnp.asarray(rng.normal(size=(T, 4, d)))


def _materialisations(states, m):
    """Rounds after which ``used`` fell back to m (V was formed), from the stacked states."""
    used = np.asarray(states.used)
    return int(np.sum((used[1:] == m) & (used[:-1] > m)))


def _sketch(states):
    V = np.asarray(states.V)
    return np.einsum("...di,...i,...ei->...de", V, np.asarray(states.mu), V)


@pytest.mark.parametrize("K,d,m,spare", [(1, 10, 3, 3), (4, 5, 6, 8)])
def test_long_stream_matches_numpy_reference(K, d, m, spare):
    """Choices, regret and W over a stream crossing many materialisations (one every
    ``spare / K`` rounds) equal the numpy reference (explicit SVDs, eq. 12-15 and 20-22)."""
    T, N = 12 * spare // K + 5, 6
    rng = np.random.default_rng(K)
    X = rng.normal(size=(T, N, d))
    X /= np.linalg.norm(X, axis=2, keepdims=True)
    X *= rng.uniform(0.6, 1.0, size=(T, N, 1))
    mask = np.ones((T, N), bool)
    U = rng.uniform(size=T)
    W_star = rng.normal(size=(K, d))
    W_star *= 2.5 / np.linalg.norm(W_star)
    rewards = np.linspace(1 / K, 1, K)
    kw = dict(lam=0.7, eta=1.3, S=1.0, rewards=rewards, beta=0.3, beta_scale=1.0)
    learner = _learner(K, d, m, spare)
    np_learner = ref.NumpyEOFD(K, d, m, **kw)
    want = ref.simulate(np_learner, W_star, X, mask, U, rewards=rewards)
    final, met = replay_run(learner, kw, X, mask, U, W_star)  # at XLA's defaults
    assert_replay_matches(final, met, want, np_learner, kw, X)
    assert int(np.asarray(met.projected).sum()) > 0
    # The materialisations happened: replaying the choices, `used` fell back to m >= 10 times.
    xs = jnp.asarray(X[np.arange(T), want["chosen"]])
    _, (_, st) = _runner(learner)(learner.init(mlogb.hyperparams(**kw)), xs, want["y"], X[:, :1])
    assert _materialisations(st, m) >= 10
    # Between rounds the last K spare columns are the next round's slot.
    assert int(np.asarray(st.used).max()) == m + spare - K


@pytest.mark.parametrize(
    "K,d,m,spare,reg,m_max,tau",
    [
        (1, 12, 3, 5, "paper", None, None),
        (4, 5, 6, 8, "paper", None, None),
        (1, 12, 2, 4, "robust", 6, 1.3),
        (4, 5, 2, 12, "robust", 9, 1.5),
        (3, 4, 2, 6, "paper", 5, 1.2),
    ],
)
def test_deferred_equals_forming_v_every_round(K, d, m, spare, reg, m_max, tau):
    """``spare_columns = 0`` forms V every round without deferral (the basis is V) and
    ``spare_columns = K`` every round through the deferred path; wider spares defer it: scores,
    W, weights, rho, rank and the sketch agree to 1e-9 over a stream crossing >= 3
    materialisations (robust + adaptive included)."""
    T = 4 * spare // K + 3
    hp = _hp(K, S=1.5, beta="theory", beta_scale=0.05)
    plain = _learner(K, d, m, 0, reg, m_max, tau)
    xs, ys, acts = _stream(K, d, T, seed=K + d)
    _, (sc1, s1) = _runner(plain)(plain.init(hp), xs, ys, acts)
    assert s1.R is None and s1.basis.shape[-1] == s1.mu.shape[-1]
    for c in (K, spare):
        deferred = _learner(K, d, m, c, reg, m_max, tau)
        _, (sc2, s2) = _runner(deferred)(deferred.init(hp), xs, ys, acts)
        m_eff = s2.mu.shape[1]
        if c == K:
            np.testing.assert_array_equal(np.asarray(s2.used), m_eff)  # formed every round
        else:
            assert _materialisations(s2, m_eff) >= 3
        np.testing.assert_allclose(sc2, sc1, rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(s2.W, s1.W, rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(s2.mu, s1.mu, rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(s2.rho, s1.rho, rtol=1e-9, atol=1e-11)
        np.testing.assert_array_equal(s2.rank, s1.rank)
        np.testing.assert_allclose(_sketch(s2), _sketch(s1), rtol=1e-9, atol=1e-11)
        if m_max is not None:
            assert int(s2.rank[-1]) > m  # the adaptive rank grew
        if reg == "robust":
            assert float(s2.rho[-1]) > 0.0
        # V = basis @ R stays orthonormal (zero-weight columns included) and R's rows past
        # `used` are zero, as are the basis columns past it.
        V = np.asarray(s2.V)
        eye = np.broadcast_to(np.eye(m_eff), (T, m_eff, m_eff))
        np.testing.assert_allclose(np.swapaxes(V, 1, 2) @ V, eye, atol=1e-12)
        n = s2.R.shape[1]
        past = np.arange(n)[None, :] >= np.asarray(s2.used)[:, None]
        assert np.all(np.where(past[:, :, None], np.asarray(s2.R), 0.0) == 0.0)
        assert np.all(np.where(past[:, None, :], np.asarray(s2.basis), 0.0) == 0.0)


def test_materialisation_round():
    """The round whose spare columns run out forms ``V = basis' R`` (``basis'``: the round's
    new column written in), resets ``R = I`` and ``used = m``, and equals the same round
    without the materialisation (a wider basis)."""
    K, d, m, spare = 2, 6, 3, 4
    hp = _hp(K, S=1.5)
    narrow, wide = _learner(K, d, m, spare), _learner(K, d, m, 3 * spare)
    xs, ys, acts = _stream(K, d, 6, seed=3)
    upd_n, upd_w = jax.jit(narrow.update), jax.jit(wide.update)
    sn, sw = narrow.init(hp), wide.init(hp)
    used = []
    for t in range(3):
        sn, sw = upd_n(sn, xs[t], ys[t]), upd_w(sw, xs[t], ys[t])
        used.append(int(sn.used))
    # m + K after round 1, formed after round 2 (m + 2K + K > m + spare), m + K after round 3.
    assert used == [m + K, m, m + K]
    sn2 = upd_n(upd_n(narrow.init(hp), xs[0], ys[0]), xs[1], ys[1])
    np.testing.assert_array_equal(sn2.R, np.eye(m + spare, m))
    np.testing.assert_array_equal(np.asarray(sn2.basis)[:, m:], 0.0)
    np.testing.assert_array_equal(sn2.basis[:, :m], sn2.V)
    sw2 = upd_w(upd_w(wide.init(hp), xs[0], ys[0]), xs[1], ys[1])
    assert int(sw2.used) == m + 2 * K
    np.testing.assert_allclose(sn2.V, sw2.V, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(sn2.W, sw2.W, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(sn2.mu, sw2.mu, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(sn.W, sw.W, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(_sketch(sn), _sketch(sw), rtol=1e-12, atol=1e-13)


def test_residual_already_in_the_basis():
    """``x_t = x_{t-1}``: after a truncation ``x_t`` lies in the used basis columns but not in
    span V, so no column is added (``used`` stays) while the FD core still gets a direction
    outside V; the trajectory equals forming V every round and the numpy reference's W."""
    K, d, m, spare, T = 1, 9, 2, 6, 16
    hp = _hp(K, S=1.5)
    every, deferred = _learner(K, d, m, K), _learner(K, d, m, spare)
    xs, ys, acts = _stream(K, d, T, seed=7, repeat_every=2)
    _, (sc1, s1) = _runner(every)(every.init(hp), xs, ys, acts)
    _, (sc2, s2) = _runner(deferred)(deferred.init(hp), xs, ys, acts)
    used = np.asarray(s2.used)
    assert np.any((used[1:] == used[:-1]) & (used[1:] > m))  # a round that added no column
    np.testing.assert_allclose(sc2, sc1, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(s2.W, s1.W, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(_sketch(s2), _sketch(s1), rtol=1e-9, atol=1e-11)
    np_learner = ref.NumpyEOFD(K, d, m, lam=0.8, eta=1.5, S=1.5, rewards=[1.0], beta=0.3)
    for x, y, W in zip(np.asarray(xs), np.asarray(ys), np.asarray(s2.W), strict=True):
        np_learner.update(x, int(y))
        np.testing.assert_allclose(W, np_learner.W, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("rounds_before", [2, 3])
def test_nan_round_keeps_state_mid_buffer_and_at_materialisation(rounds_before):
    """A non-finite x is rejected with every state leaf kept bit for bit (info aside): in the
    middle of the spare columns (2 rounds in) and on the round that would form V (3 rounds in,
    ``used + 2K > n``); the stream then continues as if the round never happened."""
    K, d, m, spare = 1, 8, 3, 4
    hp = _hp(K, S=1.5)
    learner = _learner(K, d, m, spare)
    xs, ys, acts = _stream(K, d, 10, seed=4)
    upd = jax.jit(learner.update)
    s = learner.init(hp)
    for t in range(rounds_before):
        s = upd(s, xs[t], ys[t])
    assert m < int(s.used) < m + spare
    bad = upd(s, jnp.full((d,), jnp.nan).at[0].set(1.0), 1)
    assert int(bad.status) == roots.NONFINITE
    assert_rejected(bad, s)
    clean = s
    for t in range(rounds_before, 10):
        bad, clean = upd(bad, xs[t], ys[t]), upd(clean, xs[t], ys[t])
    assert int(bad.num_failures) == int(clean.num_failures) + 1
    for a, b in zip(jax.tree.leaves(bad._replace(num_failures=clean.num_failures)),
                    jax.tree.leaves(clean), strict=True):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_float32_long_run():
    K, d, m, spare, T = 2, 8, 4, 6, 60
    learner = _learner(K, d, m, spare)
    xs, ys, acts = _stream(K, d, T, seed=11)
    _, (sc64, s64) = _runner(learner)(learner.init(_hp(K, S=1.5)), xs, ys, acts)
    x32, a32 = xs.astype(jnp.float32), acts.astype(jnp.float32)
    _, (sc32, s32) = _runner(learner)(learner.init(_hp(K, dtype=jnp.float32, S=1.5)), x32, ys, a32)
    assert s32.basis.dtype == jnp.float32 and s32.R.dtype == jnp.float32
    assert _materialisations(s32, m) >= 10
    assert np.all(np.asarray(s32.status) != roots.NONFINITE)
    np.testing.assert_allclose(s32.W, s64.W, atol=2e-4)
    np.testing.assert_allclose(sc32, sc64, rtol=1e-3, atol=1e-4)
    V = np.asarray(s32.V[-1], np.float64)
    np.testing.assert_allclose(V.T @ V, np.eye(m), atol=1e-5)


def test_full_sketch_equals_oful_and_adds_no_column():
    """Errata 1: m >= Kd keeps the whole Hessian (OFUL-MLogB) and X always lies in the basis,
    so no column is added and V is never formed again."""
    K, d, T = 2, 3, 25
    le, lo = _learner(K, d, K * d, 4), mlogb.oful(num_outcomes=K, dim=d)
    hp = _hp(K, S=1.5)
    xs, ys, acts = _stream(K, d, T, seed=2)
    _, (sce, ste) = _runner(le)(le.init(hp), xs, ys, acts)
    _, (sco, sto) = _runner(lo)(lo.init(hp), xs, ys, acts)
    np.testing.assert_array_equal(np.asarray(ste.used), K * d)
    np.testing.assert_allclose(sce, sco, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(ste.W, sto.W, rtol=1e-9, atol=1e-11)
    np.testing.assert_array_equal(ste.rho, 0.0)


@pytest.mark.parametrize("K", [1, 2, 3, 4])
def test_default_spare_columns_follow_their_rule(K):
    """default_spare_columns against the rule its docstring states, as properties over a grid:
    0 below DEFER_MIN_DIM, else a multiple of K, at least K, within K of m/4; the factory's
    learner has that many spare columns (none, and V as its basis, without deferral)."""
    for D in (K, 400, DEFER_MIN_DIM - 1, DEFER_MIN_DIM, 4000, 10_000):
        for m in (1, 3, K, 4 * K, 40, 78, 100, 1200):
            c = default_spare_columns(m, K, D)
            if D < DEFER_MIN_DIM:
                assert c == 0, (m, K, D, c)
                continue
            assert c >= K and c % K == 0, (m, K, D, c)
            if m / 4 >= K and m < D:
                assert abs(c - m / 4) < K, (m, K, D, c)
            elif m < D:
                assert c == K, (m, K, D, c)
    for d in (DEFER_MIN_DIM // K - 1, -(-DEFER_MIN_DIM // K)):  # K d just below / at the bound
        m = 40
        s = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m).init(_hp(K))
        c = default_spare_columns(m, K, K * d)
        if K * d < DEFER_MIN_DIM:
            assert s.R is None and s.basis.shape == (K * d, m)
        else:
            assert s.basis.shape == (K * d, m + c) and s.R.shape == (m + c, m)
        assert int(s.used) == m


def test_default_deferral_gives_the_undeferred_trajectory():
    """From K d = DEFER_MIN_DIM on the default defers the rotation: over a stream crossing
    several materialisations its scores, W, rho and sketch equal those of spare_columns = 0
    (V formed every round) to rounding (derived tolerance)."""
    K, d, m, T = 2, DEFER_MIN_DIM // 2, 16, 12
    hp = _hp(K, S=1.5, beta="theory", beta_scale=0.05)
    default = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m)
    plain = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m, spare_columns=0)
    xs, ys, acts = _stream(K, d, T, seed=13)
    _, (sc1, s1) = _runner(plain)(plain.init(hp), xs, ys, acts)
    _, (sc2, s2) = _runner(default)(default.init(hp), xs, ys, acts)
    assert s1.R is None and s2.R is not None
    assert _materialisations(s2, m) >= 3 and float(s2.rho[-1]) > 0
    x_max = float(np.max(np.linalg.norm(np.asarray(xs), axis=1)))
    tol = trajectory_tol(T, kappa_bound(T, float(hp.lam), float(hp.eta), x_max))
    np.testing.assert_allclose(sc2, sc1, rtol=tol, atol=tol * float(np.max(np.abs(sc1))))
    np.testing.assert_allclose(s2.W, s1.W, rtol=tol, atol=tol * float(hp.S))
    np.testing.assert_allclose(s2.rho, s1.rho, rtol=tol, atol=tol * float(hp.lam))
    G1, G2 = _sketch(s1), _sketch(s2)
    np.testing.assert_allclose(G2, G1, rtol=0, atol=tol * float(np.max(np.abs(G1))))


def test_bad_spare_columns():
    kw = {"num_outcomes": 2, "dim": 3, "sketch_size": 2}
    for bad in (1, -1, True, 2.0, "4"):
        with pytest.raises(ValueError, match="spare_columns"):
            mlogb.eofd(**kw, spare_columns=bad)
    with pytest.raises(ValueError, match="spare_columns"):
        mlogb.eofd(**kw, sketch_rule="fast", spare_columns=4)


def test_vmap_with_different_used_columns_equals_loops():
    """Under vmap the trials' ``used`` differ (one stream repeats its actions, so it adds fewer
    columns and forms V at other rounds): batched scatter/gather of the spare columns and the
    batched zero-or-one-trip loop equal running each trial alone."""
    K, d, m, spare, T = 1, 9, 2, 4, 18
    learner = _learner(K, d, m, spare)
    hp = _hp(K, S=1.5)
    streams = [_stream(K, d, T, seed=5, repeat_every=r) for r in (0, 2)]
    xs, ys, acts = (jnp.stack(a) for a in zip(*streams, strict=True))
    run = _runner(learner)
    _, (sc_b, st_b) = jax.vmap(run, in_axes=(None, 0, 0, 0))(learner.init(hp), xs, ys, acts)
    assert np.any(np.asarray(st_b.used[0]) != np.asarray(st_b.used[1]))
    for i in range(2):
        _, (sc, st) = run(learner.init(hp), xs[i], ys[i], acts[i])
        np.testing.assert_array_equal(st_b.used[i], st.used)
        np.testing.assert_allclose(sc_b[i], sc, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(st_b.W[i], st.W, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(_sketch(st_b)[i], _sketch(st), rtol=1e-10, atol=1e-12)
