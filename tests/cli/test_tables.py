"""The pure table/summary functions against hand-built inputs with independent expected counts."""

import csv
import math

import numpy as np
import pytest

from bandits_jax.cli import output, tables
from bandits_jax.sim import sweep
from bandits_jax.status import (
    BAD_OUTCOME,
    CONVERGED,
    EMPTY_MASK,
    INACTIVE,
    INEXACT,
    MAX_STEPS,
    NAN_SCORES,
    NONFINITE,
    count_status,
)


def count(xs, code):
    return sum(1 for x in np.ravel(xs) if int(x) == code)


STATUS = np.array(
    [
        [INACTIVE, INACTIVE, CONVERGED, MAX_STEPS, INACTIVE, NONFINITE],
        [INACTIVE, NONFINITE, INACTIVE, INACTIVE, CONVERGED, MAX_STEPS],
    ]
)
# Every code the learners report, the newer ones (bad outcomes, INEXACT projections) included.
ALL_CODES = np.concatenate(
    [STATUS.ravel(), [BAD_OUTCOME, INEXACT, INACTIVE, INACTIVE, BAD_OUTCOME, CONVERGED]]
)


def test_status_counts_by_name():
    got = count_status(ALL_CODES)
    assert got == {
        "converged": count(ALL_CODES, CONVERGED),
        "max_steps": count(ALL_CODES, MAX_STEPS),
        "nonfinite": count(ALL_CODES, NONFINITE),
        "inactive": count(ALL_CODES, INACTIVE),
        "bad_outcome": count(ALL_CODES, BAD_OUTCOME),
        "inexact": count(ALL_CODES, INEXACT),
        "nan_scores": 0,
        "empty_mask": 0,
    }
    assert sum(got.values()) == ALL_CODES.size


def test_inactive_is_not_rejected():
    # The old count (status >= 2) took the 6 INACTIVE rounds for rejected updates.
    assert tables.rejected_count(STATUS) == count(STATUS, NONFINITE) == 2
    want = count(ALL_CODES, NONFINITE) + count(ALL_CODES, BAD_OUTCOME)
    assert tables.rejected_count(ALL_CODES) == want == 4
    assert tables.rejected_count(np.full(10, INACTIVE)) == 0
    healthy = np.array([INACTIVE, CONVERGED, MAX_STEPS])
    assert tables.rejected_count(healthy) == 0


def test_flagged_selections_are_the_selection_failures():
    sel = np.array([[CONVERGED, NAN_SCORES, CONVERGED], [EMPTY_MASK, CONVERGED, NAN_SCORES]])
    s = tables.learner_stats(np.zeros((2, 3)), [0.1, 0.1], select_status=sel)
    assert s["flagged_selections"] == 3  # every round but the three CONVERGED ones
    assert tables.rejected_count(sel) == 0  # a flagged selection rejects no update


def test_unknown_code_is_counted_not_dropped():
    got = count_status(np.array([CONVERGED, 99, 99]))
    assert got["other"] == 2 and got["converged"] == 1


def test_learner_stats():
    rng = np.random.default_rng(0)
    regret = rng.random((2, 6))
    status = STATUS  # (trials, T) like the regrets
    s = tables.learner_stats(regret, [0.1, 0.3], status=status, compile_seconds=1.5)
    finals = [sum(regret[0]), sum(regret[1])]
    assert s["final_regret_mean"] == pytest.approx((finals[0] + finals[1]) / 2)
    assert s["final_regret_std"] == pytest.approx(abs(finals[0] - finals[1]) / math.sqrt(2))
    assert s["seconds_per_round_mean"] == pytest.approx(0.2)
    assert s["rejected_updates"] == count(status, NONFINITE) and s["max_steps"] == 2
    assert s["status_counts"]["inactive"] == count(status, INACTIVE)
    assert s["cumulative_regret_mean"][-1] == pytest.approx(s["final_regret_mean"])


def test_median_ratio_skips_zero_estimates():
    b = np.array([[1.0, 2.0, 3.0]])
    e = np.array([[0.0, 1.0, 3.0]])
    assert tables.median_ratio(b, e) == pytest.approx(np.median([2.0, 1.0]))
    assert math.isnan(tables.median_ratio(b, 0 * e))


