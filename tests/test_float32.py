"""float32, as users run it (x64 off, XLA's own options), against float64 for every learner.

One subprocess computes every case of ``tests/precision_cases.py`` in float32 with x64 off and
no ``XLA_FLAGS``; each test computes its case in float64 and compares.

Tolerances. A float32 round rounds every quantity it forms with a relative error of at most
``eps = 2^-23`` per operation; we allow ``c = 16`` such roundings of the quantity's scale per
round. The learners neither amplify nor damp earlier errors (an online step moves the iterate by a
bounded amount a round; the solves are backward stable and their condition numbers,
``<= 1 + 2 T / lam`` here, enter only through that small step), so errors of successive rounds,
independent roundings, add up like a random walk: after ``t`` rounds the error is at most
``c eps sqrt(t)`` times the quantity's scale. The bound is checked round by round, so an error
that is there from round 1 on (a formula that cancels in float32) fails early rounds and one that
compounds fails late ones; on failure the message gives the largest error-to-bound ratio.

Statuses must agree round by round, except ``INEXACT``: on a round whose projection is active
the estimate may land outside the ball by slightly more than the ``4 eps`` that
``mlogb.learner.into_ball`` allows, in either precision, and is put back on the sphere; such a
round counts as ``CONVERGED`` here.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax.reference import bco_sphere_numpy as ref3
from bandits_jax.status import Status
from tests import precision_cases as pc
from tests import xla_defaults

EPS32 = float(np.finfo(np.float32).eps)
ROOT = Path(__file__).resolve().parents[1]
ROUNDS = np.arange(1, pc.T + 1)
pytestmark = pytest.mark.slow  # a subprocess and a compile at XLA's defaults per learner


def _user_process(out: Path, *args: str) -> dict[str, np.ndarray]:
    """``tests.precision_cases`` in a process without the suite's ``XLA_FLAGS`` and x64."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_ENABLE_X64")}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.precision_cases", str(out), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    with np.load(out) as runs:
        return dict(runs)


@pytest.fixture(scope="module")
def float32_runs(tmp_path_factory):
    """Every case in float32, computed once in a process like a user's."""
    return _user_process(tmp_path_factory.mktemp("float32") / "runs.npz")


@functools.cache
def float64_run(name: str, at_defaults: bool = False) -> dict[str, np.ndarray]:
    """A case in float64: the yardstick of the float32 run, compiled at the suite's options
    (they move float64 numbers by about 1e-16, nine orders below the float32 tolerances), or at
    XLA's defaults."""
    jit = xla_defaults.jit if at_defaults else jax.jit
    return {k: np.asarray(v) for k, v in pc.CASES[name](jnp.float64, jit).items()}


def _close_by_round(got, want, what, scale=None):
    """``|got - want| <= 16 eps32 sqrt(t) scale`` row by row (round t = 1..T, module
    docstring); ``scale``: the quantity's size (default: its largest float64 magnitude)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = float(np.max(np.abs(want))) if scale is None else scale
    bound = 16.0 * EPS32 * np.sqrt(ROUNDS) * scale
    err = np.abs(got - want).reshape(pc.T, -1).max(axis=1)
    bad = np.flatnonzero(err > bound)
    assert bad.size == 0, (
        f"{what}: float32 off float64 from round {bad[0] + 1} on: error {err[bad[0]]:.3g} > "
        f"bound {bound[bad[0]]:.3g}; largest error/bound "
        f"{np.max(err / bound):.3g}"
    )


def _status(run):
    """The run's statuses, ``INEXACT`` read as ``CONVERGED`` (module docstring)."""
    return np.where(run["status"] == Status.INEXACT, Status.CONVERGED, run["status"])


def _case(runs, name):
    return {k.split("/", 1)[1]: v for k, v in runs.items() if k.startswith(name + "/")}


@pytest.mark.parametrize("name", list(pc.MLOGB))
def test_mlogb_float32_tracks_float64(float32_runs, name):
    want = float64_run(name)
    got = _case(float32_runs, name)
    assert got["W"].dtype == np.float32 and got["bonus"].dtype == np.float32
    np.testing.assert_array_equal(_status(got), _status(want))
    for field in ("W", "estimate", "bonus"):
        _close_by_round(got[field], want[field], f"{name} {field}")


def _sphere_float64(run: dict) -> dict[str, np.ndarray]:
    """Algorithm 3 in float64 on the float32 run's own draws and loss sequence: the numpy
    reference (``reference.bco_sphere_numpy``), since the learner draws its direction in its
    dtype and a float64 learner would draw others."""
    env = {f: np.asarray(run[f"env_{f}"], np.float64) for f in pc.ENV_FIELDS}
    ts = np.arange(pc.T, dtype=np.float64)[:, None]
    phase = env["omega"] * ts
    centres = env["base"] + env["amplitude"] * (np.cos(phase) * env["u"] + np.sin(phase) * env["v"])
    out = ref3.algorithm3(
        lambda t, x: 0.5 * float(np.sum((x - centres[t]) ** 2)),
        pc.BCO_DIM,
        np.asarray(run["normal"], np.float64),
        domain=("ball", 1.0),
        delta=pc.BCO_DELTA,
        xi=pc.BCO_DELTA,  # xi = delta / r, r = 1 for the unit ball
        kind=pc.SPHERE[1],
        params=dict(radius=1.0, lam=1.0, lipschitz=1.0, scale=1.0, offset=0.0),
    )
    return {"points": out["queries"], "loss": out["loss"]}


def test_sphere_float32_tracks_float64_on_its_own_draws(float32_runs):
    name = pc.SPHERE[0]
    got = _case(float32_runs, name)
    assert got["points"].dtype == np.float32
    np.testing.assert_array_equal(got["status"], Status.CONVERGED)
    want = _sphere_float64(got)
    _close_by_round(got["points"], want["points"], f"{name} points")
    # The learner charges each query's loss; the reference their mean.
    _close_by_round(got["loss"].mean(axis=-1), want["loss"], f"{name} loss")


@pytest.mark.parametrize("name", list(pc.BCO))
def test_bco_float32_tracks_float64(float32_runs, name):
    want = float64_run(name)
    got = _case(float32_runs, name)
    assert got["points"].dtype == np.float32
    np.testing.assert_array_equal(_status(got), _status(want))
    for field in ("points", "loss"):
        _close_by_round(got[field], want[field], f"{name} {field}")


def test_xla_defaults_are_what_a_process_without_flags_computes(tmp_path):
    """``xla_defaults.jit`` in this process (the suite's level-0 ``XLA_FLAGS``) computes a
    robust EOFD and a universal-ensemble run bit for bit as a process without ``XLA_FLAGS`` does
    (so the float64 sides above, and every reference test compiled with it, run at XLA's
    defaults)."""
    names = ["eofd-robust-k3", "alg6-universal"]
    clean = _user_process(tmp_path / "x64.npz", "--x64", *names)
    for name in names:
        for field, want in _case(clean, name).items():
            np.testing.assert_array_equal(float64_run(name, True)[field], want, err_msg=name)
