"""Classification-to-bandit protocol (section 4): one candidate per class, reward 1 exactly for
the target class, the documented normalisation; the multinomial variant's outcome law."""

import importlib
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import mlogb
from bandits_jax.envs import classification as C
from bandits_jax.sim.runner import make_rollout

# the MNIST file reader (``bandits_jax.envs.mnist`` on the face is the environment factory)
M = importlib.import_module("bandits_jax.envs.mnist")

RNG = np.random.default_rng(0)
RAW = RNG.integers(0, 17, (60, 5)).astype(np.float64)
RAW[3] = 0.0  # an all-zero example: stays zero, bias only
LABELS = np.arange(60) % 6


def reference_features(raw):
    # Independent of the module: unit rows, bias 1, divide by sqrt(2).
    out = []
    for x in raw:
        n = math.sqrt(sum(v * v for v in x))
        u = [v / n for v in x] if n > 0 else [0.0] * len(x)
        out.append([v / math.sqrt(2) for v in u + [1.0]])
    return np.asarray(out)


REF = reference_features(RAW)


def rounds(env, n, seed=0):
    keys = jax.random.split(jax.random.key(seed), n)
    state = env.init(keys[0])
    return jax.jit(jax.vmap(lambda k: env.observe(state, k)))(keys)


def match_rows(actions, labels):
    """For each shown row, the data rows it equals; checks they carry the claimed label."""
    for a, lab in zip(actions, labels, strict=True):
        hits = np.flatnonzero(np.all(np.abs(REF - a) < 1e-12, axis=1))
        assert hits.size >= 1 and np.all(LABELS[hits] == lab)


@pytest.mark.parametrize("n_cand", [6, 3])
def test_binary_protocol(n_cand):
    env = C.classification_bandit(RAW, LABELS, target=2, num_candidates=n_cand)
    assert env.dim == 6 and env.num_outcomes == 1 and env.max_actions == n_cand
    states, actions, mask = rounds(env, 40)
    assert actions.shape == (40, n_cand, 6) and bool(mask.all())
    labels = np.asarray(states.labels)
    for r in range(40):
        assert len(set(labels[r])) == n_cand  # distinct classes
        assert 2 in labels[r]  # the target is always shown
        match_rows(np.asarray(actions[r]), labels[r])
    if n_cand == 6:
        assert all(sorted(row) == list(range(6)) for row in labels)
    np.testing.assert_allclose(np.linalg.norm(actions, axis=-1)[labels != 3], 1.0, atol=1e-14)
    np.testing.assert_allclose(actions[..., -1], 1 / math.sqrt(2), atol=0)
    # Candidate order is random: the target is not always at one position.
    assert len(set(np.argmax(labels == 2, axis=1).tolist())) > 1

    exp_r = jax.vmap(env.expected_rewards)(states, actions)
    np.testing.assert_array_equal(np.asarray(exp_r), (labels == 2).astype(float))
    keys = jax.random.split(jax.random.key(1), n_cand)
    for r in range(3):
        st = jax.tree_util.tree_map(lambda x, r=r: x[r], states)
        ys = jax.vmap(env.outcome, in_axes=(None, 0, 0))(st, actions[r], keys)
        np.testing.assert_array_equal(np.asarray(ys), (labels[r] == 2).astype(np.int32))


def test_multinomial_outcome_law():
    level = np.array([0, 1, 1, 2, 2, 0])
    rewards = np.array([0.5, 1.0])
    env = C.classification_bandit(
        RAW, LABELS, rewards=rewards, outcome_of_class=level, label_noise=0.3
    )
    states, actions, _ = rounds(env, 2)
    st = jax.tree_util.tree_map(lambda x: x[0], states)
    labels = np.asarray(st.labels)
    r_full = np.array([0.0, 0.5, 1.0])
    expected = 0.7 * r_full[level[labels]] + 0.3 * r_full.mean()
    np.testing.assert_allclose(np.asarray(env.expected_rewards(st, actions[0])), expected)
    # Empirical outcome law of one candidate vs (1 - p) 1[y = level] + p / (K + 1).
    x = actions[0, 0]
    ys = np.asarray(
        jax.vmap(lambda k: env.outcome(st, x, k))(jax.random.split(jax.random.key(5), 6000))
    )
    freq = np.bincount(ys, minlength=3) / ys.size
    law = np.full(3, 0.3 / 3)
    law[level[labels[0]]] += 0.7
    np.testing.assert_allclose(freq, law, atol=0.025)  # ~4 standard errors


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_candidates"):
        C.classification_bandit(RAW, LABELS, num_candidates=7)
    with pytest.raises(ValueError, match="target"):
        C.classification_bandit(RAW, LABELS, target=6)
    with pytest.raises(ValueError, match="outcome_of_class"):
        C.classification_bandit(
            RAW, LABELS, rewards=[1.0, 2.0], outcome_of_class=[0, 3, 0, 0, 0, 0]
        )
    with pytest.raises(ValueError, match="labels"):
        C.classification_bandit(RAW, LABELS[:-1])


def test_digits_and_multinomial_run_with_learners():
    env = C.digits(num_candidates=10)
    assert env.dim == 65 and env.max_actions == 10 and env.num_classes == 10
    _, actions, _ = rounds(env, 2)
    np.testing.assert_allclose(np.linalg.norm(actions, axis=-1), 1.0, atol=1e-12)

    envk = C.digits_multinomial(num_outcomes=4)
    assert envk.num_outcomes == 4 and envk.dim == 65
    rec = mlogb.section4(num_outcomes=4, dim=65, S=1.0, horizon=50, rewards=envk.rewards)
    learner = mlogb.eofd(num_outcomes=4, dim=65, sketch_size=rec.sketch_size)
    run = make_rollout(mlogb.interact(learner, envk), 6)
    m = run(learner.init(rec.hparams), envk.init(jax.random.key(0)), jax.random.key(1))
    r_full = np.concatenate([[0.0], envk.rewards])
    possible = 0.9 * r_full + 0.1 * r_full.mean()
    assert np.all(np.min(np.abs(np.asarray(m.reward)[:, None] - possible), axis=1) < 1e-12)
    assert np.all(np.asarray(m.regret) >= 0) and np.all(np.isfinite(np.asarray(m.regret)))


def test_mnist_env_from_tiny_files(tmp_path):
    images = RNG.integers(0, 256, (30, 4, 4), dtype=np.uint8)
    labels = (np.arange(30) % 10).astype(np.uint8)
    M.write_idx(tmp_path / "train-images-idx3-ubyte.gz", images)
    M.write_idx(tmp_path / "train-labels-idx1-ubyte.gz", labels)
    env = C.mnist(tmp_path, target=1, dtype=jnp.float32)
    assert env.dim == 17
    states, actions, _ = rounds(env, 3)
    assert actions.dtype == jnp.float32
    ref = reference_features(images.reshape(30, 16).astype(float))
    for a, lab in zip(np.asarray(actions[0]), np.asarray(states.labels[0]), strict=True):
        hits = np.flatnonzero(np.all(np.abs(ref - a) < 1e-6, axis=1))
        assert hits.size >= 1 and np.all(labels[hits] == lab)
