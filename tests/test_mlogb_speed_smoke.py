"""``benchmarks.mlogb_speed`` (issue 55's benchmark) at its smallest, in the default run: the
JSON's structure, every figure positive and finite, every ratio the ratio of its parts; and its
plain floors (``benchmarks/_plain.py``) against the library: plain LinUCB makes the library's
LinUCB decisions with its ``theta``, and plain linear TS's square-root factor keeps ``R R^T =
A^{-1}`` (at ``v = 0`` it is greedy ridge, the library's LinUCB at ``alpha = 0``), so a floor is
the same arithmetic as the kind it bounds. The comparisons compile at XLA's own options."""

from __future__ import annotations

import json
import math
import os
import pathlib
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import mlogb
from benchmarks import _plain
from benchmarks.mlogb_speed import TARGETS, library_parts, plain_parts, program
from tests import xla_defaults

ROOT = pathlib.Path(__file__).resolve().parents[1]
EPS = np.finfo(np.float64).eps
ARGV = ["--quick", "--kinds", "linucb,lin-ts", "--sizes", "20x1", "--batch-sizes", "20x1",
        "--eofd-cases", "none", "--trials", "4", "--repeats", "2"]  # fmt: skip


def _positive(value) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value > 0


def _check_figures(row: dict) -> None:
    """Every ``*_s`` figure a positive finite number; every spread ``[min, max]`` around its
    median (the spread's keys: the figure's with ``_spread``)."""
    for key, value in row.items():
        if key.endswith("_spread_s"):
            lo, hi = value
            mid = row[key.replace("_spread_s", "_s")]
            assert _positive(lo) and lo <= mid <= hi and math.isfinite(hi), (key, row)
        elif key.endswith("_s"):
            assert _positive(value), (key, row)


@pytest.mark.slow
def test_quick_run_writes_every_figure_and_target(tmp_path):
    """The script as a user runs it (a subprocess), two kinds at 20 x 1, 4 trials."""
    path = tmp_path / "speed.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.mlogb_speed", *ARGV, "--json", str(path)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(path.read_text())
    assert {"cases", "skipped", "batching", "eofd_numpy", "goals", "environment"} <= set(data)
    rows = {r["learner"]: r for r in data["cases"]}
    assert set(rows) == {"linucb", "lin-ts"} and not data["skipped"] and not data["eofd_numpy"]
    for r in rows.values():
        assert (r["d"], r["K"]) == (20, 1) and r["rounds"] >= 2, r
        _check_figures(r)
        assert {"jax_s", "plain_s", "numpy_s", "busy_s"} <= set(r), r
        floors = {"plain": r["plain_s"], "numpy": r["numpy_s"]}
        assert r["floor_s"] == min(floors.values()) == floors[r["floor"]]
        assert r["over_floor"] == pytest.approx(r["jax_s"] / r["floor_s"], rel=4 * EPS)
        assert r["busy_over_quiet"] == pytest.approx(r["busy_s"] / r["jax_s"], rel=4 * EPS)
    batch = {r["learner"]: r for r in data["batching"]}
    assert set(batch) == {"linucb", "lin-ts"}
    for r in batch.values():
        _check_figures(r)
        assert r["trials"] == 4 and {"vmapped_s", "sharded_s"} <= set(r), r
        assert r["vmapped_over_one"] == pytest.approx(r["vmapped_s"] / r["one_trial_s"], 4 * EPS)
        assert r["sharded_speedup"] == pytest.approx(r["vmapped_s"] / r["sharded_s"], 4 * EPS)
    # One goal per target, kind and size, met exactly when its value meets the bound.
    for name, (what, key, op, bound) in TARGETS.items():
        source = batch if name in ("vmapped", "sharded") else rows
        got = [g for g in data["goals"] if g["goal"] == what]
        assert sorted(g["learner"] for g in got) == sorted(source), name
        for g in got:
            assert g["value"] == source[g["learner"]][key]
            assert g["met"] == (g["value"] <= bound if op == "<=" else g["value"] >= bound)
        assert what in proc.stdout
    assert "MISSED" in proc.stdout or " met" in proc.stdout


def _stream(K=2, d=6, T=40, N=8, seed=3):
    X, U, W = _plain.stream(K, d, T, N, seed)
    return jnp.asarray(X), jnp.asarray(U), jnp.asarray(W)


