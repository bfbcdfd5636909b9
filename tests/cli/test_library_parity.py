"""The command and the library give the same numbers for the same setting, seeds and precision.

``bandits-jax reproduce --seed s`` plays trial ``i`` with ``sim.sweep.seed_keys([s + i])``: the
first key draws the environment, the second drives the rounds. The library does the same with
``mlogb.tuned``, ``envs.synthetic_mlogb`` and ``sim.make_rollout``; the
README tells users so. Both run in float64 here (the suite enables x64; the command does too).
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import envs, mlogb
from bandits_jax.cli import build_parser, main
from bandits_jax.cli import options as opt
from bandits_jax.cli import reproduce as rp
from bandits_jax.sim import chunks, make_rollout, sweep

T, D, S, SEED, TRIALS = 12, 6, 4.0, 3, 2


def test_reproduce_equals_the_library_for_the_same_seeds(tmp_path):
    argv = [
        "reproduce", "--settings", f"synth-{D}-1-S{S:g}", "--learners", "eofd-robust,linucb",
        "--rounds", str(T), "--trials", str(TRIALS), "--seed", str(SEED), "--chunk", "5",
        "--no-plots", "--quiet", "--compile-cache", "off", "--out", str(tmp_path),
    ]  # fmt: skip
    assert main(argv) == 0
    report = json.loads((tmp_path / "reproduce.json").read_text())
    (setting,) = report["settings"].values()

    env = envs.synthetic_mlogb(num_outcomes=1, dim=D, S=S, dtype=jnp.float64)
    env_keys, run_keys = sweep.seed_keys([SEED + i for i in range(TRIALS)])
    env_states = jax.vmap(env.init)(env_keys)
    for kind, label in (("eofd-robust", "EOFD robust"), ("linucb", "LinUCB")):
        rec = mlogb.tuned(kind, num_outcomes=1, dim=D, S=S, horizon=T, dtype=jnp.float64)
        run = make_rollout(mlogb.interact(rec.learner, env), T, trials=True)
        finals = np.asarray(run(rec.learner.init(rec.hparams), env_states, run_keys).regret)
        finals = finals.sum(axis=-1)
        got = setting["learners"][label]
        np.testing.assert_allclose(got["final_regret_mean"], finals.mean(), rtol=1e-12)
        np.testing.assert_allclose(got["final_regret_std"], finals.std(ddof=1), rtol=1e-10)


@pytest.mark.parametrize("quick", [True, False])
def test_the_commands_initial_states_equal_the_librarys_bit_for_bit(quick):
    """``reproduce`` compiles each learner's ``init`` with its chunks' XLA options
    (``sim.chunks.compile_for``): every registry learner's state equals ``learner.init(hp)``."""
    args = build_parser().parse_args(["reproduce", *(["--quick"] if quick else [])])
    options = opt.compiler_options(args)
    assert options  # the command's options differ from XLA's defaults (else nothing is tested)
    for name in ("synth-6-1-S4", "synth-4-2", "digits-all-h1"):
        s = rp.make_setting(name, S=None, dtype=jnp.float64)
        recipe = rp.Recipe(s.num_outcomes, s.dim, s.S, T, 0.75, 0.75, "theory",
                           rp.env_rewards(s), jnp.float64)  # fmt: skip
        for lname, spec in rp.LEARNERS.items():
            if not rp.supports(spec, s.num_outcomes):
                continue
            learner = spec.factory(s.num_outcomes, s.dim, rp.sketch_size(s.num_outcomes, s.dim))
            hp = spec.hparams(rp.tuned_point(spec, recipe))
            with chunks.compiler_options(options):
                got = chunks.compile_for(learner.init, hp)(hp)
            want = learner.init(hp)
            for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
                np.testing.assert_array_equal(x, y, err_msg=f"{name} {lname}")
