"""The target class as environment data: ``init_target`` in one compiled program equals an env
built with that target; traced targets; scikit-learn's wine, iris and breast cancer sets."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import envs
from bandits_jax.envs import classification as C

ROUNDS = 6


def play(env, state, keys):
    """Per round: candidate labels, actions, expected rewards and each candidate's outcome."""

    def one(k):
        k_obs, k_out = jax.random.split(k)
        st, X, _ = env.observe(state, k_obs)
        ys = jax.vmap(env.outcome, in_axes=(None, 0, 0))(st, X, jax.random.split(k_out, X.shape[0]))
        return st.labels, X, env.expected_rewards(st, X), ys

    return jax.vmap(one)(keys)


@pytest.fixture(scope="module")
def digits_env():
    return C.digits(target=1)


def test_init_target_equals_env_built_with_target(digits_env):
    keys = jax.random.split(jax.random.key(3), ROUNDS)
    init_key = jax.random.key(0)
    # One jitted program, vmapped over all ten targets.
    all_targets = jax.jit(
        jax.vmap(lambda t: play(digits_env, digits_env.init_target(init_key, t), keys))
    )(jnp.arange(10, dtype=jnp.int32))
    for c in range(10):
        env_c = C.digits(target=c)
        ref = jax.jit(lambda env_c=env_c: play(env_c, env_c.init(init_key), keys))()
        got = [np.asarray(x[c]) for x in all_targets]
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(a, np.asarray(b))
        labels, _, exp_r, ys = got
        # Independent of the module: reward and outcome 1 exactly for class c, always shown.
        np.testing.assert_array_equal(exp_r, (labels == c).astype(float))
        np.testing.assert_array_equal(ys, (labels == c).astype(np.int32))
        assert np.all(np.sort(labels, axis=1) == np.arange(10))


def test_fewer_candidates_always_show_the_traced_target(digits_env):
    env = C.digits(target=1, num_candidates=3)
    keys = jax.random.split(jax.random.key(4), 40)
    labels, _, exp_r, _ = jax.jit(
        jax.vmap(lambda t: play(env, env.init_target(jax.random.key(0), t), keys))
    )(jnp.arange(10, dtype=jnp.int32))
    labels, exp_r = np.asarray(labels), np.asarray(exp_r)
    for c in range(10):
        assert np.all(np.any(labels[c] == c, axis=1))  # target shown every round
        assert np.all([len(set(row)) == 3 for row in labels[c]])  # distinct classes
        others = set(labels[c].ravel()) - {c}
        assert len(others) == 9  # the other two are drawn from all the other classes
        np.testing.assert_array_equal(exp_r[c], (labels[c] == c).astype(float))


def test_traced_target_under_jit(digits_env):
    @jax.jit
    def first_round(key, target):
        state = digits_env.init_target(key, target)
        st, X, _ = digits_env.observe(state, key)
        return state.level, state.shown, st.labels, digits_env.expected_rewards(st, X)

    level, shown, labels, exp_r = first_round(jax.random.key(1), jnp.int32(7))
    np.testing.assert_array_equal(level, np.eye(10, dtype=np.int32)[7])
    np.testing.assert_array_equal(shown, [7])
    np.testing.assert_array_equal(exp_r, (np.asarray(labels) == 7).astype(float))
    # init(key) keeps the target the env was built with.
    state = digits_env.init(jax.random.key(1))
    np.testing.assert_array_equal(state.level, np.eye(10, dtype=np.int32)[1])
    np.testing.assert_array_equal(state.shown, [1])


@pytest.mark.parametrize("bad", [-1, 10, 2.0, "3", np.array([1, 2])])
def test_concrete_bad_target_is_rejected(digits_env, bad):
    with pytest.raises(ValueError, match="target"):
        digits_env.init_target(jax.random.key(0), bad)


def test_multinomial_has_no_init_target():
    env = C.digits_multinomial(num_outcomes=4)
    assert env.init_target is None
    state = env.init(jax.random.key(0))
    assert state.shown.shape == (0,)
    np.testing.assert_array_equal(state.level, (np.arange(10) * 5) // 10)


def reference_features(raw):
    # Independent of the module: unit rows, bias 1, divide by sqrt(2).
    raw = np.asarray(raw, float)
    n = np.sqrt((raw**2).sum(axis=1, keepdims=True))
    return np.hstack([raw / n, np.ones((raw.shape[0], 1))]) / math.sqrt(2)


@pytest.mark.parametrize(
    "build,loader,p,classes",
    [
        (envs.wine, "load_wine", 13, 3),
        (envs.iris, "load_iris", 4, 3),
        (envs.breast_cancer, "load_breast_cancer", 30, 2),
    ],
)
def test_bundled_data_sets(build, loader, p, classes):
    from sklearn import datasets

    data = getattr(datasets, loader)()
    ref = reference_features(data.data)
    np.testing.assert_allclose(C.normalise_features(data.data), ref, rtol=1e-13, atol=1e-15)
    target = classes - 1
    env = build(target=target)
    assert (env.dim, env.num_classes, env.max_actions, env.num_outcomes) == (
        p + 1,
        classes,
        classes,
        1,
    )
    labels, X, exp_r, ys = jax.jit(
        lambda: play(env, env.init(jax.random.key(0)), jax.random.split(jax.random.key(2), 20))
    )()
    labels, X = np.asarray(labels), np.asarray(X)
    np.testing.assert_allclose(np.linalg.norm(X, axis=-1), 1.0, atol=1e-12)
    for row_x, row_l in zip(X, labels, strict=True):
        assert sorted(row_l) == list(range(classes))
        for a, lab in zip(row_x, row_l, strict=True):
            hits = np.flatnonzero(np.all(np.abs(ref - a) < 1e-12, axis=1))
            assert hits.size >= 1 and np.all(data.target[hits] == lab)
    np.testing.assert_array_equal(exp_r, (labels == target).astype(float))
    np.testing.assert_array_equal(ys, (labels == target).astype(np.int32))
    with pytest.raises(ValueError, match="target"):
        build(target=classes)


def test_digits_halves_are_disjoint_and_cover_the_data():
    """``half=0/1``: the even/odd-indexed examples (numpy indexing), every class in each."""
    from bandits_jax.envs.classification import load_digits

    x, y = load_digits()
    x0, y0 = load_digits(0)
    x1, y1 = load_digits(1)
    np.testing.assert_array_equal(x0, x[0::2])
    np.testing.assert_array_equal(x1, x[1::2])
    np.testing.assert_array_equal(np.sort(np.concatenate([y0, y1])), np.sort(y))
    assert set(y0) == set(y1) == set(range(10))
    with pytest.raises(ValueError, match="half"):
        load_digits(2)