def test_pair_ratios():
    stats = {
        "eofd": {"final_regret_mean": 6.0, "seconds_per_round_mean": 1.0},
        "oful": {"final_regret_mean": 4.0, "seconds_per_round_mean": 4.0},
        "zero": {"final_regret_mean": 0.0, "seconds_per_round_mean": 0.0},
    }
    got = tables.pair_ratios(stats, [("eofd", "oful"), ("eofd", "zero"), ("eofd", "absent")])
    assert set(got) == {"eofd_over_oful", "eofd_over_zero"}
    assert got["eofd_over_oful"]["final_regret"] == 6.0 / 4.0
    assert got["eofd_over_oful"]["time_per_round"] == 1.0 / 4.0
    assert got["eofd_over_zero"]["final_regret"] is None  # undefined, not nan


def _report(rows):
    return {
        "l": 0.75, "e": 0.75, "beta": "theory", "S": 1.0, "rounds": 6, "trials": 2,
        "dtype": "float64", "backend": "cpu", "wall_seconds": 20.0,
        "compile_wall_seconds": 3.75, "batch": 2,
        "settings": {
            "s1": {"ratios": {"eofd_over_oful": {
                "numerator": "eofd", "denominator": "oful",
                "final_regret": 1.5, "time_per_round": 0.25}}},
        },
    }  # fmt: skip


def test_reproduce_summary_reports_rejections_and_max_steps():
    rows = [
        {"setting": "s1", "learner": "EOFD", "trials": 2, "rounds": 6, "bonus_ratio": 1e-4,
         "final_regret_mean": 1.0, "rejected_updates": 2, "max_steps": 3},
        {"setting": "s1", "learner": "OFUL", "trials": 2, "rounds": 6, "bonus_ratio": float("nan"),
         "final_regret_mean": 1.0, "rejected_updates": 0, "max_steps": 0},
    ]  # fmt: skip
    text = tables.reproduce_summary(
        _report(rows), rows, ["a note"], {"eofd": "EOFD", "oful": "OFUL"}
    )
    assert "EOFD/OFUL final regret 1.500" in text and "75% less time" in text
    assert "s1/EOFD 2 of 12" in text  # rejected
    assert "s1/EOFD 3 of 12" in text  # max_steps
    assert "s1/OFUL" not in text.split("Update status:")[1]
    assert "effectively greedy" in text and "s1/EOFD (1.0e-04)" in text
    assert text.rstrip().endswith("a note") and "nan" not in text


def test_reproduce_summary_states_the_compile_time_against_the_run():
    rows = [{"setting": "s1", "learner": "EOFD", "trials": 1, "rounds": 6, "bonus_ratio": 0.5,
             "final_regret_mean": 1.0, "rejected_updates": 0, "max_steps": 0}]  # fmt: skip
    text = tables.reproduce_summary(_report(rows), rows, [], {})
    # the run's compile time against its 20 s, and the batch the timed pass played
    assert "Compile time: 3.8 s of the 20.0 s after start-up" in text
    assert "one chunk of a batch of 2 vmapped trials" in text


def test_reproduce_summary_no_trouble():
    rows = [{"setting": "s1", "learner": "EOFD", "trials": 1, "rounds": 6, "bonus_ratio": 0.5,
             "final_regret_mean": 1.0, "rejected_updates": 0, "max_steps": 0}]  # fmt: skip
    text = tables.reproduce_summary(_report(rows), rows, [], {})
    assert "): none" in text and "max_steps): none" in text


def test_sweep_table_status_columns():
    res = sweep.ExperimentResult(
        "EOFD", "env", {"l": np.array([0.0, 1.0])}, np.array([0, 1]),
        {"regret": np.ones((2, 2, 3)), "status": STATUS.reshape(2, 2, 3)},
    )  # fmt: skip
    rows = sweep.table([res])
    for g, row in enumerate(rows):
        st = STATUS.reshape(2, 2, 3)[g]
        assert row["rejected"] == count(st, NONFINITE)
        assert row["status_inactive"] == count(st, INACTIVE)
        assert row["status_max_steps"] == count(st, MAX_STEPS)
        assert row["status_converged"] == count(st, CONVERGED)
    text = tables.sweep_summary(
        rows, [], {"runs": 4, "devices": 1, "one_call_run_seconds": 1.0,
                   "one_call_compile_seconds": 1.0}, 3, ["theory"],
    )  # fmt: skip
    assert "rejected" in text and "env/EOFD 1 of 6" in text


