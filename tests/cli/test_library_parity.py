"""The command and the library give the same numbers for the same setting, seeds and precision.

``bandits-jax reproduce --seed s`` plays trial ``i`` with ``sim.sweep.seed_keys([s + i])``: the
first key draws the environment, the second drives the rounds. The library does the same with
``mlogb.tuned``, ``envs.synthetic_mlogb`` and ``sim.make_rollout``; the
README tells users so. Both run in float64 here (the suite enables x64; the command does too),
and in float32 (``--float32``).
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import cli, envs, mlogb
from bandits_jax.cli import build_parser, main
from bandits_jax.cli import options as opt
from bandits_jax.sim import make_rollout, sweep
from tests import xla_defaults

T, D, S, SEED, TRIALS = 12, 6, 4.0, 3, 2


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_reproduce_equals_the_library_for_the_same_seeds(tmp_path, monkeypatch, dtype):
    """The command at its own XLA options against the library compiled at XLA's defaults (what a
    library user gets), in float64 and with ``--float32``: the same final regrets to rounding, a
    derived bound."""
    kinds = {"eofd-robust": "EOFD robust", "linucb": "LinUCB"}
    if dtype == jnp.float32:  # the precision's own code is the learner's: one learner suffices
        kinds.pop("linucb")
    argv = [
        "reproduce", "--settings", f"synth-{D}-1-S{S:g}", "--learners", ",".join(kinds),
        "--rounds", str(T), "--trials", str(TRIALS), "--seed", str(SEED), "--chunk", "5",
        "--no-plots", "--quiet", "--compile-cache", "off", "--out", str(tmp_path),
        *(["--float32"] if dtype == jnp.float32 else []),
    ]  # fmt: skip
    # In a user's process (no XLA_FLAGS) the command's options are changes to XLA's defaults;
    # here they are applied over the defaults, not over the suite's fast flags.
    own = opt.compiler_options(build_parser().parse_args(argv))
    used = []

    def as_in_a_users_process(args):
        options = {**xla_defaults.DEFAULTS, **(opt.compiler_options(args) or {})}
        used.append(options)
        return options

    monkeypatch.setattr(cli, "compiler_options", as_in_a_users_process)
    assert main(argv) == 0
    assert used and own and all(o == {**xla_defaults.DEFAULTS, **own} for o in used)
    report = json.loads((tmp_path / "reproduce.json").read_text())
    (setting,) = report["settings"].values()
    assert report["dtype"] == jnp.dtype(dtype).name

    env = envs.synthetic_mlogb(num_outcomes=1, dim=D, S=S, dtype=dtype)
    env_keys, run_keys = sweep.seed_keys([SEED + i for i in range(TRIALS)])
    env_states = xla_defaults.jit(jax.vmap(env.init))(env_keys)
    # A round's regret is best - chosen of rewards sigma(W* x) in [0, 1]: with the same actions
    # each is within (d S + K + 2) eps of exact (the logit's d-term dot product with
    # |W* x| <= S, the sigmoid), the two sides and W*'s own rounding (its normalisation) twice
    # that, summed over T rounds. The std of two trials is |f1 - f2| / sqrt(2): twice the bound.
    eps = np.finfo(dtype).eps
    atol = 4 * T * (D * S + 1 + 2) * eps
    for kind, label in kinds.items():
        rec = mlogb.tuned(kind, num_outcomes=1, dim=D, S=S, horizon=T, dtype=dtype)
        run = xla_defaults.jit(make_rollout(mlogb.interact(rec.learner, env), T, trials=True))
        init = xla_defaults.jit(rec.learner.init)(rec.hparams)
        finals = np.asarray(run(init, env_states, run_keys).regret).sum(axis=-1)
        got = setting["learners"][label]
        np.testing.assert_allclose(got["final_regret_mean"], finals.mean(), rtol=0, atol=atol)
        np.testing.assert_allclose(
            got["final_regret_std"], finals.std(ddof=1), rtol=0, atol=2 * atol
        )
