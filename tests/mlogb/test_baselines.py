"""Baselines in the MLogB protocol (uniform, greedy, LinUCB): each against an independent
computation, plus the suite every learner passes (jit == eager, dtypes, vmap grid == loop, the
runner, NaN rejection, buffer donation)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from bandits_jax import mlogb
from bandits_jax.linalg import roots
from bandits_jax.mlogb import bonus
from bandits_jax.mlogb.bonus import argmax_tie
from bandits_jax.mlogb.linucb import linucb_hyperparams
from bandits_jax.mlogb.uniform import uniform_hyperparams
from bandits_jax.status import Status
from references import linucb_numpy
from tests import xla_defaults


def _rewards(K):
    return list(np.linspace(1 / K, 1, K))


@functools.cache
def _learner(name, K, d):
    if name == "uniform":
        return mlogb.uniform(num_outcomes=K, dim=d)
    if name == "greedy":  # the EOFD base is covered by the trajectory test
        return mlogb.greedy(num_outcomes=K, dim=d)
    return mlogb.linucb(num_outcomes=K, dim=d, intercept=name == "linucb")


def _hp(name, K, dtype=jnp.float64, grid=False):
    if name == "uniform":
        return uniform_hyperparams(
            seed=np.array([1, 2]) if grid else 3, rewards=_rewards(K), dtype=dtype
        )
    if name == "greedy":
        lam = np.array([0.5, 2.0]) if grid else 0.8
        return mlogb.hyperparams(lam=lam, eta=1.5, S=1.0, rewards=_rewards(K), dtype=dtype)
    lam, alpha = (np.array([0.5, 2.0]), np.array([0.1, 1.0])) if grid else (0.7, 0.4)
    return linucb_hyperparams(lam=lam, alpha=alpha, rewards=_rewards(K), dtype=dtype)


def _stream(K, d, T, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(T, d))
    X *= rng.uniform(0.5, 1.5, size=(T, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
    return X, rng.integers(0, K + 1, size=T)


def _feed(learner, state, X, Y):
    """All updates in one compiled scan; returns the final state and every W_t."""

    def body(s, xy):
        s = learner.update(s, xy[0], xy[1])
        return s, s.W

    run = xla_defaults.jit(lambda s: lax.scan(body, s, (jnp.asarray(X), jnp.asarray(Y))))
    return run(state)


@functools.cache
def _update(name, K, d):
    """One compiled (donating) update per learner."""
    return jax.jit(_learner(name, K, d).update, donate_argnums=0)


# The protocol checks (jit == eager, dtypes, vmap over trials and grids, donation, bad input
# eagerly and under jit) of every baseline are the shared suites': tests/test_conformance.py and
# tests/mlogb/test_bad_input.py.


# --- uniform ---------------------------------------------------------------------------------


def test_uniform_choice_is_uniform_over_the_mask():
    d, T = 4, 4000
    learner = _learner("uniform", 1, d)
    actions = jnp.asarray(np.random.default_rng(0).normal(size=(10, d)))
    mask = jnp.array([1, 0, 1, 1, 0, 1, 1, 0, 1, 1], bool)

    def body(s, _):
        i = learner.select(s, actions, mask)
        return learner.update(s, actions[i], 1), i

    _, picks = jax.jit(lambda s: lax.scan(body, s, None, length=T))(learner.init(_hp("uniform", 1)))
    counts = np.bincount(np.asarray(picks), minlength=10)
    assert counts[~np.asarray(mask)].sum() == 0
    obs = counts[np.asarray(mask)]
    expected = T / obs.size
    chi2 = np.sum((obs - expected) ** 2 / expected)
    assert chi2 < 30.0, (chi2, counts)  # 6 degrees of freedom: P(chi2 > 30) < 5e-5


def test_uniform_hyperparams_grid_and_validation():
    hp = uniform_hyperparams(seed=np.arange(3), rewards=[0.5, 1.0], dtype=jnp.float32)
    assert hp.seed.shape == (3,) and hp.rewards.shape == (3, 2)
    assert hp.rewards.dtype == jnp.float32
    states = jax.vmap(_learner("uniform", 2, 3).init)(hp)
    assert len({tuple(np.asarray(k)) for k in states.key}) == 3
    for kwargs, word in (
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"rewards": [-1.0]}, "rewards"),
        ({"rewards": [float("nan")]}, "rewards"),
    ):
        with pytest.raises(ValueError, match=word):
            uniform_hyperparams(**kwargs)
    with pytest.raises(ValueError, match="rewards"):
        _learner("uniform", 2, 3).init(uniform_hyperparams())


# --- greedy ----------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [None, 2])
def test_greedy_trajectory_equals_its_base(m):
    K, d = 2, 3
    base = (
        mlogb.oful(num_outcomes=K, dim=d)
        if m is None
        else mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m)
    )
    if m is None:  # the common suite's greedy and its compiled update
        greedy, upd_g = _learner("greedy", K, d), _update("greedy", K, d)
    else:
        greedy = mlogb.greedy(num_outcomes=K, dim=d, sketch_size=m)
        upd_g = jax.jit(greedy.update)
    hp = _hp("greedy", K)
    sg, sb = greedy.init(hp), base.init(hp)
    upd_b = jax.jit(base.update)
    X, Y = _stream(K, d, 8, seed=5)
    for x, y in zip(X, Y, strict=True):
        x, y = jnp.asarray(x), jnp.int32(y)
        sg, sb = upd_g(sg, x, y), upd_b(sb, x, y)
        np.testing.assert_allclose(sg.W, sb.W, rtol=1e-12, atol=1e-14)
        assert float(sg.info.beta) == 0.0 and int(sg.status) == int(sb.status)
    assert float(jnp.abs(sg.W).max()) > 0.05  # the estimate moved


@pytest.mark.parametrize("K,m", [(1, None), (3, None), (1, 2), (3, 4)])
def test_greedy_scores_are_the_base_estimate_without_bonus(K, m):
    d = 3
    base = (
        mlogb.oful(num_outcomes=K, dim=d)
        if m is None
        else mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m)
    )
    greedy = mlogb.greedy(num_outcomes=K, dim=d, sketch_size=m)
    hp = mlogb.hyperparams(lam=0.5, eta=2.0, S=1.0, rewards=_rewards(K), beta=0.3)
    rng = np.random.default_rng(6)
    s = base.init(hp)._replace(W=jnp.asarray(rng.normal(size=(K, d))))
    A = jnp.asarray(rng.normal(size=(8, d)))
    mask = jnp.array([1, 1, 0, 1, 1, 1, 0, 1], bool)
    est, bon = greedy.score_parts(s, A)
    est_b, bon_b = base.score_parts(s, A)
    np.testing.assert_allclose(est, est_b, rtol=1e-12)
    np.testing.assert_array_equal(bon, 0.0)
    assert float(jnp.max(bon_b)) > 0.0  # the base learner does add a bonus
    assert int(greedy.select(s, A, mask)) == int(argmax_tie(est_b, mask))
    # Independent formula: w^T x (K = 1), r^T sigma(W x) (K >= 2).
    Z = np.asarray(A) @ np.asarray(s.W).T
    if K == 1:
        want = Z[:, 0]
        np.testing.assert_allclose(greedy.scores(s, A), 1 / (1 + np.exp(-want)), rtol=1e-12)
    else:
        e = np.exp(Z)
        want = (e / (1 + e.sum(axis=1, keepdims=True))) @ np.asarray(_rewards(K))
    np.testing.assert_allclose(est, want, rtol=1e-12)


def test_greedy_passes_keyword_arguments_to_its_base():
    mlogb.greedy(num_outcomes=1, dim=3, max_newton_steps=5)
    with pytest.raises(TypeError, match="no_such_option"):
        mlogb.greedy(num_outcomes=1, dim=3, sketch_size=2, no_such_option=1)
    with pytest.raises(ValueError, match="sketch_size"):
        mlogb.greedy(num_outcomes=1, dim=3, sketch_size=0)


# --- LinUCB ----------------------------------------------------------------------------------


LINUCB = ("linucb", "linucb-nointercept")


def _aug(X, name):
    """The regression features: ``[X, 1]`` with the intercept, else ``X``."""
    X = np.atleast_2d(X)
    return np.hstack([X, np.ones((X.shape[0], 1))]) if name == "linucb" else X


@pytest.mark.parametrize("name", LINUCB)
@pytest.mark.parametrize("K", [1, 3])
def test_linucb_equals_dense_ridge_solve(K, name):
    d, T, lam, alpha = 4, 40, 0.7, 0.4
    learner = _learner(name, K, d)
    X, Y = _stream(K, d, T, seed=7)
    s, _ = _feed(learner, learner.init(_hp(name, K)), X, Y)
    r = np.concatenate([[0.0], _rewards(K)])[Y]
    Z = _aug(X, name)
    A = lam * np.eye(Z.shape[1]) + Z.T @ Z
    A_inv, theta = np.linalg.inv(A), np.linalg.solve(A, Z.T @ r)
    np.testing.assert_allclose(s.A_inv, A_inv, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(s.theta, theta[:d], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(s.bias, theta[d] if name == "linucb" else 0.0, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(s.W[1:], 0.0)
    assert int(s.status) == roots.CONVERGED and int(s.num_failures) == 0
    acts = _stream(K, d, 6, seed=8)[0]
    est, bon = learner.score_parts(s, jnp.asarray(acts))
    Za = _aug(acts, name)
    np.testing.assert_allclose(est, Za @ theta, rtol=1e-9, atol=1e-12)
    bonus_dense = alpha * np.sqrt(np.einsum("nd,de,ne->n", Za, A_inv, Za))
    np.testing.assert_allclose(bon, bonus_dense, rtol=1e-9)
    np.testing.assert_allclose(learner.scores(s, jnp.asarray(acts)), Za @ theta + bonus_dense)


def _recorded_stream(K, d, T, N, seed):
    """Action sets of varying size (masked), each action's outcome if chosen, expected rewards."""
    rng = np.random.default_rng(seed)
    acts = rng.normal(size=(T, N, d)) / np.sqrt(d) + 0.3  # off-centre: the intercept matters
    mask = np.arange(N)[None, :] < rng.integers(2, N + 1, size=(T, 1))
    outcomes = rng.integers(0, K + 1, size=(T, N))
    expected = rng.uniform(size=(T, N))
    return acts, mask, outcomes, expected


