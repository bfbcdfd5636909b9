"""EOFD-MLogB and OFUL-MLogB: Lemma 1 against dense algebra, m >= Kd equivalence, jit/vmap,
dtypes, tie rule, NaN guard, input validation."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import envs, mlogb, protocols
from bandits_jax.linalg import roots
from bandits_jax.mlogb import model
from bandits_jax.mlogb.eofd import lemma1_matrices
from bandits_jax.sim import rollout
from tests import xla_defaults


def _hp(K, dtype=jnp.float64, **kw):
    kw = {"lam": 0.8, "eta": 1.5, "S": 1.0, "beta": 0.3, **kw}
    return mlogb.hyperparams(rewards=list(np.linspace(1 / K, 1, K)), dtype=dtype, **kw)


@functools.cache
def _learners(K, d, m):
    return mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m), mlogb.oful(num_outcomes=K, dim=d)


@functools.cache
def _compiled(learner, name):
    """One program per learner function, at XLA's defaults (the tests compare with dense
    references)."""
    return xla_defaults.jit(getattr(learner, name))


def _dense_z(V, mu, lam):
    """``Z = lam I + V diag(mu) V^T`` formed densely (eq. 11)."""
    V, mu = np.asarray(V), np.asarray(mu)
    return float(lam) * np.eye(V.shape[0]) + (V * mu) @ V.T


def _feed(learner, state, K, d, T, seed):
    rng = np.random.default_rng(seed)
    upd = _compiled(learner, "update")
    for _ in range(T):
        x = rng.normal(size=d)
        state = upd(state, x / np.linalg.norm(x) * rng.uniform(0.5, 1.5), rng.integers(0, K + 1))
    return state


@pytest.mark.parametrize("K,d,m", [(3, 5, 4), (1, 7, 3)])
def test_lemma1_matches_dense_spectral_norm(K, d, m):
    le, lo = _learners(K, d, m)
    s = _feed(le, le.init(_hp(K, S=3.0)), K, d, 12, seed=1)
    Zinv = np.linalg.inv(_dense_z(s.V, s.mu, s.hparams.lam))
    X = np.random.default_rng(2).normal(size=(6, d))
    A = np.asarray(
        xla_defaults.jit(lemma1_matrices, static_argnums=4)(
            s.V, s.mu, s.hparams.lam, jnp.asarray(X), K
        )
    )
    for n in range(len(X)):
        IkX = np.kron(np.eye(K), X[n][:, None])
        dense = IkX.T @ Zinv @ IkX
        np.testing.assert_allclose(A[n], dense, rtol=1e-9, atol=1e-12)
        # ||Z^{-1/2}(I kron x)||_2^2 = ||A(x)||_2 (eq. 17).
        w, Q = np.linalg.eigh(Zinv)
        lhs = np.linalg.norm((Q * np.sqrt(w)) @ Q.T @ IkX, 2) ** 2
        np.testing.assert_allclose(np.linalg.eigvalsh(A[n])[-1], lhs, rtol=1e-9)


def dense_scores(W, Zinv, X, r, beta):
    """Eq. (16) (K = 1) / eq. (19) (K >= 2) with a dense ``Z^{-1}``, one action at a time."""
    K = W.shape[0]
    out = []
    for x in X:
        IkX = np.kron(np.eye(K), x[:, None])
        A = IkX.T @ Zinv @ IkX
        z = W @ x
        if K == 1:
            out.append(1 / (1 + np.exp(-(z[0] + np.sqrt(beta * A[0, 0])))))
        else:
            sg = np.exp(z) / (1 + np.exp(z).sum())
            J = np.diag(sg) - np.outer(sg, sg)
            v = np.kron(J @ r, x)  # (grad sigma kron x) r
            out.append(
                r @ sg
                + np.sqrt(beta) * np.sqrt(v @ Zinv @ v)
                + 0.5 * r.sum() * beta * np.linalg.eigvalsh(A)[-1]
            )
    return np.array(out)


def _sig(z):
    return np.exp(z) / (1 + np.exp(z).sum())


def dense_ons_step(Z, W, x, y, eta, S):
    """Eq. (8) with the dense surrogate ``Zt = Z + eta grad^2 l(W)``, then the dense QCQP (9)
    in the Zt-norm by bisection on its dual variable. Returns ``(w_new, ||w'||)``."""
    K = W.shape[0]
    sg = _sig(W @ x)
    J = np.diag(sg) - np.outer(sg, sg)
    Zt = Z + eta * np.kron(J, np.outer(x, x))
    e_y = np.eye(K)[y - 1] if y > 0 else np.zeros(K)
    wp = W.reshape(-1) - eta * np.linalg.solve(Zt, np.kron(sg - e_y, x))
    if np.linalg.norm(wp) <= S:
        return wp, np.linalg.norm(wp)
    lo, hi = 0.0, 1.0
    w_of = lambda nu: np.linalg.solve(Zt + nu * np.eye(len(wp)), Zt @ wp)  # noqa: E731
    while np.linalg.norm(w_of(hi)) > S:
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.linalg.norm(w_of(mid)) > S else (lo, mid)
    return w_of(hi), np.linalg.norm(wp)


def dense_fd_spectrum(V, mu, w_new, x):
    """Algorithm 1's ``[V mu^{1/2}, B]^T`` at ``W_{t+1}`` (eq. 12-14) by the paper's full SVD:
    returns the squared singular values (descending) and right singular vectors (rows)."""
    K = len(w_new) // len(x)
    sn = _sig(w_new.reshape(K, -1) @ x)
    Jn = np.diag(sn) - np.outer(sn, sn)
    ev, P = np.linalg.eigh(Jn)
    B = np.kron(P * np.sqrt(np.clip(ev, 0, None)), x[:, None])
    _, sv, Vh = np.linalg.svd(np.concatenate([V * np.sqrt(mu), B], axis=1).T)
    return np.concatenate([sv**2, np.zeros(max(0, Vh.shape[0] - len(sv)))]), Vh


@pytest.mark.parametrize("K", [1, 3])
def test_scores_match_dense_formula(K):
    d, m = 4, 3
    le, lo = _learners(K, d, m)
    hp = _hp(K, S=2.0)
    X = np.random.default_rng(5).normal(size=(7, d))
    for learner in (le, lo):
        s = _feed(learner, learner.init(hp), K, d, 10, seed=3)
        Z = _dense_z(s.V, s.mu, hp.lam) if hasattr(s, "V") else np.asarray(s.H)
        want = dense_scores(np.asarray(s.W), np.linalg.inv(Z), X, np.asarray(hp.rewards), 0.3)
        got = np.asarray(_compiled(learner, "scores")(s, jnp.asarray(X)))
        np.testing.assert_allclose(got, want, rtol=1e-9)


@pytest.mark.parametrize("K,d", [(1, 4), (3, 2)])
def test_eofd_with_full_sketch_equals_oful(K, d):
    # m >= Kd: no truncation, rho = 0, the same trajectory as the full Hessian (Theorem 2 remark).
    env = envs.synthetic_mlogb(num_outcomes=K, dim=d, S=3.0, min_actions=3, max_actions=6)
    le, lo = _learners(K, d, K * d + 3)
    hp, key = _hp(K, S=1.0, beta="theory", beta_scale=0.01), jax.random.PRNGKey(4)
    es = env.init(key)
    run_e = jax.jit(lambda s: rollout(mlogb.interact(le, env), s, es, key, 60))
    run_o = jax.jit(lambda s: rollout(mlogb.interact(lo, env), s, es, key, 60))
    me, mo = run_e(le.init(hp)), run_o(lo.init(hp))
    assert int(me.projected.sum()) > 0  # the projection path is exercised
    np.testing.assert_array_equal(me.choice, mo.choice)
    np.testing.assert_allclose(me.regret, mo.regret, atol=1e-10)
    np.testing.assert_allclose(me.beta, mo.beta, rtol=1e-9)
    assert float(me.rho[-1]) == 0.0


def test_round_one_tie_rule_picks_lowest_index():
    K, d = 1, 3
    le, lo = _learners(K, d, 2)
    X = jnp.asarray(np.eye(3)[[2, 0, 1]])  # three unit-norm actions: all scores equal at W = 0
    for learner in (le, lo):
        s = learner.init(_hp(K))
        assert int(learner.select(s, X, jnp.array([True, True, True]))) == 0
        assert int(learner.select(s, X, jnp.array([False, True, True]))) == 1


def test_nonfinite_update_is_rejected_and_flagged():
    K, d = 2, 3
    le, lo = _learners(K, d, 2)
    for learner in (le, lo):
        s0 = learner.init(_hp(K))
        s1 = jax.jit(learner.update)(s0, jnp.array([0.1, jnp.nan, 0.2]), 1)
        assert int(s1.status) == roots.NONFINITE
        np.testing.assert_array_equal(s1.W, s0.W)
        assert int(s1.t) == 0


def test_outcome_sampler_is_inverse_cdf():
    z = jnp.array([0.3, -0.2])
    p = np.asarray(model.probabilities(z))
    us = np.linspace(0, 0.999, 50)
    got = np.array([int(model.sample_outcome(z, u)) for u in us])
    np.testing.assert_array_equal(got, np.minimum(np.searchsorted(np.cumsum(p), us, "right"), 2))


def test_section4_recipe():
    K, d, S, T = 4, 100, 2.0, 1000
    rec = mlogb.section4(num_outcomes=K, dim=d, S=S, horizon=T, l=np.array([0.75, -0.5]), e=0.0)
    alpha = 2 * (1 + S) + np.log(K + 1)
    np.testing.assert_allclose(
        rec.hparams.lam, (np.sqrt(K) * d) ** np.array([0.75, -0.5]) * np.sqrt(K) * alpha * S
    )
    np.testing.assert_allclose(rec.hparams.eta, S / 2 + np.log(K + 1) / 4)
    np.testing.assert_allclose(rec.hparams.delta, 1 / T)
    assert rec.sketch_size == 40 and rec.hparams.rewards.shape == (2, K)


@pytest.mark.parametrize(
    "kwargs,word",
    [
        ({"lam": 0.0}, "lam"),
        ({"S": -1.0}, "S"),
        ({"eta": float("nan")}, "eta"),
        ({"delta": 1.5}, "delta"),
        ({"beta": "nope"}, "beta"),
    ],
)
def test_bad_hyperparams(kwargs, word):
    with pytest.raises(ValueError, match=word):
        _hp(2, **kwargs)


def test_bad_static_and_shapes():
    with pytest.raises(ValueError, match="num_outcomes"):
        mlogb.eofd(num_outcomes=0, dim=3, sketch_size=2)
    with pytest.raises(ValueError, match="sketch_size"):
        mlogb.eofd(num_outcomes=1, dim=3, sketch_size=0)
    with pytest.raises(ValueError, match="dim"):
        mlogb.oful(num_outcomes=1, dim=0)
    le, lo = _learners(2, 3, 2)
    with pytest.raises(ValueError, match="rewards"):
        le.init(_hp(3))
    s = le.init(_hp(2))
    with pytest.raises(ValueError, match="actions"):
        le.scores(s, jnp.ones((4, 5)))
    with pytest.raises(ValueError, match="NaN"):
        lo.scores(lo.init(_hp(2)), jnp.array([[1.0, jnp.nan, 0.0]]))
    with pytest.raises(ValueError, match="x must"):
        le.update(s, jnp.ones(4), 1)
    with pytest.raises(ValueError, match="y must"):
        le.update(s, jnp.ones(3), 5)


@pytest.mark.parametrize("K,d,m", [(1, 6, 2), (3, 3, 4)])
def test_one_eofd_update_equals_dense_algorithm2_step(K, d, m):
    """Eq. (8) with the dense surrogate Zt = Z_t + eta grad^2 l_t(W_t), then the dense QCQP (9),
    then Algorithm 1 at W_{t+1} by the paper's SVD: the sketched update must agree."""
    le, _ = _learners(K, d, m)
    hp = _hp(K, S=0.6, eta=2.0)
    s = _feed(le, le.init(hp), K, d, 9, seed=11)
    rng = np.random.default_rng(12)
    x, y = rng.normal(size=d), K
    lam, eta, S = 0.8, 2.0, 0.6
    V, mu, W = np.asarray(s.V), np.asarray(s.mu), np.asarray(s.W)
    Z = lam * np.eye(K * d) + (V * mu) @ V.T
    w_new, wp_norm = dense_ons_step(Z, W, x, y, eta, S)
    assert wp_norm > S  # the projection is active in this case
    s1 = _compiled(le, "update")(s, jnp.asarray(x), y)
    np.testing.assert_allclose(np.asarray(s1.W).reshape(-1), w_new, rtol=1e-8, atol=1e-10)
    # Algorithm 1 at W_{t+1} (eq. 12-15) by the paper's full SVD.
    s2, Vh = dense_fd_spectrum(V, mu, w_new, x)
    sv = np.sqrt(s2)
    mu_ref = sv[:m] ** 2 - sv[m] ** 2
    np.testing.assert_allclose(np.asarray(s1.mu), mu_ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(
        (np.asarray(s1.V) * np.asarray(s1.mu)) @ np.asarray(s1.V).T,
        (Vh[:m].T * mu_ref) @ Vh[:m],
        atol=1e-9,
    )
    np.testing.assert_allclose(float(s1.rho), float(s.rho) + sv[m] ** 2, rtol=1e-9)


@pytest.mark.parametrize("kind", ["eofd", "eofd-buffered", "linucb"])
def test_interact_reports_the_diagnostics_the_state_declares(kind):
    """``mlogb.interact`` reads ``info``, ``rho``, ``rank`` where the state has them (the
    ``protocols.With*`` protocols), else reports NaN ``beta``, ``rho = 0``, ``rank = -1``."""
    K, d = 2, 3
    rec = mlogb.tuned(kind, num_outcomes=K, dim=d, S=1.0, horizon=4)
    env = envs.synthetic_mlogb(num_outcomes=K, dim=d, min_actions=2, max_actions=4)
    state0, env0 = rec.learner.init(rec.hparams), env.init(jax.random.key(0))
    state, _, m = mlogb.interact(rec.learner, env)(state0, env0, jax.random.key(1))
    has = set(type(state)._fields)
    assert isinstance(state, protocols.WithUpdateInfo) == ("info" in has)
    assert isinstance(state, protocols.WithSketchError) == ("rho" in has)
    assert isinstance(state, protocols.WithSketchRank) == ("rank" in has)
    if "info" in has:
        assert m.beta == state.info.beta and m.newton_steps == state.info.newton_steps
    else:
        assert np.isnan(m.beta) and m.newton_steps == 0 and not m.projected
    assert m.rho == (state.rho if "rho" in has else 0.0)
    assert m.rank == (state.rank if "rank" in has else -1)


def test_a_rewards_grid_is_each_point_built_alone():
    """``learner_base.grid`` with MLogB's ``(..., K)`` rewards: every grid point of
    ``mlogb.hyperparams`` equals that point built from scalars."""
    lam = np.asarray([[0.5], [2.0]])
    rewards = np.asarray([[0.5, 1.0], [0.25, 1.0], [1.0, 3.0]])
    hp = mlogb.hyperparams(lam=lam, eta=1.0, S=2.0, rewards=rewards, beta="theory")
    assert hp.lam.shape == (2, 3) and hp.rewards.shape == (2, 3, 2)
    for i in range(2):
        for j in range(3):
            one = mlogb.hyperparams(lam=float(lam[i, 0]), eta=1.0, S=2.0, rewards=rewards[j],
                                    beta="theory")  # fmt: skip
            for got, want in zip(hp, one, strict=True):
                assert got.dtype == want.dtype
                np.testing.assert_array_equal(np.asarray(got)[i, j], want)
    with pytest.raises(ValueError, match=r"^hyperparams: .*must broadcast"):
        mlogb.hyperparams(lam=[1.0, 2.0], eta=1.0, S=1.0, rewards=np.ones((3, 2)))
