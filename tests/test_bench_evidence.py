"""benchmarks.mlogb_evidence: a re-run of some learners merged over an earlier table (--base)."""

import json

from benchmarks import mlogb_evidence as ev


def _recipes(setting: str, means: dict[str, float]) -> dict:
    learners = {
        label: {"final_regret_mean": m, "final_regret_std": 2.0, "seconds_per_round_mean": 1e-4,
                "l": -1.0, "e": 0.0, "beta": 0.1}
        for label, m in means.items()
    }  # fmt: skip
    return {"trials": 4, "settings": {setting: {"title": setting, "learners": learners}}}


def _tuned(setting: str, label: str, mean: float) -> dict:
    return {"env": setting, "learner": label, "final_regret_mean": mean, "final_regret_std": 2.0,
            "trials": 4, "l": -1.0, "e": 0.0, "beta": 0.1, "split": "evaluation"}  # fmt: skip


def test_base_cells_stand_where_the_new_run_has_none():
    s = "digits-all-h1"
    first = ev.assemble(
        _recipes(s, {"EOFD robust": 100.0, "LinUCB": 50.0, "ECOLog": 80.0, "EOFD buffered": 55.0}),
        [_tuned(s, "LinUCB", 40.0), _tuned(s, "EOFD robust", 90.0)],
        run="first",
    )
    # ECOLog is not tuned on this setting (SKIP_TUNED): a base cell tuned there is dropped.
    first[s]["cells"]["ecolog"]["tuned"] = {"mean": 1.0, "se": 0.0}
    second = ev.assemble(_recipes(s, {"EOFD robust": 60.0}), [], base=first, run="second")
    cells = second[s]["cells"]
    assert cells["eofd-robust"]["recipe"]["mean"] == 60.0
    assert cells["eofd-robust"]["recipe"]["run"] == "second"
    assert cells["eofd-robust"]["tuned"]["mean"] == 90.0  # from the base run
    assert cells["linucb"]["recipe"]["run"] == "first"
    assert "tuned" not in cells["ecolog"]
    # Penalties and goals are recomputed over the merged cells (best tuned: LinUCB, 40).
    assert second[s]["best_tuned"] == "linucb"
    assert cells["eofd-robust"]["transfer_penalty"] == 60.0 / 40.0
    # On classification data mlogb.practical recommends buffered EOFD (no known bound).
    goals = second[s]["goals"]
    assert goals["recommended"] == "eofd-buffered"
    assert goals["recommended_over_best_tuned"] == 55.0 / 40.0
    assert goals["recommended_over_linucb"] == 55.0 / 50.0
    assert goals["within_10pct_of_best_tuned"] is False
    assert goals["eofd_robust_over_linucb"] == 60.0 / 50.0


def test_rejudge_recomputes_goals_of_a_base_table_without_running(tmp_path):
    s = "synth-40-1-S8"  # K d = 40 > 32: robust EOFD
    table = ev.assemble(
        _recipes(s, {"EOFD robust": 43.0, "LinUCB": 50.0}), [_tuned(s, "LinUCB", 40.0)]
    )
    table[s]["goals"] = {}  # as if judged by an older rule
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"rounds": 100, "trials": 4, "dtype": "float64", "settings": table}))
    out = ev.main(["--base", str(base), "--rejudge", "--json", str(tmp_path / "new.json")])
    goals = out["settings"][s]["goals"]
    assert goals["recommended"] == "eofd-robust"  # a known bound, K d > 32
    assert goals["recommended_over_best_tuned"] == 43.0 / 40.0
    assert goals["within_10pct_of_best_tuned"] is True
    assert out["settings"][s]["cells"]["linucb"]["tuned"]["mean"] == 40.0
    assert ev.recommended("synth-20-1-S8") == "oful-tuned"  # K d = 20 <= 32: the full Hessian
    assert ev.recommended("lowrank-100-1-5-S8") == "eofd-robust"
    assert ev.recommended("digits-k4-h1") == "eofd-buffered"  # no bound, K = 4
    assert ev.recommended("heavy-200-1-1-S8") == "eofd-buffered"  # a known bound, K d > 128


def test_a_cell_keeps_its_own_trials_and_the_table_says_so():
    """A re-run over more trials (``--trials 50`` on the digits: 5 per rewarded class) over a
    10-trial base: each cell records its ``trials``, its SE uses them, the table prints ``n``."""
    s = "digits-all-h1"
    first = ev.assemble(_recipes(s, {"LinUCB": 50.0, "EOFD robust": 70.0}), [], run="first")
    more = {**_recipes(s, {"LinUCB": 48.0}), "trials": 50}
    table = ev.assemble(more, [], base=first, run="second")
    cells = table[s]["cells"]
    assert cells["linucb"]["recipe"]["trials"] == 50
    assert cells["linucb"]["recipe"]["se"] == 2.0 / 50**0.5
    assert cells["eofd-robust"]["recipe"]["trials"] == 4
    text = ev.markdown(table, ["eofd-robust", "linucb"], trials=4)
    assert "48.0 ± 0.3 (0.10 ms; n = 50)" in text
    assert "70.0 ± 1.0 (0.10 ms) |" in text
