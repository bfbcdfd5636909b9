"""The evidence scripts run as a user runs them, in a subprocess from the checkout (the suite
imports no ``benchmarks``), on tables built here so that they run no learner:
``python -m benchmarks.mlogb_evidence --base JSON --rejudge`` recomputes an earlier table's
transfer penalties and goals (each cell keeps its own trials, and the table prints them);
``python -m benchmarks.paired_evidence --merge JSON`` judges paired final regrets. The expected
figures are computed here from the cells."""

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
LABELS = {"eofd-robust": "EOFD robust", "linucb": "LinUCB", "ecolog": "ECOLog",
          "eofd-buffered": "EOFD buffered", "oful": "OFUL-MLogB (tuned)"}  # fmt: skip


def _cell(mean: float, se: float = 1.0, trials: int = 4, run: str = "first") -> dict:
    return {"mean": mean, "se": se, "ms_per_round": 0.1, "trials": trials, "run": run,
            "point": {"l": -1.0, "e": 0.0, "beta": 0.1, "S": None}}  # fmt: skip


def _setting(recipe: dict[str, float], tuned: dict[str, float]) -> dict:
    cells = {k: {"label": LABELS[k], "recipe": _cell(m)} for k, m in recipe.items()}
    for k, m in tuned.items():
        cells.setdefault(k, {"label": LABELS[k]})["tuned"] = _cell(m)
    return {"title": "t", "best_tuned": None, "cells": cells, "goals": {}}  # judged by no rule


def _script(tmp_path, module: str, flag: str, table: dict, *more: str) -> tuple[dict, str]:
    """``python -m benchmarks.MODULE FLAG IN.json MORE --json OUT.json`` in the checkout, with
    ``table`` in ``IN.json``: the JSON it wrote and its stdout."""
    base, out = tmp_path / "in.json", tmp_path / "out.json"
    base.write_text(json.dumps(table))
    proc = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", flag, str(base), *more, "--json", str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout


def _rejudge(tmp_path, settings: dict) -> tuple[dict, str]:
    table = {"rounds": 100, "trials": 4, "dtype": "float64", "settings": settings}
    out, stdout = _script(tmp_path, "mlogb_evidence", "--base", table, "--rejudge")
    return out["settings"], stdout


def test_rejudge_recomputes_penalties_and_goals_of_a_base_table(tmp_path):
    digits = _setting(
        {"eofd-robust": 60.0, "linucb": 48.0, "ecolog": 80.0, "eofd-buffered": 55.0},
        {"linucb": 40.0, "eofd-robust": 90.0, "ecolog": 1.0},
    )
    digits["cells"]["linucb"]["recipe"].update(trials=50, se=0.3)  # a re-run over 50 trials
    settings = {
        "digits-all-h1": digits,
        "synth-40-1-S8": _setting({"eofd-robust": 43.0, "linucb": 50.0}, {"linucb": 40.0}),
        "synth-20-1-S8": _setting({"linucb": 50.0}, {}),
        "lowrank-100-1-5-S8": _setting({"linucb": 50.0, "eofd-robust": 45.0}, {}),
        "digits-k4-h1": _setting({"linucb": 50.0}, {}),
        "heavy-200-1-1-S8": _setting({"linucb": 50.0, "eofd-robust": 45.0}, {}),
    }
    table, stdout = _rejudge(tmp_path, settings)
    # ECOLog is not tuned on digits-all-h1 (SKIP_TUNED): its base tuned cell is dropped, so the
    # best tuned is LinUCB's 40 (not ECOLog's 1).
    cells = table["digits-all-h1"]["cells"]
    assert "tuned" not in cells["ecolog"]
    assert table["digits-all-h1"]["best_tuned"] == "linucb"
    assert cells["eofd-robust"]["transfer_penalty"] == 60.0 / 40.0
    assert cells["eofd-robust"]["tuned"]["mean"] == 90.0
    # On classification data mlogb.practical recommends LinUCB (no known bound).
    goals = table["digits-all-h1"]["goals"]
    assert goals["recommended"] == "linucb"
    assert goals["recommended_over_best_tuned"] == 48.0 / 40.0
    assert goals["recommended_over_linucb"] == 1.0
    assert goals["within_10pct_of_best_tuned"] is False
    assert goals["eofd_robust_over_linucb"] == 60.0 / 48.0
    # A known bound at K = 1, K d > 32: robust EOFD (it wins against LinUCB by the paired rule),
    # here 43 / 40 of the best tuned, within 10%; K d <= 32 and classification data: LinUCB.
    goals = table["synth-40-1-S8"]["goals"]
    assert goals["recommended"] == "eofd-robust"
    assert goals["recommended_over_best_tuned"] == 43.0 / 40.0
    assert goals["within_10pct_of_best_tuned"] is True
    recommended = {s: table[s]["goals"]["recommended"] for s in settings}
    robust = {"synth-40-1-S8", "lowrank-100-1-5-S8", "heavy-200-1-1-S8"}
    assert recommended == {s: "eofd-robust" if s in robust else "linucb" for s in settings}
    # A cell measured over other than the table's 4 trials says its n.
    assert "48.0 ± 0.3 (0.10 ms; n = 50)" in stdout
    assert "60.0 ± 1.0 (0.10 ms) |" in stdout


def test_paired_evidence_picks_the_cheapest_learner_no_other_beats(tmp_path):
    """The paired evidence's decision on a known-bound setting built here: on both draws
    ``b`` ends 10 below ``a`` on every pair and ``c`` equals ``a`` plus noise of either sign, so
    ``b`` wins against ``a`` and ``c`` (intervals below zero), ``a`` and ``c`` are level; the pick
    is ``b`` although ``a`` is cheaper."""
    import numpy as np

    rng = np.random.default_rng(0)
    kinds, n, draws = ["linucb", "oful", "eofd-robust"], 20, []
    for j in range(2):
        a = rng.uniform(40, 60, n)
        noise = rng.choice([-1.0, 1.0], n) * rng.uniform(0, 2, n)
        draws.append({
            "base": 20000 + 10000 * j,
            "pairs": [{"class": None, "seed": 20000 + 10000 * j + i} for i in range(n)],
            "final_regret": {"linucb": a.tolist(), "oful": (a - 10).tolist(),
                             "eofd-robust": (a + noise).tolist()},
            "ms_per_round": {"linucb": 0.1, "oful": 1.0, "eofd-robust": 0.5},
            "seconds": {k: {"compile": 0.0, "run": 0.0} for k in kinds},
        })  # fmt: skip
    setting = {"name": "synth-8-1-S4", "K": 1, "part": "synthetic", "rounds": 100,
               "learners": kinds, "references": ["linucb"], "draws": draws}  # fmt: skip
    run = {"commands": [], "settings": [setting]}
    got = _script(tmp_path, "paired_evidence", "--merge", run)[0]["decision"]["synth-8-1-S4"]
    assert got["beaten by"] == {"linucb": ["oful"], "oful": [], "eofd-robust": ["oful"]}
    assert got["vs linucb"] == {"oful": "wins", "eofd-robust": "level"}
    assert got["by the rule"] == "oful"