def _ridge(X, idx, ys, lam, rewards):
    """Dense numpy ridge on the chosen actions: ``(A = lam I + Z^T Z, theta = A^{-1} Z^T r)``
    and the bound ``kappa`` on ``A``'s condition number (``||z||^2 = 2``)."""
    X = np.asarray(X)
    Z = np.hstack([X[np.arange(len(idx)), np.asarray(idx)], np.ones((len(idx), 1))])
    r = np.concatenate([[0.0], np.asarray(rewards)])[np.asarray(ys)]
    A = lam * np.eye(Z.shape[1]) + Z.T @ Z
    return A, np.linalg.solve(A, Z.T @ r), 1.0 + 2.0 * len(idx) / lam


def _run(act, update, state, X, U, W):
    final, (idx, ys) = xla_defaults.jit(program(act, update))(state, X, U, W)
    return final, np.asarray(idx), np.asarray(ys)


def test_plain_linucb_makes_the_library_decisions():
    """Plain LinUCB (Sherman-Morrison, no guards) and ``mlogb.linucb`` choose the same actions
    on a 40-round stream and end at the same ``theta``: both that of a dense numpy ridge solve
    to ``64 T kappa eps`` (each round's rank-one update carries ``kappa eps`` of relative error,
    passed on with O(1) gain; 64 covers the sums of O(D) terms)."""
    K, d = 2, 6
    X, U, W = _stream(K, d)
    tu = mlogb.tuned("linucb", num_outcomes=K, dim=d, S=_plain.S, horizon=_plain.HORIZON)
    lib, idx, ys = _run(*library_parts(tu.learner), tu.learner.init(tu.hparams), X, U, W)
    p = _plain.plain("linucb", K, d, tu.hparams)
    got, pidx, pys = _run(*plain_parts(p), p.init(), X, U, W)
    np.testing.assert_array_equal(pidx, idx)
    np.testing.assert_array_equal(pys, ys)
    assert len(set(idx.tolist())) > 1  # the bonus and the estimate both decide
    lam = float(tu.hparams.lam)
    _, theta, kappa = _ridge(X, idx, ys, lam, tu.hparams.rewards)
    tol = 64 * len(idx) * kappa * EPS * np.linalg.norm(theta)
    np.testing.assert_allclose(np.asarray(got.theta), theta, rtol=0, atol=tol)
    lib_theta = np.concatenate([np.asarray(lib.theta), [float(lib.bias)]])
    np.testing.assert_allclose(lib_theta, theta, rtol=0, atol=tol)


def test_plain_lin_ts_root_is_the_ridge_inverse():
    """Plain linear TS at ``v = 0`` (the draw is ``theta``) makes ``mlogb.linucb``'s decisions at
    ``alpha = 0``; its factor ``R`` keeps ``R R^T = A^{-1}`` and ``R R^T b = theta`` of a dense
    numpy solve, to ``64 T kappa eps`` relative (the tolerance of the test above)."""
    K, d = 2, 6
    X, U, W = _stream(K, d, seed=4)
    lam, rewards = 0.7, [0.5, 1.0]
    linucb = mlogb.linucb(num_outcomes=K, dim=d)
    hp = linucb.hyperparams(lam=lam, alpha=0.0, rewards=rewards)
    _, idx, ys = _run(*library_parts(linucb), linucb.init(hp), X, U, W)
    p = _plain.plain_lin_ts(d, lam, 0.0, jnp.asarray(rewards), jnp.float64)
    got, pidx, pys = _run(*plain_parts(p), p.init(), X, U, W)
    np.testing.assert_array_equal(pidx, idx)
    np.testing.assert_array_equal(pys, ys)
    assert len(set(idx.tolist())) > 1
    A, theta, kappa = _ridge(X, idx, ys, lam, rewards)
    R = np.asarray(got.R)
    A_inv = np.linalg.inv(A)
    rel = 64 * len(idx) * kappa * EPS
    np.testing.assert_allclose(R @ R.T, A_inv, rtol=0, atol=rel * np.linalg.norm(A_inv, 2))
    np.testing.assert_allclose(np.asarray(got.sample), theta, rtol=0,
                               atol=rel * np.linalg.norm(theta))  # fmt: skip
