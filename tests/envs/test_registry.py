"""Named settings (``envs.make``, ``envs.parse``): every name form builds the environment of the
explicit constructor call (the same arrays from the same keys), metadata included; bad names and
keywords a name does not take are refused eagerly, naming the function and the argument."""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import envs
from bandits_jax.envs import bco_losses
from bandits_jax.envs import registry as reg

MNIST_FILES = importlib.import_module("bandits_jax.envs.mnist")
F64 = jnp.float64

# name, make's keywords, the explicit call, (family, d, K, S)
STREAMS = [
    ("synth-100-4", {"S": 8.0},
     lambda: envs.synthetic_mlogb(num_outcomes=4, dim=100, S=8.0, dtype=F64),
     ("synthetic", 100, 4, 8.0)),
    ("synth-20-1", {}, lambda: envs.synthetic_mlogb(num_outcomes=1, dim=20, dtype=F64),
     ("synthetic", 20, 1, 1.0)),
    ("synth-20-1-S8", {}, lambda: envs.synthetic_mlogb(num_outcomes=1, dim=20, S=8.0, dtype=F64),
     ("synthetic", 20, 1, 8.0)),
    ("synth-3-2-S1e-2", {},
     lambda: envs.synthetic_mlogb(num_outcomes=2, dim=3, S=0.01, dtype=F64),
     ("synthetic", 3, 2, 0.01)),
    ("lowrank-20-4-3-S.5", {},
     lambda: envs.lowrank_mlogb(num_outcomes=4, dim=20, rank=3, S=0.5, dtype=F64),
     ("lowrank", 20, 4, 0.5)),
    ("lowrank-30-1-5", {"S": 2.0},
     lambda: envs.lowrank_mlogb(num_outcomes=1, dim=30, rank=5, S=2.0, dtype=F64),
     ("lowrank", 30, 1, 2.0)),
    ("heavy-200-1-1", {},
     lambda: envs.heavy_tail_mlogb(num_outcomes=1, dim=200, decay=1.0, dtype=F64),
     ("heavytail", 200, 1, 1.0)),
    ("heavy-20-3-0.5-S4", {},
     lambda: envs.heavy_tail_mlogb(num_outcomes=3, dim=20, decay=0.5, S=4.0, dtype=F64),
     ("heavytail", 20, 3, 4.0)),
]  # fmt: skip
DATA = [  # name, the explicit call, K, the target of a plain init (None: trial i -> i mod C)
    ("digits", lambda: envs.digits(target=1, dtype=F64), 1, 1),
    ("digits-0", lambda: envs.digits(target=0, dtype=F64), 1, 0),
    ("digits-7-h1", lambda: envs.digits(target=7, half=1, dtype=F64), 1, 7),
    ("digits-all", lambda: envs.digits(target=0, dtype=F64), 1, None),
    ("digits-all-h0", lambda: envs.digits(target=0, half=0, dtype=F64), 1, None),
    ("digits-k4", lambda: envs.digits_multinomial(num_outcomes=4, dtype=F64), 4, -1),
    ("digits-k4-h1", lambda: envs.digits_multinomial(num_outcomes=4, half=1, dtype=F64), 4, -1),
    ("wine-all", lambda: envs.wine(target=0, dtype=F64), 1, None),
    ("iris-all", lambda: envs.iris(target=0, dtype=F64), 1, None),
    ("cancer-all", lambda: envs.breast_cancer(target=0, dtype=F64), 1, None),
]
BCO = [
    ("bco-linear-5", {"horizon": 400},
     lambda: bco_losses.linear(5, base_norm=1.0, amplitude=0.5, omega=0.2 / 400, dtype=F64),
     "convex"),
    ("bco-quadratic-3", {"horizon": 50, "noise": 0.3},
     lambda: bco_losses.quadratic(3, lam=1.0, base_norm=2.0, amplitude=0.5, omega=0.2 / 50,
                                  noise=0.3, dtype=F64),
     "strongly_convex"),
]  # fmt: skip


