"""docs/examples.md's three programs run as written, each as a user's program: in a fresh process
without the suite's x64 and ``XLA_FLAGS`` (float32, XLA's own options), and what they compute is
checked against what each example says it shows."""

import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples.md"

# Runs in the child: one block as a program (``__name__ == "__main__"``), then the names the
# checks read, as lists.
_RUN = """
import json, re, sys
import numpy as np
blocks = re.findall(r"```python\\n(.*?)```", open(sys.argv[1]).read(), flags=re.S)
ns = {"__name__": "__main__"}
exec(compile(blocks[int(sys.argv[2])], f"docs/examples.md python block {sys.argv[2]}", "exec"), ns)
import jax
out = {"x64": bool(jax.config.jax_enable_x64)}
for name in sys.argv[3:]:
    value = np.asarray(ns[name])
    out[name] = {"dtype": str(value.dtype), "value": value.tolist()}
print(json.dumps(out))
"""


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", EXAMPLES.read_text(), flags=re.S)


def _run(index: int, *names: str) -> dict[str, np.ndarray]:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_ENABLE_X64")}
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, str(EXAMPLES), str(index), *names],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got.pop("x64") is False
    return {k: np.asarray(v["value"], dtype=v["dtype"]) for k, v in got.items()}


def test_there_are_three_programs():
    assert len(_blocks()) == 3


@pytest.mark.slow
def test_own_environment_and_loop():
    """(a): the tuned learner's cumulative regret, per trial, is finite and well below the
    uniformly random choice's on the same rounds (about 13 against 113: a third is a wide
    margin), and the optax baseline ran too."""
    got = _run(0, "regret", "adam_regret", "uniform_regret", "trials", "T")
    trials, T = int(got["trials"]), int(got["T"])
    for name in ("regret", "adam_regret", "uniform_regret"):
        assert got[name].shape == (trials,) and got[name].dtype == np.float32, name
        assert np.all(np.isfinite(got[name])) and np.all(got[name] >= 0), name
        assert np.all(got[name] <= T), name  # a round's regret is at most 1
    assert got["regret"].mean() < got["uniform_regret"].mean() / 3
    assert np.all(got["regret"] < got["uniform_regret"])


@pytest.mark.slow
def test_hyperparameter_grid_as_a_batch_of_states():
    """(b): one regret per (lam, eta, trial); the grid's points differ (the hyperparameters
    reached the states), and the best one is well below the uniformly random choice."""
    got = _run(1, "regret", "uniform_regret", "final", "trials")
    trials = int(got["trials"])
    assert got["regret"].shape == (3, 4, trials) and got["uniform_regret"].shape == (3, 4, trials)
    assert np.all(np.isfinite(got["regret"])) and got["regret"].dtype == np.float32
    np.testing.assert_allclose(got["final"], got["regret"].mean(-1), rtol=1e-6)
    # Equal keys for every grid point: the uniform choice's regret is the same at every point.
    u = got["uniform_regret"]
    np.testing.assert_allclose(u, np.broadcast_to(u[:1, :1], u.shape), rtol=1e-6)
    assert got["final"].max() > 2 * got["final"].min()
    assert got["final"].min() < got["uniform_regret"].mean() / 3


@pytest.mark.slow
def test_bco_learner_on_your_own_loss():
    """(c): Algorithm 1 ends far below its starting loss and near the minimiser."""
    got = _run(2, "losses", "w", "target", "T")
    T = int(got["T"])
    assert got["losses"].shape == (T,) and np.all(np.isfinite(got["losses"]))
    assert got["losses"][0] > 0.1  # w_1 = 0 is away from the minimiser
    assert got["losses"][-100:].mean() < 0.01 * got["losses"][0]
    assert np.linalg.norm(got["w"] - got["target"]) < 0.05
