"""benchmarks.batched_throughput: a tiny run (BCO learner, trials 1 and 2, 3 rounds, float32)
whose JSON is consistent: learner-rounds/s is trials * rounds over the median seconds per call,
the speedup is that rate over trials = 1's, and the best batch follows the 10% rule. The script
runs in a subprocess, as a user runs it; the test imports nothing of it."""

import json
import os
import pathlib
import statistics
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    # A subprocess: main() picks the device and threads of the process it runs in.
    out = tmp_path_factory.mktemp("bench") / "batched.json"
    argv = ["--trials-list", "1,2", "--rounds", "3", "--repeats", "2", "--min-time", "0.01"]
    argv += ["--learners", "bco"]
    argv += ["--dtypes", "float32", "--device", "cpu", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.batched_throughput", *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout


def test_json_numbers_are_consistent(result):
    data, stdout = result
    cases = data["cases"]
    assert [(c["learner"], c["dtype"], c["trials"], c["rounds"]) for c in cases] == [
        ("bco", "float32", 1, 3),
        ("bco", "float32", 2, 3),
    ]
    base = cases[0]["learner_rounds_per_s"]
    for c in cases:
        s = c["seconds_per_call"]
        assert s["min"] <= s["median"] <= s["max"]
        assert len(c["times_s"]) == 2
        assert s["median"] == pytest.approx(statistics.median(c["times_s"]), rel=1e-12)
        assert s["min"] == min(c["times_s"]) and s["max"] == max(c["times_s"])
        rate = c["trials"] * c["rounds"] / s["median"]
        assert c["learner_rounds_per_s"] == pytest.approx(rate, rel=1e-9)
        assert c["speedup_base_trials"] == 1
        assert c["speedup"] == pytest.approx(rate / base, rel=1e-9)
        assert c["compile_s"] > 0 and c["calls_per_repeat"] >= 1
    # The best batch: the smallest that no larger one beats by more than 10% (two batches here:
    # 2 where it is more than 1.1 times as fast as 1).
    r1, r2 = (c["learner_rounds_per_s"] for c in cases)
    assert data["best_batch"] == {"bco": {"float32": 2 if r2 > 1.1 * r1 else 1}}
    assert data["platform"] == "cpu" and data["backend"] == "cpu"
    assert data["jax"] and data["cpu_count"] >= 1 and len(data["loadavg_start"]) == 3
    assert data["workers"][0]["x64"] is False
    assert "best batch" in stdout and "BCO Alg. 1" in stdout