@functools.cache
def _play_jax(name, K, d):
    """The library learner on a recorded stream: choices, outcomes and theta of every round."""
    learner = _learner(name, K, d)

    def body(s, rec):
        acts, mask, outcomes = rec
        est, bon = learner.score_parts(s, acts)
        i, status = bonus.select_index(est + bon, mask)
        s = learner.update(s, acts[i], outcomes[i])
        return s, (i, status, jnp.concatenate([s.theta, s.bias[None]]), s.status)

    return xla_defaults.jit(
        lambda s, acts, mask, outcomes: lax.scan(body, s, (acts, mask, outcomes))
    )


@pytest.mark.parametrize("name", LINUCB)
@pytest.mark.parametrize("K", [1, 3])
def test_linucb_equals_numpy_standard_linucb_on_a_stream(K, name):
    d, T, N, lam, alpha = 4, 60, 6, 0.7, 0.4
    acts, mask, outcomes, expected = _recorded_stream(K, d, T, N, seed=11 + K)
    ref = linucb_numpy.play(
        linucb_numpy.NumpyLinUCB(
            dim=d, lam=lam, alpha=alpha, rewards=_rewards(K), intercept=name == "linucb"
        ),
        acts,
        mask,
        outcomes,
        expected,
    )
    s0 = _learner(name, K, d).init(_hp(name, K))
    _, (choice, sel_status, theta, status) = _play_jax(name, K, d)(
        s0, jnp.asarray(acts), jnp.asarray(mask), jnp.asarray(outcomes, jnp.int32)
    )
    np.testing.assert_array_equal(np.asarray(sel_status), Status.CONVERGED)
    np.testing.assert_array_equal(np.asarray(status), roots.CONVERGED)
    np.testing.assert_array_equal(np.asarray(choice), ref["choice"])
    want = ref["theta"] if name == "linucb" else np.hstack([ref["theta"], np.zeros((T, 1))])
    np.testing.assert_allclose(np.asarray(theta), want, rtol=1e-9, atol=1e-12)
    assert len(set(ref["choice"].tolist())) > 2  # the choices do vary


