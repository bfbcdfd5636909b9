"""The JAX learners reproduce the numpy references (references.mlogb_numpy), float64,
on fixed action sets and outcome uniforms (actions with distinct norms, so no ties); the JAX side
is compiled at XLA's defaults (what users run)."""

import functools

import jax
import numpy as np
import pytest

from bandits_jax import mlogb
from bandits_jax.envs.replay import replay_mlogb, replay_state
from bandits_jax.sim.runner import init_run, play
from references import mlogb_numpy as ref
from tests import xla_defaults

EPS = np.finfo(np.float64).eps


def trajectory_tol(T: int, kappa: float) -> float:
    """Relative tolerance between two float64 implementations of a T-round trajectory.

    Each round solves with the surrogate ``Ztilde`` (condition number ``kappa``), so its result
    carries a relative error of order ``kappa * eps``; the round maps (Newton step, Lemma 2's
    projection, FD truncation, whose Gram is 1-Lipschitz in the core) pass earlier errors on
    with O(1) gain, so they add up over the rounds: ``T kappa eps``. The factor 64 covers the
    sums of O(D) terms and Lemma 2's root (both stop within ~8 eps of the root's norm)."""
    return 64.0 * T * kappa * EPS


def kappa_bound(T: int, lam: float, eta: float, x_max: float) -> float:
    """Bound on the condition number of every surrogate ``Ztilde = Z + eta grad^2 l`` of a
    T-round run: ``lam I <= Ztilde`` and ``Ztilde <= lam I + (T + eta) x_max^2 I``, since each
    absorbed Hessian ``grad sigma kron x x^T`` has norm at most ``||x||^2`` (the eigenvalues of
    ``diag(s) - s s^T`` lie in [0, 1])."""
    return 1.0 + (T + eta) * x_max**2 / lam


def _stream(K, d, T, N, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(T, N, d))
    X /= np.linalg.norm(X, axis=2, keepdims=True)
    X *= rng.uniform(0.6, 1.0, size=(T, N, 1))  # distinct norms: no ties at round 1
    mask = np.arange(N)[None, :] < rng.integers(N // 2, N + 1, size=(T, 1))
    W_star = rng.normal(size=(K, d))
    W_star *= 2.5 / np.linalg.norm(W_star)
    return X, mask, rng.uniform(size=T), W_star


@functools.cache
def _compiled_replay(learner, N, T):
    """One compiled (XLA defaults) T-round replay per learner object, shared by the tests."""
    env = replay_mlogb(num_outcomes=learner.num_outcomes, dim=learner.dim, max_actions=N)
    return xla_defaults.jit(lambda s: play(mlogb.interact(learner, env), s, T))


def replay_run(learner, kw, X, mask, U, W_star):
    """Plays ``learner`` (hyperparameters ``kw``) on the recorded stream, compiled at XLA's
    defaults: ``(final, metrics)``."""
    T, N, d = X.shape
    state = init_run(
        learner.init(mlogb.hyperparams(**kw)),
        replay_state(X, mask, U, W_star, kw["rewards"]),
        jax.random.PRNGKey(0),
    )
    return _compiled_replay(learner, N, T)(state)


def assert_replay_matches(final, met, want, np_learner, kw, X):
    """Choices and outcomes equal; regret to a few ulps; the final W (and rho, acc) within
    :func:`trajectory_tol` of the reference's."""
    T = X.shape[0]
    tol = trajectory_tol(T, kappa_bound(T, kw["lam"], kw["eta"], np.max(np.linalg.norm(X, axis=2))))
    np.testing.assert_array_equal(np.asarray(met.choice), want["chosen"])
    np.testing.assert_array_equal(np.asarray(met.y), want["y"])
    # r.sigma(W* x) of the same actions on both sides: a few ulps of sum |r|.
    atol = 8 * EPS * np.sum(np.abs(kw["rewards"]))
    np.testing.assert_allclose(np.asarray(met.regret), want["regret"], rtol=0, atol=atol)
    W = np.asarray(final.learner.W)
    np.testing.assert_allclose(W, want["W"][-1], rtol=tol, atol=tol * kw["S"])
    rho = float(getattr(final.learner, "rho", 0.0))  # OFUL keeps no sketch
    np.testing.assert_allclose(rho, getattr(np_learner, "rho", 0.0), rtol=tol, atol=tol * kw["lam"])
    acc = float(final.learner.acc)
    np.testing.assert_allclose(acc, np_learner.acc, rtol=tol, atol=tol * abs(np_learner.acc))


@functools.cache
def _learner(algo, K, d, m):
    if algo == "eofd":
        return mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m)
    if algo == "eofd-batched":  # the FD core as a GPU runs it (CPU default at K >= 2: LAPACK)
        return mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m, solver="batched")
    if algo == "oful-batched":  # Cholesky solves as a GPU runs them (CPU default: eigh)
        return mlogb.oful(num_outcomes=K, dim=d, solver="batched")
    return mlogb.oful(num_outcomes=K, dim=d)


# One compiled program per (algo, shape); the radius mode and S are data (hyperparameters).
SHAPES = [(1, 6, 2), (3, 3, 4)]  # K, d, m (m < K d: the sketch truncates)
RADII = [("theory", 0.02, 1.0), (0.4, 1.0, 1.5), ("order", 0.1, 1.0)]  # beta, beta_scale, S
ALGOS = [(a, *shape) for a in ("eofd", "oful", "oful-batched") for shape in SHAPES]
ALGOS += [("eofd-batched", 3, 3, 4)]


@pytest.mark.parametrize("beta,beta_scale,S", RADII)
@pytest.mark.parametrize("algo,K,d,m", ALGOS)
def test_jax_matches_numpy_reference(K, d, m, beta, beta_scale, S, algo):
    """Choices, outcomes, regret and the final W, rho and eq. (36)'s sum against the numpy
    reference of Algorithm 2 (explicit SVDs) or OFUL-MLogB (dense Hessian)."""
    T, N = 40, 8
    X, mask, U, W_star = _stream(K, d, T, N, seed=K * 10 + d)
    rewards = np.linspace(1 / K, 1, K)
    kw = dict(lam=0.7, eta=1.3, S=S, rewards=rewards, beta=beta, beta_scale=beta_scale)
    if algo.startswith("eofd"):
        np_learner = ref.NumpyEOFD(K, d, m, **kw)
    else:
        np_learner = ref.NumpyOFUL(K, d, **kw)
    want = ref.simulate(np_learner, W_star, X, mask, U, rewards=rewards)

    final, met = replay_run(_learner(algo, K, d, m), kw, X, mask, U, W_star)

    assert_replay_matches(final, met, want, np_learner, kw, X)
    assert int(np.asarray(met.projected).sum()) > 0  # the projection path is exercised
    if algo.startswith("eofd"):
        assert np_learner.rho > 0  # the truncation path is exercised
