"""float32, as users run it (x64 off, XLA's own options), against float64 for every learner.

One subprocess computes every case of ``tests/precision_cases.py`` in float32 with x64 off and
no ``XLA_FLAGS``; each test compares its case with the float64 side: the learner's numpy
reference (``references``, float64) on the same inputs and the float32 run's own
draws (``tests/precision_references.py``, which says how each reference's numbers are read as
the learner's). The references agree with the float64 learners to about 1e-15 (what the reference
tests check, ``tests/mlogb/test_*reference*``, ``tests/bco/test_references.py`` and the others),
nine orders below the float32 tolerances, so they are the float64 yardstick without compiling a
float64 program per learner. A case without a numpy reference (``alg5-dynamic``, Algorithm 5)
is computed in float64 by the learner itself (:func:`float64_run`).

Tolerances. A float32 round rounds every quantity it forms with a relative error of at most
``eps = 2^-23`` per operation; we allow ``c = 16`` such roundings of the quantity's scale per
round. The learners neither amplify nor damp earlier errors (an online step moves the iterate by a
bounded amount a round; the solves are backward stable and their condition numbers,
``<= 1 + 2 T / lam`` here, enter only through that small step), so errors of successive rounds,
independent roundings, add up like a random walk: after ``t`` rounds the error is at most
``c eps sqrt(t)`` times the quantity's scale. The bound is checked round by round, so an error
that is there from round 1 on (a formula that cancels in float32) fails early rounds and one that
compounds fails late ones; on failure the message gives the largest error-to-bound ratio.

Statuses must agree round by round (a reference's: the status its learner reports for what the
reference did, ``tests/precision_references.py``), and no MLogB round of the float32 run reports
a failure (``status.is_failure``): these are ordinary runs (actions of norm <= 1, the projection
active on many rounds), where a failure count a user reads must be zero. ``INEXACT`` (an
estimate outside the ball by more than ``linalg.projection.ball_margin``) is one.
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

from bandits_jax.status import Status, count_status, is_failure
from tests import precision_cases as pc
from tests import precision_references as pr
from tests import xla_defaults

EPS32 = float(np.finfo(np.float32).eps)
ROOT = Path(__file__).resolve().parents[1]
ROUNDS = np.arange(1, pc.T + 1)
FAILURES = {s.name.lower() for s in Status if bool(is_failure(int(s)))}
# A subprocess compiling every learner at XLA's defaults: minutes of CPU, so CI runs it after
# the default suite (marker ``long``).
pytestmark = [pytest.mark.slow, pytest.mark.long]


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
    """A case in float64 by the learner itself, compiled at the suite's options (they move
    float64 numbers by about 1e-16, nine orders below the float32 tolerances), or at XLA's
    defaults: the yardstick of a case without a numpy reference."""
    jit = xla_defaults.jit if at_defaults else jax.jit
    return {k: np.asarray(v) for k, v in pc.CASES[name](jnp.float64, jit).items()}


def float64_side(name: str, run32: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The yardstick of the float32 run ``run32`` of case ``name``: its numpy reference on the
    same inputs and draws, else (no reference) :func:`float64_run`."""
    if name in pr.REFERENCES:
        return pr.REFERENCES[name](run32)
    return float64_run(name)


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


def _case(runs, name):
    return {k.split("/", 1)[1]: v for k, v in runs.items() if k.startswith(name + "/")}


@pytest.mark.parametrize("name", list(pc.MLOGB))
def test_mlogb_float32_tracks_float64(float32_runs, name):
    got = _case(float32_runs, name)
    assert got["W"].dtype == np.float32 and got["bonus"].dtype == np.float32
    failed = {k: n for k, n in count_status(got["status"]).items() if n and k in FAILURES}
    assert not failed, f"{name}: float32 failures {failed}"
    want = float64_side(name, got)
    np.testing.assert_array_equal(got["status"], want["status"])
    for field in ("W", "estimate", "bonus"):
        _close_by_round(got[field], want[field], f"{name} {field}")


@pytest.mark.parametrize("name", list(pc.BCO))
def test_bco_float32_tracks_float64(float32_runs, name):
    """Every BCO learner on the float32 run's own draws and loss sequence (Algorithm 3 draws its
    direction in the state's dtype: a float64 learner would draw others)."""
    got = _case(float32_runs, name)
    assert got["points"].dtype == np.float32
    want = float64_side(name, got)
    np.testing.assert_array_equal(got["status"], want["status"])  # BCO never reports INEXACT
    for field in ("points", "loss"):
        _close_by_round(got[field], want[field], f"{name} {field}")


def test_xla_defaults_are_what_a_process_without_flags_computes(tmp_path):
    """``xla_defaults.jit`` in this process (the suite's level-0 ``XLA_FLAGS``) computes a
    robust EOFD and a universal-ensemble run bit for bit as a process without ``XLA_FLAGS`` does
    (so every reference test compiled with it runs at XLA's defaults)."""
    names = ["eofd-robust-k3", "alg6-universal"]
    clean = _user_process(tmp_path / "x64.npz", "--x64", *names)
    for name in names:
        for field, want in _case(clean, name).items():
            np.testing.assert_array_equal(float64_run(name, True)[field], want, err_msg=name)
