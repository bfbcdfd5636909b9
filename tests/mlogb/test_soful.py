"""SOFUL (bandits_jax.mlogb.soful) against its numpy reference (references.soful_numpy: dense
inverses, numpy's SVD), against LinUCB where the sketch drops nothing, its rejected steps, and
jit/vmap with lanes whose sketches shrink at different rounds. float64."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from bandits_jax import mlogb
from bandits_jax.mlogb import bonus
from bandits_jax.mlogb.linucb import linucb_hyperparams
from bandits_jax.status import Status
from references.soful_numpy import NumpySOFUL
from tests import xla_defaults
from tests.rejected import assert_rejected

EPS = np.finfo(np.float64).eps
LAM, ALPHA = 0.7, 0.4


def _rewards(K):
    return list(np.linspace(1 / K, 1, K))


def _hp(K, lam=LAM):
    return linucb_hyperparams(lam=lam, alpha=ALPHA, rewards=_rewards(K), dtype=jnp.float64)


def _tol(T: int, lam: float, x_max: float) -> float:
    """Relative tolerance between two float64 computations of a T-round run: each round's solve
    with ``V`` carries ``eps cond(V)``, ``cond(V) <= 1 + T x_max^2 / lam`` (``V <= lam I + Z^T Z``
    plus the shrinkage, which the sketch's trace bounds); the rounds pass earlier errors on with
    O(1) gain (the FD shrink's Gram is 1-Lipschitz), so they add up: ``T cond eps``, times 16 for
    the sums of O(D) terms."""
    return 16.0 * T * (1.0 + T * x_max**2 / lam) * EPS


def _recorded_stream(K, d, T, N, seed):
    """Action sets of varying size (masked) and each action's outcome if chosen."""
    rng = np.random.default_rng(seed)
    acts = rng.normal(size=(T, N, d)) / np.sqrt(d) + 0.3  # off-centre: the intercept matters
    mask = np.arange(N)[None, :] < rng.integers(2, N + 1, size=(T, 1))
    return acts, mask, rng.integers(0, K + 1, size=(T, N))


@functools.cache
def _play(K, d, m, intercept):
    """The learner's closed loop on a recorded stream: choices, score parts, theta, status."""
    learner = mlogb.soful(num_outcomes=K, dim=d, sketch_size=m, intercept=intercept)

    def body(s, rec):
        acts, mask, outcomes = rec
        est, bon = learner.score_parts(s, acts)
        i, _ = bonus.select_index(est + bon, mask)
        s = learner.update(s, acts[i], outcomes[i])
        return s, (i, est, bon, jnp.concatenate([s.theta, s.bias[None]]), s.status)

    run = xla_defaults.jit(lambda s, *rec: lax.scan(body, s, rec))
    return learner, run


@pytest.mark.parametrize("K,intercept", [(1, True), (3, False)])
def test_soful_equals_the_numpy_reference_on_a_stream(K, intercept):
    d, m, T, N = 6, 3, 300, 6  # the sketch (2m + 1 = 7 slots) shrinks every m + 1 = 4 rounds
    acts, mask, outcomes = _recorded_stream(K, d, T, N, seed=21 + K)
    learner, run = _play(K, d, m, intercept)
    _, (choice, est, bon, theta, status) = run(
        learner.init(_hp(K)), jnp.asarray(acts), jnp.asarray(mask), jnp.asarray(outcomes)
    )
    ref = NumpySOFUL(dim=d, sketch_size=m, lam=LAM, alpha=ALPHA, rewards=_rewards(K),
                     intercept=intercept)  # fmt: skip
    want = {k: [] for k in ("choice", "est", "bon", "theta")}
    for t in range(T):
        e, b = ref.scores(acts[t])
        i = ref.select(acts[t], mask[t])
        ref.update(acts[t, i], outcomes[t, i])
        for k, v in zip(want, (i, e, b, ref.theta), strict=True):
            want[k].append(v)
    np.testing.assert_array_equal(np.asarray(status), Status.CONVERGED)
    np.testing.assert_array_equal(np.asarray(choice), want["choice"])
    assert len(set(want["choice"])) > 2 and ref.rho > 1.0  # the choices vary; the sketch drops
    x_max = float(np.max(np.linalg.norm(acts, axis=-1))) + 1.0
    tol = _tol(T, LAM, x_max)
    theta_want = np.asarray(want["theta"])
    if not intercept:
        theta_want = np.hstack([theta_want, np.zeros((T, 1))])
    np.testing.assert_allclose(theta, theta_want, rtol=0, atol=tol * np.max(np.abs(theta_want)))
    np.testing.assert_allclose(est, want["est"], rtol=0, atol=tol * np.max(np.abs(want["est"])))
    np.testing.assert_allclose(bon, want["bon"], rtol=tol)


def _scan(learner):
    """All updates in one scan: the final state and each round's theta and bias."""

    def body(s, xy):
        s = learner.update(s, xy[0], xy[1])
        return s, jnp.concatenate([s.theta, s.bias[None]])

    return lambda s, X, Y: lax.scan(body, s, (X, Y))


@functools.cache
def _feed(kind, K, d, m=None):
    """The learner and :func:`_scan` compiled at XLA's defaults."""
    if kind == "linucb":
        learner = mlogb.linucb(num_outcomes=K, dim=d)
    else:
        learner = mlogb.soful(num_outcomes=K, dim=d, sketch_size=m)
    return learner, xla_defaults.jit(_scan(learner))


@pytest.mark.parametrize("m", [5, 9])
def test_a_sketch_of_at_least_D_directions_is_linucb(m):
    """``D = d + 1 = 5``: the sketch (D + 1 slots) shrinks from round D + 1 on and drops only
    rounding, so SOFUL's theta and score parts are LinUCB's; a smaller sketch is not."""
    K, d, T = 2, 4, 60
    rng = np.random.default_rng(5)
    X = rng.normal(size=(T, d)) * np.linspace(0.3, 2.0, d)
    Y = jnp.asarray(rng.integers(0, K + 1, size=T))
    probe = jnp.asarray(rng.normal(size=(7, d)))
    lin, run_lin = _feed("linucb", K, d)
    s_lin, th_lin = run_lin(lin.init(_hp(K)), jnp.asarray(X), Y)
    tol = _tol(T, LAM, float(np.max(np.linalg.norm(X, axis=1))) + 1.0)
    for size, equal in ((m, True), (3, False)):
        sof, run_sof = _feed("soful", K, d, size)
        s_sof, th_sof = run_sof(sof.init(_hp(K)), jnp.asarray(X), Y)
        err = float(np.max(np.abs(th_sof - th_lin))) / float(np.max(np.abs(th_lin)))
        assert (err <= tol) == equal, (size, err, tol)
        if equal:
            # rho: the (D+1)-th eigenvalue of a rank-D buffer, rounding of its trace
            assert float(s_sof.rho) <= 64 * EPS * T * float(np.max(np.sum(X**2, axis=1)) + 1)
            for a, b in zip(sof.score_parts(s_sof, probe), lin.score_parts(s_lin, probe),
                            strict=True):  # fmt: skip
                np.testing.assert_allclose(a, b, rtol=tol, atol=tol * float(np.max(np.abs(b))))


@functools.cache
def _update(K, d, m):
    learner = mlogb.soful(num_outcomes=K, dim=d, sketch_size=m)
    return learner, jax.jit(learner.update)


def test_non_finite_rewards_and_features_are_rejected_and_the_state_kept():
    K, d, m = 2, 3, 2
    learner, update = _update(K, d, m)
    rng = np.random.default_rng(9)
    hp = _hp(K)._replace(rewards=jnp.asarray([jnp.nan, 1.0]))  # r_1 = NaN (past the checks)
    s = learner.init(hp)
    nan_x = jnp.asarray([1.0, jnp.nan, 0.0])
    for t in range(2 * m + 2):  # past a shrink (round 2m + 1), where a reject keeps the basis
        for x, y, code in ((rng.normal(size=d), 1, Status.NONFINITE),  # r = NaN
                           (nan_x, 2, Status.NONFINITE),  # under jit
                           (rng.normal(size=d), 1.5, Status.BAD_OUTCOME)):  # fmt: skip
            new = update(s, jnp.asarray(x), y)
            assert int(new.status) == code, t
            assert_rejected(new, s)
        s = update(s, jnp.asarray(rng.normal(size=d)), 2)  # r_2 = 1: accepted
        assert int(s.status) == Status.CONVERGED
    assert int(s.num_failures) == 0 and int(s.t) == 2 * m + 2 and int(s.used) == m + 1
    assert float(s.rho) > 0.0  # the sketch shrank
    with pytest.raises(ValueError, match="x contains NaN"):
        learner.update(s, nan_x, 1)  # eagerly: a ValueError


def test_vmap_over_lanes_that_shrink_at_different_rounds_equals_each_lane_alone():
    """Two lanes (a grid of ``lam``), one with a rejected (NaN) row: its buffer fills a round
    later, so the batched while loop rebuilds one lane's basis and keeps the other's."""
    K, d, m, T = 2, 3, 2, 13
    rng = np.random.default_rng(13)
    X = rng.normal(size=(2, T, d))
    X[1, 2, 0] = np.nan
    Y = rng.integers(0, K + 1, size=(2, T))
    learner = mlogb.soful(num_outcomes=K, dim=d, sketch_size=m)
    run = jax.jit(_scan(learner))
    hp = linucb_hyperparams(lam=[0.5, 2.0], alpha=ALPHA, rewards=_rewards(K), dtype=jnp.float64)
    states, thetas = jax.jit(jax.vmap(lambda h, x, y: _scan(learner)(learner.init(h), x, y)))(
        hp, jnp.asarray(X), jnp.asarray(Y)
    )
    assert list(np.asarray(states.num_failures)) == [0, 1]
    for i in range(2):
        hp_i = jax.tree.map(lambda a, i=i: a[i], hp)
        s_i, th_i = run(learner.init(hp_i), jnp.asarray(X[i]), jnp.asarray(Y[i]))
        np.testing.assert_allclose(thetas[i], th_i, rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(states.used[i], s_i.used)
        np.testing.assert_allclose(states.rho[i], s_i.rho, rtol=1e-12)
    assert int(states.used[0]) != int(states.used[1])
