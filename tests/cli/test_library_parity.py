"""The command and the library give the same numbers for the same setting, seeds and precision.

``bandits-jax reproduce --seed s`` plays trial ``i`` with ``sim.sweep.seed_keys([s + i])``: the
first key draws the environment, the second drives the rounds. The library does the same with
``mlogb.tuned``, ``envs.synthetic_mlogb`` and ``sim.make_rollout``. Each side runs in its own
process, as users run them, in float64 and in float32 (``--float32``; x64 off).
"""

import json
import os
import pathlib
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.cli import build_parser
from bandits_jax.cli import options as opt

T, D, S, SEED, TRIALS = 12, 6, 4.0, 3, 2
ROOT = pathlib.Path(__file__).resolve().parents[2]
# The library side, in a user's process: argv = dtype name, comma list of kinds, [T, D, S, SEED,
# TRIALS] as JSON.
LIBRARY = """
import json, sys
import jax
if sys.argv[1] == "float64":
    jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
from bandits_jax import envs, mlogb
from bandits_jax.sim import make_rollout, sweep
dtype = jnp.dtype(sys.argv[1])
T, D, S, SEED, TRIALS = json.loads(sys.argv[3])
env = envs.synthetic_mlogb(num_outcomes=1, dim=D, S=S, dtype=dtype)
env_keys, run_keys = sweep.seed_keys([SEED + i for i in range(TRIALS)])
env_states = jax.jit(jax.vmap(env.init))(env_keys)
out = {}
for kind in sys.argv[2].split(","):
    rec = mlogb.tuned(kind, num_outcomes=1, dim=D, S=S, horizon=T, dtype=dtype)
    run = jax.jit(make_rollout(mlogb.interact(rec.learner, env), T, trials=True))
    init = jax.jit(rec.learner.init)(rec.hparams)
    out[kind] = np.asarray(run(init, env_states, run_keys).regret).sum(axis=-1).tolist()
print(json.dumps(out))
"""


@pytest.mark.long  # minutes of CPU: CI runs it after the default suite
@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_reproduce_equals_the_library_for_the_same_seeds(tmp_path, dtype):
    """The command in its own process (no ``XLA_FLAGS`` of the suite's: its own options over
    XLA's defaults, as a user runs it) against the library in a user's process (XLA's
    defaults), in float64 and with ``--float32``: the same final regrets to rounding, a derived
    bound."""
    kinds = {"eofd-robust": "EOFD robust", "linucb": "LinUCB"}
    if dtype == jnp.float32:  # the precision's own code is the learner's: one learner suffices
        kinds.pop("linucb")
    argv = [
        "reproduce", "--settings", f"synth-{D}-1-S{S:g}", "--learners", ",".join(kinds),
        "--rounds", str(T), "--trials", str(TRIALS), "--seed", str(SEED), "--chunk", "5",
        "--no-plots", "--quiet", "--compile-cache", "off", "--out", str(tmp_path),
        *(["--float32"] if dtype == jnp.float32 else []),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_ENABLE_X64")}
    proc = subprocess.run(
        [sys.executable, "-m", "bandits_jax", *argv], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "reproduce.json").read_text())
    (setting,) = report["settings"].values()
    assert report["dtype"] == jnp.dtype(dtype).name
    # the command's own options reached XLA (quick or not: the classic emitters by default)
    # (the codegen split is one part per core the process keeps: it narrows its own affinity)
    split = "xla_cpu_parallel_codegen_split_count"
    own = opt.compiler_options(build_parser().parse_args(argv))
    got = report["compile_cache"]["xla_options"]
    assert own and {**got, split: 0} == {**own, split: 0} and got[split] >= 1

    # The library as a user runs it: its own process, x64 only for float64, no XLA_FLAGS.
    lib = subprocess.run(
        [sys.executable, "-c", LIBRARY, jnp.dtype(dtype).name, ",".join(kinds),
         json.dumps([T, D, S, SEED, TRIALS])], cwd=ROOT,
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert lib.returncode == 0, lib.stderr[-3000:]
    library = json.loads(lib.stdout.strip().splitlines()[-1])
    # A round's regret is best - chosen of rewards sigma(W* x) in [0, 1]: with the same actions
    # each is within (d S + K + 2) eps of exact (the logit's d-term dot product with
    # |W* x| <= S, the sigmoid), the two sides and W*'s own rounding (its normalisation) twice
    # that, summed over T rounds. The std of two trials is |f1 - f2| / sqrt(2): twice the bound.
    eps = np.finfo(dtype).eps
    atol = 4 * T * (D * S + 1 + 2) * eps
    for kind, label in kinds.items():
        finals = np.asarray(library[kind])
        got = setting["learners"][label]
        np.testing.assert_allclose(got["final_regret_mean"], finals.mean(), rtol=0, atol=atol)
        np.testing.assert_allclose(
            got["final_regret_std"], finals.std(ddof=1), rtol=0, atol=2 * atol
        )
