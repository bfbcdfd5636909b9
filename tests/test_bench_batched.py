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


def _run(*argv, timeout=120):
    # A subprocess: main() picks the device and threads of the process it runs in.
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.batched_throughput", *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


TINY = ["--trials-list", "1,2", "--rounds", "3", "--repeats", "2", "--min-time", "0.01"]


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "batched.json"
    argv = [*TINY, "--learners", "bco", "--dtypes", "float32", "--device", "cpu", "--out", str(out)]
    proc = _run(*argv)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout, out


def test_json_numbers_are_consistent(result):
    data, stdout, _ = result
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


def test_specs_sizes_batched_forms_and_against(result, tmp_path):
    # A registry kind at its own size, its GPU form (the secular FD core; ECOLog's Cholesky prox),
    # and bco again: each case's rate over the first run's same case (bco only) is the ratio of
    # the two JSONs' rates.
    first, _, first_path = result
    out = tmp_path / "specs.json"
    specs = "eofd@6x2,eofd@6x2+batched,ecolog@4x1+batched,bco"
    argv = [*TINY, "--learners", specs, "--dtypes", "float32", "--device", "cpu"]
    proc = _run(*argv, "--against", str(first_path), "--json", str(out), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    infos = data["workers"][0]["learners"]
    assert (infos["eofd@6x2"]["d"], infos["eofd@6x2"]["K"]) == (6, 2)
    assert infos["eofd@6x2"]["solver"] == "auto"
    assert infos["eofd@6x2+batched"]["solver"] == "batched"
    assert infos["ecolog@4x1+batched"]["solver"] == "batched"
    rates = {(c["learner"], c["trials"]): c["learner_rounds_per_s"] for c in first["cases"]}
    for c in data["cases"]:
        other = rates.get((c["learner"], c["trials"]))
        if other is None:
            assert c["over_against"] is None
        else:
            assert c["over_against"] == pytest.approx(c["learner_rounds_per_s"] / other, rel=1e-9)
    assert data["against"]["file"] == str(first_path) and data["against"]["platform"] == "cpu"


@pytest.mark.parametrize("spec", ["nope", "linucb+batched", "eofd@20", "bco+batched", "eofd+gpu"])
def test_bad_learner_spec_is_an_error_line_and_exit_2(spec):
    proc = _run("--learners", spec, "--device", "cpu")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "error: argument --learners" in proc.stderr.strip().splitlines()[-1]