def test_bench_rows_no_nan(tmp_path):
    cases = [
        {"learner": "EOFD", "d": 100, "jax_s": 1e-4, "numpy_s": float("nan")},
        {"learner": "OFUL", "d": 100, "jax_s": 2e-4},
    ]
    rows = tables.bench_rows("mlogb_speed", cases)
    assert rows[0]["numpy_s"] is None and rows[0]["benchmark"] == "mlogb_speed"
    text = output.format_table(rows)
    assert "nan" not in text.lower() and " - " in text + " "
    output.write_csv(tmp_path / "b.csv", rows)
    with open(tmp_path / "b.csv") as f:
        got = list(csv.DictReader(f))
    assert got[0]["numpy_s"] == "" and got[1]["numpy_s"] == "" and got[1]["jax_s"] == "0.0002"


def test_loglog_slope_power_law():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    assert tables.loglog_slope(x, 3 * x**1.5) == pytest.approx(1.5)
    assert math.isnan(tables.loglog_slope([1.0], [1.0]))


def test_bco_rows_and_summary():
    result = {
        "config": {"T": 10, "seeds": 2, "d_variation": 3, "dtype": "float64", "backend": "cpu"},
        "dimension": {"convex": {"a": {
            "d": [2, 4], "mean": [1.0, 2.0], "std": [0.1, 0.2], "regret": [[0.9, 1.1], [2, 2]],
            "V_T": [0.0, 0.0], "scale": [1.0, 1.0], "rejected": [0, 3], "max_steps": [0, 0],
            "slope_vs_d": 1.0}}},
        "variation": {"convex": {"a": {
            "amplitude": [0.0, 0.0], "noise": [0.0, 0.3], "V_T": [0.0, 5.0], "mean": [1, 2],
            "std": [0, 0], "regret": [[1, 1], [2, 2]], "rejected": [0, 0], "max_steps": [0, 1],
            "slope_vs_V_T": float("nan"), "slope_vs_V_T_top": float("nan")}}},
    }  # fmt: skip
    rows = tables.bco_rows(result)
    assert len(rows) == 4 and [r["study"] for r in rows] == ["dimension"] * 2 + ["variation"] * 2
    assert rows[1]["rejected"] == 3 and rows[1]["trials"] == 2 and rows[3]["noise"] == 0.3
    text = tables.bco_summary(result)
    assert "dimension convex d=4/a 3 of 20" in text
    assert "nan" not in text


def test_choose_grid_points_each_and_across():
    """``sweep --select``: each experiment's best point, or one point per learner across its
    settings by mean relative regret (``sim.sweep.choose_across``), from the tuning regrets."""
    finals = [np.array([3.0, 1.0, 2.0]), np.array([10.0, 30.0, 12.0]), np.array([5.0, 4.0, 6.0])]
    names = ["A", "A", "B"]

    def tuning(names, finals):  # one seed, one round: the final regret is the round's regret
        return sweep.SweepResult([
            sweep.ExperimentResult(n, f"s{i}", {"l": np.arange(f.size)}, np.array([0]),
                                   {"regret": np.asarray(f, float)[:, None, None]})
            for i, (n, f) in enumerate(zip(names, finals, strict=True))
        ], 1, 0.0, 0.0, 1)  # fmt: skip

    assert [int(np.nanargmin(f)) for f in finals] == [1, 0, 1]  # each: the default chooser
    # Across A's two settings: relative regrets [3, 1, 2] and [1, 3, 1.2] -> means [2, 2, 1.6].
    rel = [[f[g] / min(f) for g in range(3)] for f in finals[:2]]
    best = min(range(3), key=lambda g: (rel[0][g] + rel[1][g]) / 2)
    assert sweep.choose_across(tuning(names, finals)) == [best, best, 1]
    # NaN regret never wins.
    assert sweep.choose_across(tuning(["C"], [np.array([np.nan, 2.0])])) == [1]
