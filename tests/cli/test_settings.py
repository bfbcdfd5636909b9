"""Setting names: parsing and errors, the environments they build (K, d, S, family), S from the
name, and the ``-all`` settings' trial -> target rule through ``reproduce`` and ``build_runs``."""

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import envs
from bandits_jax.cli import main
from bandits_jax.cli import options as opt
from bandits_jax.cli import reproduce as rep
from bandits_jax.cli import sweep as sweep_cmd
from bandits_jax.sim import sweep

GOOD = [
    "synth-20-1", "synth-100-4", "synth-20-1-S8", "synth-50-4-S4", "synth-20-1-S0.5",
    "synth-3-2-S1e-2", "lowrank-20-1-3", "lowrank-20-4-20-S2", "lowrank-5-1-1-S.5", "digits",
    "digits-0", "digits-9", "digits-all", "digits-k4", "mnist", "wine-all", "iris-all",
    "cancer-all", "heavy-200-1-1", "heavy-20-3-0.5-S4",
]  # fmt: skip
BAD = [
    ("digits-12", "needs a class in 0..9"),
    ("digits-10", "needs a class in 0..9"),
    ("synth-20-1-S0", "needs S > 0"),
    ("synth-20-1-S0.0", "needs S > 0"),
    ("synth-20-1-S1e999", "finite"),
    ("synth-20-1-S-1", "needs S<s>"),
    ("synth-20-1-Sx", "needs S<s>"),
    ("synth-0-1", "needs D >= 1 and K >= 1"),
    ("lowrank-20-1-30", "needs R <= D"),
    ("lowrank-20-1-0", "R >= 1"),
    ("lowrank-20-0-2-S1", "K >= 1"),
    ("lowrank-20-1", "unknown setting"),
    ("heavy-0-1-1", "needs D >= 1 and K >= 1"),
    ("heavy-20-1-1-S0", "needs S > 0"),
    ("heavy-20-1", "unknown setting"),
    ("wine", "unknown setting"),
    ("digits-k5", "unknown setting"),
    ("cifar-all", "unknown setting"),
]


@pytest.mark.parametrize("name", GOOD)
def test_check_setting_accepts(name):
    assert opt.check_setting(name) is None
    assert opt.check_setting(name, bco=True) is None


@pytest.mark.parametrize("name,needle", BAD, ids=[b[0] for b in BAD])
def test_check_setting_rejects(name, needle):
    err = opt.check_setting(name)
    assert err is not None and err.startswith("--settings: ") and needle in err
    assert name in err and "\n" not in err
    with pytest.raises(ValueError, match="setting"):
        rep.make_setting(name, S=1.0, dtype=jnp.float64)


def test_bad_setting_on_the_command_line(tmp_path, capsys):
    rc = main(["reproduce", "--settings", "lowrank-20-1-30", "--out", str(tmp_path), "--quiet"])
    assert rc == 2
    assert "needs R <= D" in capsys.readouterr().err


W_NORM_CASES = [
    # name, --S, K, d, S, family
    ("synth-20-1-S8", 1.0, 1, 20, 8.0, "synthetic"),
    ("synth-20-1-S8", 3.0, 1, 20, 8.0, "synthetic"),  # the name wins over --S
    ("synth-50-4-S0.5", 1.0, 4, 50, 0.5, "synthetic"),
    ("synth-20-1", 2.5, 1, 20, 2.5, "synthetic"),  # no S in the name: --S
    ("lowrank-20-4-3-S4", 1.0, 4, 20, 4.0, "lowrank"),
    ("lowrank-30-1-5", 2.0, 1, 30, 2.0, "lowrank"),
    ("heavy-30-2-0.5-S4", 1.0, 2, 30, 4.0, "heavytail"),
    ("heavy-20-1-1", 2.0, 1, 20, 2.0, "heavytail"),
]


@pytest.mark.parametrize("name,S_opt,K,d,S,family", W_NORM_CASES)
def test_synthetic_and_lowrank_settings(name, S_opt, K, d, S, family):
    st = rep.make_setting(name, S=S_opt, dtype=jnp.float64)
    assert (st.num_outcomes, st.dim, st.S, st.family) == (K, d, S, family)
    assert (st.env.num_outcomes, st.env.dim) == (K, d)
    assert st.init_env_trial is None
    for seed in range(3):
        W = np.asarray(st.env.init(jax.random.key(seed)).W_star)
        assert W.shape == (K, d)
        np.testing.assert_allclose(np.sqrt((W**2).sum()), S, rtol=1e-12)
    if family == "lowrank":
        rank = int(name.split("-")[3])
        U = np.asarray(st.env.init(jax.random.key(0)).basis)
        assert U.shape == (d, rank)
    if family == "heavytail":  # the name's exponent and S reach the environment: same draws
        direct = envs.heavy_tail_mlogb(num_outcomes=K, dim=d, decay=float(name.split("-")[3]),
                                       S=S, dtype=jnp.float64)  # fmt: skip
        key = jax.random.key(1)
        a, b = st.env.init(key), direct.init(key)
        got, want = st.env.observe(a, key), direct.observe(b, key)
        for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


CLASSIFICATION = [
    # name, K, d, classes, target of a plain init (None: -all)
    ("digits", 1, 65, 10, 1),
    ("digits-0", 1, 65, 10, 0),
    ("digits-7", 1, 65, 10, 7),
    ("digits-k4", 4, 65, 10, None),
    ("digits-all", 1, 65, 10, None),
    ("wine-all", 1, 14, 3, None),
    ("iris-all", 1, 5, 3, None),
    ("cancer-all", 1, 31, 2, None),
]


