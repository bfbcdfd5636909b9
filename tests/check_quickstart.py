"""Checks what README's quickstart command (``bandits-jax reproduce --quick``) wrote.

``python -m tests.check_quickstart RESULTS_DIR`` exits non-zero, naming the first problem, unless
the directory holds the run the README describes: the three quick settings, six learners each,
T = 200 rounds and 4 trials, float64; every summary statistic recomputed from the per-trial and
per-round numbers the run also wrote (mean, standard deviation, the end of the regret curve, the
CSV against the JSON); expected regret never negative; no rejected update; both figures written
as PNG files; a compile cache that the run filled. ``.ci/run`` runs it after the command.
"""

from __future__ import annotations

import csv
import json
import math
import pathlib
import sys

import numpy as np

SETTINGS = ("synth-20-1-S8", "lowrank-100-1-5-S8", "digits-all-h1")
LEARNERS = 6
ROUNDS, TRIALS = 200, 4
FIGURES = ("reproduce_regret.png", "reproduce_time.png")
PNG = b"\x89PNG\r\n\x1a\n"


def check(results: pathlib.Path) -> None:
    report = json.loads((results / "reproduce.json").read_text())
    assert report["rounds"] == ROUNDS and report["trials"] == TRIALS, "rounds/trials"
    assert report["dtype"] == "float64", report["dtype"]
    assert tuple(report["settings"]) == SETTINGS, list(report["settings"])
    cache = report["compile_cache"]
    assert cache and cache.get("entries", 0) > 0, f"compile cache not filled: {cache}"
    rows = {
        (r["setting"], r["learner"]): r for r in csv.DictReader(open(results / "reproduce.csv"))
    }
    assert len(rows) == len(SETTINGS) * LEARNERS, f"{len(rows)} CSV rows"
    for name, setting in report["settings"].items():
        assert len(setting["learners"]) == LEARNERS, (name, list(setting["learners"]))
        for label, got in setting["learners"].items():
            where = f"{name}/{label}"
            trials = np.asarray(got["final_regret_per_trial"])
            curve = np.asarray(got["cumulative_regret_mean"])
            assert trials.shape == (TRIALS,) and np.all(np.isfinite(trials)), where
            assert math.isclose(got["final_regret_mean"], trials.mean(), rel_tol=1e-12), where
            assert math.isclose(got["final_regret_std"], trials.std(ddof=1), rel_tol=1e-9), where
            assert curve.shape == (ROUNDS,) and got["curve_rounds"][-1] == ROUNDS, where
            assert math.isclose(curve[-1], trials.mean(), rel_tol=1e-9), where
            assert np.all(np.diff(curve) >= -1e-12) and curve[0] >= 0, f"{where}: negative regret"
            row = rows[(name, label)]
            assert math.isclose(float(row["final_regret_mean"]), trials.mean(), rel_tol=1e-12)
            assert int(row["rejected_updates"]) == 0, f"{where}: rejected updates"
    for figure in FIGURES:
        data = (results / figure).read_bytes()
        assert data.startswith(PNG) and len(data) > 10_000, f"{figure}: not a drawn PNG"
    assert "final regret" in (results / "reproduce_summary.txt").read_text()


if __name__ == "__main__":
    try:
        check(pathlib.Path(sys.argv[1]))
    except (AssertionError, OSError, KeyError, ValueError) as exc:
        print(f"check_quickstart: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
    print(f"check_quickstart: {sys.argv[1]} holds the quickstart's run")