def test_linucb_intercept_fits_an_offset_the_plain_one_cannot():
    """Rewards 1 whatever x, actions centred on 0: the intercept absorbs the mean, the plain
    ridge regression cannot (its estimate at x = 0 is 0)."""
    K, d, T = 1, 3, 200
    X = np.random.default_rng(3).normal(size=(T, d))
    Y = np.ones(T, np.int64)
    for name in LINUCB:
        learner = _learner(name, K, d)
        s, _ = _feed(learner, learner.init(_hp(name, K)), X, Y)
        est0 = float(learner.score_parts(s, jnp.zeros((1, d)))[0][0])
        lam = 0.7  # the dense ridge solution's prediction at x = 0
        if name == "linucb":
            want = np.linalg.solve(lam * np.eye(d + 1) + _aug(X, name).T @ _aug(X, name),
                                   _aug(X, name).T @ Y)[d]  # fmt: skip
            assert want > 0.99 and est0 == pytest.approx(want, rel=1e-9)
        else:
            assert est0 == 0.0


def test_linucb_hyperparams_grid_and_validation():
    hp = linucb_hyperparams(lam=[0.5, 1.0], alpha=0.3, rewards=[0.5, 1.0])
    assert hp.lam.shape == hp.alpha.shape == (2,) and hp.rewards.shape == (2, 2)
    for kwargs, word in (
        ({"lam": 0.0}, "lam"),
        ({"lam": float("nan")}, "lam"),
        ({"alpha": -0.1}, "alpha"),
        ({"alpha": float("inf")}, "alpha"),
        ({"rewards": [-1.0]}, "rewards"),
        ({"rewards": [float("nan")]}, "rewards"),
    ):
        with pytest.raises(ValueError, match=word):
            linucb_hyperparams(**{"lam": 1.0, "alpha": 0.5, **kwargs})
    for bad in (1, "yes", None):
        with pytest.raises(ValueError, match="intercept"):
            mlogb.linucb(num_outcomes=1, dim=3, intercept=bad)
    learner = _learner("linucb", 2, 3)
    with pytest.raises(ValueError, match="rewards"):
        learner.init(linucb_hyperparams(lam=1.0, alpha=0.5))
    with pytest.raises(ValueError, match="vmap"):
        learner.init(hp)  # a grid must be vmapped
    s = learner.init(_hp("linucb", 2))
    with pytest.raises(ValueError, match="actions"):
        learner.scores(s, jnp.ones((4, 5)))
    with pytest.raises(ValueError, match="x contains NaN"):
        learner.update(s, jnp.array([1.0, jnp.nan, 0.0]), 1)
    with pytest.raises(ValueError, match="y must"):
        learner.update(s, jnp.ones(3), 3)
