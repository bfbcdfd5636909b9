"""Setting names in the command: bad ones are one error line, ``--S`` reaches the registry's
environment where the name has no S<s>, and the ``-all`` settings' trial -> target rule through
``reproduce``, ``sweep`` and ``build_runs`` (the names themselves: tests/envs/test_registry.py)."""

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import envs
from bandits_jax.cli import main
from bandits_jax.cli import reproduce as rep
from bandits_jax.cli import sweep as sweep_cmd
from bandits_jax.mlogb import cost as mlogb_cost
from bandits_jax.sim import sweep

BAD = [  # the registry's parser refuses them (tests/envs/test_registry.py): here, one line each
    ("digits-12", "needs a class in 0..9"),
    ("synth-20-1-S0", "finite S > 0"),
    ("lowrank-20-1-30", "R <= D"),
    ("cifar-all", "expected one of"),
    ("bco-linear-3", "BCO setting"),  # reproduce plays MLogB settings
]


@pytest.mark.parametrize("name,needle", BAD, ids=[b[0] for b in BAD])
def test_bad_setting_on_the_command_line(name, needle, tmp_path, capsys):
    rc = main(["reproduce", "--settings", name, "--out", str(tmp_path / "o"), "--quiet"])
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("bandits-jax: error: --settings:")
    assert needle in lines[0] and name in lines[0]


W_NORM_CASES = [
    # name, --S, S of the environment
    ("synth-20-1-S8", None, 8.0),
    ("synth-20-1-S8", 3.0, 8.0),  # the name wins over --S
    ("synth-20-1", 2.5, 2.5),  # no S in the name: --S
    ("lowrank-30-1-5", None, 1.0),  # neither: 1
    ("heavy-20-1-1", 2.0, 2.0),
]


@pytest.mark.parametrize("name,S_opt,S", W_NORM_CASES)
def test_the_command_builds_the_registrys_setting(name, S_opt, S):
    """``--S`` reaches the environment where the name has no S<s>: the command's setting is
    ``envs.make``'s with that S (the same draws)."""
    args = argparse.Namespace(S=S_opt, mnist=None)
    st = rep.build_setting(args, name, jnp.float64)
    direct = envs.make(name, dtype=jnp.float64, **({} if envs.parse(name).S else {"S": S}))
    assert st.S == S == direct.S
    key = jax.random.key(1)
    for a, b in zip(jax.tree.leaves(st.env.init(key)), jax.tree.leaves(direct.env.init(key)),
                    strict=True):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_build_runs_uses_the_trial_index():
    st = envs.make("iris-all", dtype=jnp.float64)
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
    make = rep.build_setting

    def recording(*args):
        st = make(*args)

        def init_env_trial(key, i):
            state = st.init_env_trial(key, i)
            seen.append((i, int(np.argmax(np.asarray(state.level)))))
            return state

        return st._replace(init_env_trial=init_env_trial)

    monkeypatch.setattr(rep, "build_setting", recording)
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


def _limit_args(T=100):
    return argparse.Namespace(sketch=None, plan={"T": T})


def test_reproduce_skips_a_learner_over_its_limit():
    """OFUL at d = 4,096: its round, (K d)^3 multiply-adds at mlogb.cost.RATE, is estimated at
    over rep.LIMIT's 1000 ms; LinUCB at d = 10,000: its inverse, 8 * 10001^2 bytes, is over
    512 MiB. Both are named in a note, not played; LinUCB at d = 100 plays."""
    recipe = rep.Recipe(1, 4096, 1.0, 100, 0.75, 0.75, "theory", [1.0], jnp.float64)
    assert 4096**3 / mlogb_cost.RATE * 1e3 > rep.LIMIT.ms_per_round
    why = rep._over_budget(_limit_args(), "oful", 1, 4096, recipe)
    assert why is not None and "ms a round" in why and "the command plays a learner up to" in why
    assert 8 * 10001**2 > rep.LIMIT.bytes_per_trial
    big = recipe._replace(dim=10000)
    assert rep._over_budget(_limit_args(), "linucb", 1, 10000, big) is not None
    small = recipe._replace(dim=100)
    assert rep._over_budget(_limit_args(), "linucb", 1, 100, small) is None
