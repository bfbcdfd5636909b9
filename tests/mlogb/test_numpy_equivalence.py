"""The JAX learners reproduce the numpy references (bandits_jax.reference.mlogb_numpy), float64,
on fixed action sets and outcome uniforms (actions with distinct norms, so no ties)."""

import jax
import numpy as np
import pytest

from bandits_jax import mlogb
from bandits_jax.envs.replay import replay_mlogb, replay_state
from bandits_jax.reference import mlogb_numpy as ref
from bandits_jax.sim import init_run, play


def _stream(K, d, T, N, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(T, N, d))
    X /= np.linalg.norm(X, axis=2, keepdims=True)
    X *= rng.uniform(0.6, 1.0, size=(T, N, 1))  # distinct norms: no ties at round 1
    mask = np.arange(N)[None, :] < rng.integers(N // 2, N + 1, size=(T, 1))
    W_star = rng.normal(size=(K, d))
    W_star *= 2.5 / np.linalg.norm(W_star)
    return X, mask, rng.uniform(size=T), W_star


def replay_run(learner, kw, X, mask, U, W_star):
    """Plays ``learner`` (hyperparameters ``kw``) on the recorded stream: ``(final, metrics)``."""
    T, N, d = X.shape
    env = replay_mlogb(num_outcomes=W_star.shape[0], dim=d, max_actions=N)
    state = init_run(
        learner.init(mlogb.hyperparams(**kw)),
        replay_state(X, mask, U, W_star, kw["rewards"]),
        jax.random.PRNGKey(0),
    )
    return jax.jit(lambda s: play(mlogb.interact(learner, env), s, T))(state)


CASES = [
    # K, d, m, beta, beta_scale, S
    (1, 6, 2, "theory", 0.02, 1.0),
    (3, 3, 4, 0.4, 1.0, 1.5),
    (2, 4, 3, "order", 0.1, 1.0),
]


@pytest.mark.parametrize("K,d,m,beta,beta_scale,S", CASES)
@pytest.mark.parametrize("algo", ["eofd", "oful"])
def test_jax_matches_numpy_reference(K, d, m, beta, beta_scale, S, algo):
    T, N = 40, 8
    X, mask, U, W_star = _stream(K, d, T, N, seed=K * 10 + d)
    rewards = np.linspace(1 / K, 1, K)
    kw = dict(lam=0.7, eta=1.3, S=S, rewards=rewards, beta=beta, beta_scale=beta_scale)
    if algo == "eofd":
        learner = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m)
        np_learner = ref.NumpyEOFD(K, d, m, **kw)
    else:
        learner = mlogb.oful(num_outcomes=K, dim=d)
        np_learner = ref.NumpyOFUL(K, d, **kw)
    want = ref.simulate(np_learner, W_star, X, mask, U, rewards=rewards)

    final, met = replay_run(learner, kw, X, mask, U, W_star)

    np.testing.assert_array_equal(np.asarray(met.choice), want["chosen"])
    np.testing.assert_array_equal(np.asarray(met.y), want["y"])
    np.testing.assert_allclose(np.asarray(met.regret), want["regret"], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.asarray(final.learner.W), want["W"][-1], rtol=1e-7, atol=1e-9)
    assert int(np.asarray(met.projected).sum()) > 0  # the projection path is exercised