@pytest.mark.parametrize("name,K,d,classes,target", CLASSIFICATION)
def test_classification_settings(name, K, d, classes, target):
    st = rep.make_setting(name, S=5.0, dtype=jnp.float64)
    assert (st.num_outcomes, st.dim, st.S, st.family) == (K, d, None, "classification")
    assert st.env.num_classes == classes
    if name == "digits":
        assert st.title == "digits (d = 65, K = 1)"
    if target is not None:
        assert st.init_env_trial is None
        level = np.asarray(st.env.init(jax.random.key(0)).level)
        np.testing.assert_array_equal(level, np.eye(classes, dtype=int)[target])
    if not name.endswith("-all"):
        assert st.init_env_trial is None
        return
    key = jax.random.key(0)
    for i in range(2 * classes + 1):  # trial i rewards class i mod C
        state = st.init_env_trial(key, i)
        np.testing.assert_array_equal(state.level, np.eye(classes, dtype=int)[i % classes])
        np.testing.assert_array_equal(state.shown, [i % classes])
    # Traced trial indices: one program for every trial.
    levels = jax.jit(jax.vmap(lambda i: st.init_env_trial(key, i).level))(jnp.arange(12))
    np.testing.assert_array_equal(levels, np.eye(classes, dtype=int)[np.arange(12) % classes])


def test_build_runs_uses_the_trial_index():
    st = rep.make_setting("iris-all", S=1.0, dtype=jnp.float64)
    hp = {"h": jnp.arange(2.0)}  # G = 2 grid points; build_runs never calls step
    exp = sweep.Experiment(
        "dummy", "iris-all", None, lambda h: h, hp, {"h": np.arange(2)}, st.env.init,
        init_env_trial=st.init_env_trial,
    )  # fmt: skip
    seeds = [11, 12, 13, 14, 15]
    runs = sweep.build_runs(exp, seeds)
    n = np.arange(2 * 5) % 5  # runs are grid-major: run g * N + n plays seed n
    np.testing.assert_array_equal(runs.env.level, np.eye(3, dtype=int)[n % 3])
    np.testing.assert_array_equal(runs.env.shown[:, 0], n % 3)
    sub = sweep.build_runs(exp, seeds, indices=[9, 3, 3])
    np.testing.assert_array_equal(sub.env.shown[:, 0], np.array([4, 3, 3]) % 3)
    # Without init_env_trial every run uses init_env (the env's own target, class 0 here).
    plain = sweep.build_runs(exp._replace(init_env_trial=None), seeds)
    np.testing.assert_array_equal(plain.env.shown[:, 0], np.zeros(10, int))


def test_sweep_experiments_pass_init_env_trial():
    args = argparse.Namespace(
        S=1.0, sketch=None, mnist=None,
        plan={"ls": [0.5], "es": [0.5], "betas": ["theory"], "bounds": [None], "scales": [1.0],
              "pairs": [("uniform", "wine-all"), ("uniform", "synth-4-1-S2")]},
    )  # fmt: skip
    wine, synth = sweep_cmd.experiments(args, 5, jnp.float64)
    assert synth.init_env_trial is None
    runs = sweep.build_runs(wine, [0, 1, 2, 3])
    np.testing.assert_array_equal(runs.env.shown[:, 0], np.arange(4) % 3)


def test_reproduce_trial_i_gets_target_i_mod_C(tmp_path, monkeypatch):
    seen = []
    make = rep.make_setting

    def recording(name, **kw):
        st = make(name, **kw)

        def init_env_trial(key, i):
            state = st.init_env_trial(key, i)
            seen.append((i, int(np.argmax(np.asarray(state.level)))))
            return state

        return st._replace(init_env_trial=init_env_trial)

    monkeypatch.setattr(rep, "make_setting", recording)
    argv = [
        "reproduce", "--settings", "iris-all", "--learners", "uniform", "--rounds", "3",
        "--trials", "4", "--out", str(tmp_path), "--quiet", "--no-plots",
    ]  # fmt: skip
    assert main(argv) == 0
    assert seen == [(i, i % 3) for i in range(4)]


def test_classification_settings_let_the_recipe_choose_S_unless_given(tmp_path):
    """On classification data the learners get no bound (the S of each kind's no-bound rule)
    unless --S is given; a synthetic setting gives its own S to the learners."""
    import json

    from bandits_jax.cli import main
    from bandits_jax.mlogb import recipes

    def run(extra, out):
        argv = ["reproduce", "--settings", "iris-all,synth-4-1-S3", "--learners", "eofd-robust",
                "--rounds", "4", "--trials", "1", "--out", str(out), "--quiet", "--no-plots",
                *extra]  # fmt: skip
        assert main(argv) == 0
        return json.loads((out / "reproduce.json").read_text())["settings"]

    free = run([], tmp_path / "a")
    assert (
        free["iris-all"]["learners"]["EOFD robust"]["S"]
        == recipes.rule("eofd-robust", num_outcomes=1, dim=4, S=None).point.S
    )
    assert free["synth-4-1-S3"]["learners"]["EOFD robust"]["S"] == 3.0
    given = run(["--S", "2.5"], tmp_path / "b")
    assert given["iris-all"]["learners"]["EOFD robust"]["S"] == 2.5
    assert given["synth-4-1-S3"]["learners"]["EOFD robust"]["S"] == 2.5


@pytest.mark.parametrize(
    "name,half,K", [("digits-all-h0", 0, 1), ("digits-3-h1", 1, 1), ("digits-k4-h1", 1, 4)]
)
def test_digits_half_settings(name, half, K):
    p = opt.parse_setting(name)
    assert p.half == half and p.family == "classification"
    s = rep.make_setting(name, S=None, dtype=None)
    assert s.num_outcomes == K and s.S is None
    assert opt.check_setting("digits-all-h2") is not None
