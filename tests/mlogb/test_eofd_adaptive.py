"""EOFD-MLogB with an adaptive sketch size (``max_sketch_size``, ``delta_target``): a target never
reached is the fixed sketch, a capacity >= Kd with a target always passed is OFUL-MLogB, the
active rank follows its rule (checked against a dense spectrum) and is monotone up to the
capacity, and vmap over a batch whose ranks differ equals loops."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from bandits_jax import mlogb
from bandits_jax.mlogb import confidence
from tests.mlogb.test_learners import _hp, dense_fd_spectrum


def _stream(K, d, T, N, seed):
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(T, d))
    xs = xs / np.linalg.norm(xs, axis=1, keepdims=True) * rng.uniform(0.5, 1.5, size=(T, 1))
    return jnp.asarray(xs), jnp.asarray(rng.integers(0, K + 1, size=T)), rng.normal(size=(T, N, d))


@functools.cache
def _runner(learner):
    """Jitted scan: scores on ``actions[t]``, then ``update(x[t], y[t])``; returns the final state
    and per round the scores and the state after the update."""

    def run(state, xs, ys, actions):
        def body(s, inp):
            x, y, acts = inp
            sc = learner.scores(s, acts)
            s = learner.update(s, x, y)
            return s, (sc, s)

        return lax.scan(body, state, (xs, ys, actions))

    return jax.jit(run)


def _sketches(states):
    return np.einsum("tdi,ti,tei->tde", states.V, states.mu, states.V)


def _adaptive(K, d, m0, m_max, tau, reg="paper"):
    return mlogb.eofd(
        num_outcomes=K,
        dim=d,
        sketch_size=m0,
        max_sketch_size=m_max,
        delta_target=tau,
        regularization=reg,
    )


def test_target_never_reached_equals_fixed_sketch():
    K, d, m0, T = 2, 3, 2, 20
    fixed = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m0)
    adaptive = _adaptive(K, d, m0, 5, float("inf"))
    hp = _hp(K, S=1.5, beta="theory", beta_scale=0.05)
    xs, ys, acts = _stream(K, d, T, 4, seed=3)
    sf, (scf, stf) = _runner(fixed)(fixed.init(hp), xs, ys, acts)
    sa, (sca, sta) = _runner(adaptive)(adaptive.init(hp), xs, ys, acts)
    assert sa.V.shape == (K * d, 5) and float(sf.rho) > 0.1
    np.testing.assert_array_equal(sta.rank, m0)
    np.testing.assert_allclose(sta.W, stf.W, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(sca, scf, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(sta.rho, stf.rho, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(_sketches(sta), _sketches(stf), rtol=1e-9, atol=1e-10)


def test_full_capacity_and_target_always_passed_equals_oful():
    # tau = 1: any discarded mass passes the target, so the rank grows while needed and, with
    # m_max >= Kd, the sketch keeps the whole Hessian: OFUL-MLogB's trajectory (fixed radius).
    K, d, T = 2, 2, 40
    le, lo = _adaptive(K, d, 1, K * d + 2, 1.0), mlogb.oful(num_outcomes=K, dim=d)
    hp = _hp(K, S=1.0, eta=3.0)
    xs, ys, acts = _stream(K, d, T, 5, seed=8)
    _, (sce, ste) = _runner(le)(le.init(hp), xs, ys, acts)
    _, (sco, sto) = _runner(lo)(lo.init(hp), xs, ys, acts)
    assert int(ste.info.projected.sum()) > 0  # the projection path is exercised
    np.testing.assert_allclose(ste.W, sto.W, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(sce, sco, rtol=1e-9, atol=1e-11)
    np.testing.assert_array_equal(np.argmax(sce, axis=1), np.argmax(sco, axis=1))  # choices
    np.testing.assert_array_equal(ste.rho, 0.0)
    assert int(ste.rank[0]) < K * d and int(ste.rank[-1]) == K * d  # grew up to the capacity


@pytest.mark.parametrize("reg", ["paper", "robust"])
def test_rank_rule_against_dense_spectrum(reg):
    """Each truncation picks the smallest r' in [r_t, m_max] whose discarded eigenvalue keeps
    Delta within tau (m_max if none); the rank is monotone and stops at m_max."""
    K, d, m0, m_max, lam = 2, 4, 1, 5, 0.8
    robust = reg == "robust"
    tau = 1.0 + 0.4 / lam
    budget_scale = (2.0 if robust else 1.0) * lam * (tau - 1.0)
    le = _adaptive(K, d, m0, m_max, tau, reg)
    hp = _hp(K, lam=lam, S=2.0)
    upd = jax.jit(le.update)
    s = le.init(hp)
    xs, ys, _ = _stream(K, d, 30, 1, seed=5)
    ranks = [int(s.rank)]
    for x, y in zip(np.asarray(xs), np.asarray(ys), strict=True):
        s1 = upd(s, x, y)
        V, mu, rho, r = np.asarray(s.V), np.asarray(s.mu), float(s.rho), int(s.rank)
        s2, Vh = dense_fd_spectrum(V, mu, np.asarray(s1.W).reshape(-1), x)
        ok = [j for j in range(r, m_max + 1) if rho + s2[j] <= budget_scale]
        r_new = ok[0] if ok else m_max
        assert int(s1.rank) == r_new
        np.testing.assert_allclose(float(s1.rho), rho + s2[r_new], rtol=1e-9, atol=1e-12)
        mu_ref = s2[:r_new] - s2[r_new]
        G_ref = (Vh[:r_new].T * mu_ref) @ Vh[:r_new]
        G = (np.asarray(s1.V) * np.asarray(s1.mu)) @ np.asarray(s1.V).T
        np.testing.assert_allclose(G, G_ref, atol=1e-9)
        np.testing.assert_array_equal(np.asarray(s1.mu)[r_new:], 0.0)
        Vn = np.asarray(s1.V)
        np.testing.assert_allclose(Vn.T @ Vn, np.eye(m_max), atol=1e-9)  # zero-weight too
        if r_new < m_max:  # Delta_t within the target
            assert float(confidence.delta_factor(s1.rho, lam, robust)) <= tau + 1e-12
        ranks.append(int(s1.rank))
        s = s1
    assert ranks == sorted(ranks) and len(set(ranks)) > 2 and ranks[-1] == m_max


def test_vmap_with_different_ranks_equals_loops():
    K, d, T = 2, 3, 15
    le = _adaptive(K, d, 1, 5, 1.5, "robust")
    grid = _hp(K, lam=np.array([0.2, 1.0, 5.0]), S=1.5)
    xs, ys, acts = _stream(K, d, T, 4, seed=9)
    run = _runner(le)
    batched_s, batched = jax.vmap(run, in_axes=(0, None, None, None))(
        jax.vmap(le.init)(grid), xs, ys, acts
    )
    assert len(set(np.asarray(batched_s.rank).tolist())) > 1  # the ranks differ in the batch
    for g in range(3):
        hp_g = jax.tree_util.tree_map(lambda a, g=g: a[g], grid)
        s_g, single = run(le.init(hp_g), xs, ys, acts)
        np.testing.assert_array_equal(batched[1].rank[g], single[1].rank)  # ranks per round
        np.testing.assert_allclose(batched_s.W[g], s_g.W, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(batched[0][g], single[0], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(batched[1].rho[g], single[1].rho, rtol=1e-9, atol=1e-12)