def assert_same_arrays(a, b):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        if jnp.issubdtype(jnp.asarray(x).dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def assert_same_mlogb(made, direct, init_made=None, init_direct=None):
    """The same initial state and the same first two observations from the same keys."""
    for seed in range(2):
        key = jax.random.key(seed)
        a = (init_made or made.init)(key)
        b = (init_direct or direct.init)(key)
        assert_same_arrays(a, b)
        assert_same_arrays(made.observe(a, jax.random.key(9)), direct.observe(b, jax.random.key(9)))


@pytest.mark.parametrize("name,kw,direct,meta", STREAMS, ids=[s[0] for s in STREAMS])
def test_streams_build_the_explicit_environment(name, kw, direct, meta):
    s = envs.make(name, dtype=F64, **kw)
    assert (s.name, s.family, s.dim, s.num_outcomes, s.S) == (name, *meta)
    assert s.init_env_trial is None and envs.parse(name).family == meta[0]
    assert_same_mlogb(s.env, direct())
    W = np.asarray(s.env.init(jax.random.key(3)).W_star)  # ||W*||_F = S, computed here
    np.testing.assert_allclose(np.sqrt(np.sum(W**2)), meta[3], rtol=1e-12)


@pytest.mark.parametrize("name,direct,K,target", DATA, ids=[d[0] for d in DATA])
def test_data_settings_build_the_explicit_environment(name, direct, K, target):
    s = envs.make(name, dtype=F64)
    env = direct()
    assert (s.family, s.dim, s.num_outcomes, s.S) == ("classification", env.dim, K, None)
    if target is not None:  # one environment for every trial
        assert s.init_env_trial is None
        assert_same_mlogb(s.env, env)
        if target >= 0:
            level = np.asarray(s.env.init(jax.random.key(0)).level)
            np.testing.assert_array_equal(level, np.eye(env.num_classes, dtype=int)[target])
        return
    C = env.num_classes
    for i in range(2 * C + 1):  # trial i rewards class i mod C: the explicit init_target
        assert_same_mlogb(
            s.env, env, lambda k, i=i: s.init_env_trial(k, i),
            lambda k, i=i: env.init_target(k, i % C),
        )  # fmt: skip
    # a traced trial index: one program for every trial
    key = jax.random.key(0)
    levels = jax.jit(jax.vmap(lambda i: s.init_env_trial(key, i).level))(jnp.arange(7))
    np.testing.assert_array_equal(levels, np.eye(C, dtype=int)[np.arange(7) % C])


def test_mnist_from_a_path(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (30, 4, 4), dtype=np.uint8)
    labels = (np.arange(30) % 10).astype(np.uint8)
    MNIST_FILES.write_idx(tmp_path / "train-images-idx3-ubyte.gz", images)
    MNIST_FILES.write_idx(tmp_path / "train-labels-idx1-ubyte.gz", labels)
    s = envs.make("mnist", path=tmp_path, dtype=F64)
    assert (s.dim, s.num_outcomes, s.family) == (17, 1, "classification")
    assert_same_mlogb(s.env, envs.mnist(tmp_path, target=1, dtype=F64))


@pytest.mark.parametrize("name,kw,direct,family", BCO, ids=[b[0] for b in BCO])
def test_bco_settings_build_the_explicit_losses(name, kw, direct, family):
    s = envs.make(name, dtype=F64, **kw)
    env = direct()
    assert (s.family, s.dim, s.num_outcomes, s.S) == (family, env.d, None, None)
    assert (s.env.lam, s.env.lipschitz, s.env.smoothness) == (env.lam, env.lipschitz,
                                                              env.smoothness)  # fmt: skip
    key = jax.random.key(4)
    a, b = s.env.init(key), env.init(key)
    assert_same_arrays(a, b)
    x = jnp.linspace(-0.3, 0.3, env.d)
    for t in (0, 7):
        np.testing.assert_array_equal(s.env.loss(a, t, x), env.loss(b, t, x))
    assert float(a.omega) == pytest.approx(0.2 / kw["horizon"], rel=1e-15)


BAD_NAMES = [
    ("cifar-all", "expected one of"),
    ("wine", "expected one of"),
    ("digits-k5", "expected one of"),
    ("lowrank-20-1", "expected one of"),
    ("heavy-20-1", "expected one of"),
    ("bco-cubic-3", "expected one of"),
    ("digits-12", "needs a class in 0..9"),
    ("digits-all-h2", "expected one of"),
    ("synth-0-1", "needs D >= 1 and K >= 1"),
    ("heavy-0-1-1", "needs D >= 1 and K >= 1"),
    ("synth-20-1-S0", "finite S > 0"),
    ("heavy-20-1-1-S0.0", "finite S > 0"),
    ("synth-20-1-S1e999", "finite S > 0"),
    ("synth-20-1-S-1", "needs S<s>"),
    ("synth-20-1-Sx", "needs S<s>"),
    ("lowrank-20-1-30", "R <= D"),
    ("lowrank-20-1-0", "R >= 1"),
    ("lowrank-20-0-2-S1", "K >= 1"),
    ("bco-linear-0", "D >= 1"),
    (3, "expected a string"),
]


@pytest.mark.parametrize("name,needle", BAD_NAMES, ids=[str(b[0]) for b in BAD_NAMES])
def test_bad_names_are_refused(name, needle):
    for fn in (envs.parse, envs.make):
        with pytest.raises(ValueError, match=f"^{fn.__name__}: name: ") as err:
            fn(name)
        assert needle in str(err.value) and "\n" not in str(err.value)
        if "expected one of" in needle:  # the grammar is listed
            assert reg.GRAMMAR in str(err.value)


@pytest.mark.parametrize(
    "name,kw",
    [
        ("digits", {"S": 2.0}),  # classification data have no W*
        ("synth-20-1-S8", {"S": 2.0}),  # the name fixes S
        ("synth-20-1", {"horizon": 10}),
        ("digits-all", {"path": "x"}),
        ("bco-linear-3", {"S": 1.0, "horizon": 10}),
    ],
)
def test_keywords_a_name_does_not_take_are_refused(name, kw):
    key = next(k for k in kw if k not in envs.parse(name).options)
    with pytest.raises(ValueError, match=f"^make: {key}: "):
        envs.make(name, **kw)


def test_a_bco_setting_needs_its_horizon():
    with pytest.raises(ValueError, match="^make: horizon: "):
        envs.make("bco-quadratic-2")
    with pytest.raises(ValueError, match="horizon"):
        envs.make("bco-quadratic-2", horizon=0)
