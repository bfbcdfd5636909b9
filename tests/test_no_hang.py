"""Every registry kind finishes, with no failed status, in a user's own process: XLA's default
options (no ``XLA_FLAGS``, its multi-threaded CPU runtime), x64 off and on, vmapped trials.

Batched LAPACK calls once deadlocked XLA's CPU thread pool here (``docs/xla_cpu_hang.md``); the
runs are in a subprocess (``tests/rollout_cases.py``) watched case by case, so that a hang fails
naming its case instead of stalling the suite. Failure counts are zero on these ordinary runs
(unit-norm actions): what ``count_status`` reports to a user is a real failure.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import queue
import subprocess
import sys
import threading

import pytest

from bandits_jax.status import Status, is_failure
from tests.rollout_cases import cases

ROOT = pathlib.Path(__file__).resolve().parents[1]
CASE_TIMEOUT = 900  # seconds for one case: the exact fit at K d = 130 takes minutes
FAILURES = [s.name.lower() for s in Status if bool(is_failure(int(s)))]


def _watch(args: list[str]) -> dict[str, dict]:
    """Runs ``tests/rollout_cases.py ARGS`` with no ``XLA_FLAGS``; fails naming the case that
    gives no result within :data:`CASE_TIMEOUT`."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "NPROC", "PJRT_NPROC")}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "rollout_cases.py"), *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout] + [lines.put(None)],
                     daemon=True).start()  # fmt: skip
    results, current = {}, "startup"
    try:
        while True:
            try:
                line = lines.get(timeout=CASE_TIMEOUT)
            except queue.Empty:
                pytest.fail(f"{current} gave no result in {CASE_TIMEOUT} s ({' '.join(args)})")
            if line is None:
                break
            word, name, *rest = line.split(maxsplit=2)
            current = name
            if word == "done":
                results[name] = json.loads(rest[0])
    finally:
        proc.kill()
        stderr = proc.communicate()[1]
    assert proc.returncode in (0, -9), stderr[-3000:]
    return results


@pytest.mark.long
@pytest.mark.slow
@pytest.mark.parametrize("x64", [False, True], ids=["float32", "float64"])
def test_every_kind_finishes_at_xla_defaults_with_no_failure(x64):
    args = ["--rounds", "1000", "--trials", "8"] + (["--x64"] if x64 else [])
    results = _watch(args)
    expected = [f"{k}:{K}:{d}" for k, K, d in cases()]
    assert sorted(results) == sorted(expected)
    for name, r in results.items():
        bad = {k: r["status"][k] for k in FAILURES if r["status"][k]}
        bad |= {f"select {k}": r["select_status"][k] for k in FAILURES if r["select_status"][k]}
        assert not bad, f"{name} (x64={x64}): failed steps {bad}"
        assert math.isfinite(r["regret"]), name


@pytest.mark.long
def test_largest_whole_batches_finish_at_xla_defaults():
    """``tests/whole_batches.py``: the library's largest one-call batches at XLA's defaults."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "NPROC", "PJRT_NPROC")}
    try:
        out = subprocess.run([sys.executable, str(ROOT / "tests" / "whole_batches.py")], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("batched LAPACK calls below jaxlib's split work (lapack.MIN_SPLIT_WORK) gave "
                    "no result in 300 s: jaxlib splits them now; lower MIN_SPLIT_WORK")  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-1] == "finished", out.stdout
