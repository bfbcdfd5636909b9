"""EOFD-MLogB with ``sketch_rule="fast"`` (Fast FD in spectral form, deferred basis rotation):
FD invariants against the dense Hessian sum, one update against dense algebra with the same Z,
``m >= Kd`` equals OFUL-MLogB, regret close to per-round FD, robust regularisation, jit/vmap,
the NaN guard and input validation."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from bandits_jax import envs, mlogb
from bandits_jax.mlogb.eofd import lemma1_matrices
from bandits_jax.sim import rollout
from tests.mlogb.test_learners import _hp, dense_ons_step, dense_scores


def _fast(K, d, m, **kw):
    return mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m, sketch_rule="fast", **kw)


def _stream(K, d, T, seed, decay=True):
    rng = np.random.default_rng(seed)
    scale = np.linspace(1.5, 0.1, d) if decay else np.ones(d)
    xs = rng.normal(size=(T, d)) * scale
    return jnp.asarray(xs), jnp.asarray(rng.integers(0, K + 1, size=T))


@functools.cache
def _runner(learner):
    """Jitted scan of updates; returns the states after every round (stacked)."""

    def run(state, xs, ys):
        def body(s, inp):
            s = learner.update(s, *inp)
            return s, s

        return lax.scan(body, state, (xs, ys))

    return jax.jit(run)


def _sigma(z):
    e = np.exp(z)
    return e / (1.0 + e.sum())


def _hess(W, x):
    s = _sigma(W @ x)
    return np.kron(np.diag(s) - np.outer(s, s), np.outer(x, x))


def _dense_sketch(s):
    V = np.asarray(s.basis) @ np.asarray(s.R)
    return (V * np.asarray(s.mu)) @ V.T, V


@pytest.mark.parametrize("K,d,m", [(1, 12, 3), (2, 5, 3), (3, 3, 2)])
def test_fd_invariants_along_a_stream(K, d, m):
    """G <= M <= G + rho I and Ghashami's rho <= (tr M - tr G)/(m + 1) after every round, with
    M = sum_s grad^2 l_s(W_{s+1}) from the trajectory; the rank stays within the capacity and
    V = basis R is orthonormal."""
    learner = _fast(K, d, m)
    xs, ys = _stream(K, d, 40, seed=K + d)
    _, states = _runner(learner)(learner.init(_hp(K, S=2.0)), xs, ys)
    M = np.zeros((K * d, K * d))
    shrinks = 0
    for t in range(len(xs)):
        st = jax.tree.map(lambda a, t=t: a[t], states)
        M += _hess(np.asarray(st.W), np.asarray(xs[t]))
        G, V = _dense_sketch(st)
        rho, rank = float(st.rho), int(st.rank)
        scale = np.trace(M)
        gap = np.linalg.eigvalsh(M - G)
        assert gap.min() >= -1e-9 * scale
        assert gap.max() <= rho + 1e-9 * scale
        assert rho <= (np.trace(M) - np.trace(G)) / (m + 1) + 1e-9 * scale
        assert 0 <= rank <= int(st.used) <= m + max(m, K)
        Vr = V[:, :rank]
        np.testing.assert_allclose(Vr.T @ Vr, np.eye(rank), atol=1e-9)
        assert np.all(np.asarray(st.mu)[rank:] == 0)
        shrinks += t > 0 and int(st.used) != int(states.used[t - 1]) + K
        assert int(st.info.status) in (0, 3, 5)  # CONVERGED, INACTIVE, INEXACT (into_ball)
    assert shrinks >= 2 and float(states.rho[-1]) > 0  # the shrink path is exercised


@pytest.mark.parametrize("K,d,m", [(1, 8, 2), (3, 3, 2)])
def test_one_update_equals_dense_step_with_same_z(K, d, m):
    """From a state mid-stream (some shrinks done), one update equals the dense eq. (8) + QCQP (9)
    with the same Z = lam I + V diag(mu) V^T; the new sketch is Z's sketch plus the exact new
    Hessian term (no shrink) or its shrink (eigenvalues minus lambda_{m+1}); scores equal eq. (16)
    / (19) with the dense Z^{-1}."""
    learner = _fast(K, d, m)
    lam, eta, S = 0.8, 2.0, 0.6
    hp = _hp(K, S=S, eta=eta)
    xs, ys = _stream(K, d, 30, seed=3)
    s, _ = _runner(learner)(learner.init(hp), xs, ys)
    rng = np.random.default_rng(12)
    upd = jax.jit(learner.update)
    seen = set()
    for _ in range(2 * m + 2):
        x, y = rng.normal(size=d), int(rng.integers(1, K + 1))
        G, _ = _dense_sketch(s)
        Z = lam * np.eye(K * d) + G
        w_new, wp_norm = dense_ons_step(Z, np.asarray(s.W), x, y, eta, S)
        s1 = upd(s, jnp.asarray(x), y)
        np.testing.assert_allclose(np.asarray(s1.W).reshape(-1), w_new, rtol=1e-8, atol=1e-10)
        seen.add(wp_norm > S)
        G_next = G + _hess(w_new.reshape(K, d), x)
        G1, _ = _dense_sketch(s1)
        if float(s1.rho) == float(s.rho):  # no shrink: the new term is absorbed exactly
            np.testing.assert_allclose(G1, G_next, atol=1e-9)
            seen.add("append")
        else:  # shrink to m directions by lambda_{m+1}
            ev, U = np.linalg.eigh(G_next)
            ev, U = ev[::-1], U[:, ::-1]
            want = (U[:, :m] * (ev[:m] - ev[m])) @ U[:, :m].T
            np.testing.assert_allclose(G1, want, atol=1e-9)
            np.testing.assert_allclose(float(s1.rho) - float(s.rho), ev[m], rtol=1e-9)
            seen.add("shrink")
        s = s1
    assert seen >= {"append", "shrink", True}
    X = rng.normal(size=(5, d))
    Zinv = np.linalg.inv(lam * np.eye(K * d) + _dense_sketch(s)[0])
    want = dense_scores(np.asarray(s.W), Zinv, X, np.asarray(hp.rewards), 0.3)
    np.testing.assert_allclose(np.asarray(learner.scores(s, jnp.asarray(X))), want, rtol=1e-9)
    A = lemma1_matrices(s.basis, s.mu, hp.lam, jnp.asarray(X), K, s.R)
    IkX = np.kron(np.eye(K), X[0][:, None])
    np.testing.assert_allclose(np.asarray(A[0]), IkX.T @ Zinv @ IkX, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("K,d", [(1, 4), (3, 2)])
def test_fast_with_full_sketch_equals_oful(K, d):
    env = envs.synthetic_mlogb(num_outcomes=K, dim=d, S=3.0, min_actions=3, max_actions=6)
    lf, lo = _fast(K, d, K * d), mlogb.oful(num_outcomes=K, dim=d)
    hp, key = _hp(K, S=1.0, beta="theory", beta_scale=0.01), jax.random.PRNGKey(4)
    es = env.init(key)
    mf = jax.jit(lambda s: rollout(mlogb.interact(lf, env), s, es, key, 60))(lf.init(hp))
    mo = jax.jit(lambda s: rollout(mlogb.interact(lo, env), s, es, key, 60))(lo.init(hp))
    assert int(mf.projected.sum()) > 0
    np.testing.assert_array_equal(mf.choice, mo.choice)
    np.testing.assert_allclose(mf.regret, mo.regret, atol=1e-10)
    assert float(mf.rho[-1]) == 0.0
