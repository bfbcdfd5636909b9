"""The ``bandits-jax`` command end to end with tiny settings, in a temporary directory."""

import csv
import json
import subprocess
import sys

import numpy as np

from bandits_jax.cli import main

PNG = b"\x89PNG\r\n\x1a\n"


def test_help_lists_subcommands():
    proc = subprocess.run(
        [sys.executable, "-m", "bandits_jax", "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 0
    for cmd in ("reproduce", "sweep", "bco", "kappa", "bench"):
        assert cmd in proc.stdout


def test_reproduce_quick_tiny_writes_files_and_resumes(tmp_path, capsys):
    argv = [
        "reproduce", "--quick", "--settings", "synth-5-2", "--rounds", "8", "--trials", "2",
        "--chunk", "4", "--out", str(tmp_path), "--quiet",
        "--learners", "eofd-paper,oful-paper,uniform",
    ]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    for name in ("reproduce_regret.png", "reproduce_time.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG
        assert str((tmp_path / name).resolve()) in printed
    report = json.loads((tmp_path / "reproduce.json").read_text())
    entry = report["settings"]["synth-5-2"]
    assert set(entry["learners"]) == {"EOFD", "OFUL", "random"} and entry["m"] == 1
    for stats in entry["learners"].values():
        per_trial = stats["final_regret_per_trial"]
        assert len(per_trial) == 2
        assert stats["final_regret_mean"] == np.mean(per_trial)
        # the curve's end is a cumulative sum, the final regret a sum: the same T terms summed
        # in another order, equal within T eps relative (regrets are non-negative)
        rounds = report["rounds"]
        np.testing.assert_allclose(
            stats["cumulative_regret_mean"][-1], np.mean(per_trial), rtol=rounds * 2.3e-16
        )
        assert stats["seconds_per_round_mean"] > 0
    ratio = entry["eofd-paper_over_oful-paper"]["final_regret"]
    eofd, oful = entry["learners"]["EOFD"], entry["learners"]["OFUL"]
    assert ratio == eofd["final_regret_mean"] / oful["final_regret_mean"]
    with open(tmp_path / "reproduce.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["learner"] for r in rows] == ["EOFD", "OFUL", "random"]
    summary = (tmp_path / "reproduce_summary.txt").read_text()
    assert "EOFD/OFUL final regret" in summary and "bonus_ratio" in summary
    batch = tmp_path / "checkpoints" / "synth-5-2" / "eofd-paper" / "trials_000-001"  # one batch
    assert (batch / "state.npz").is_file()

    # Everything is checkpointed: --resume replays nothing and reports the same numbers.
    written = (batch / "state.npz").stat().st_mtime_ns
    assert main([*argv, "--resume", "--no-plots"]) == 0
    assert (batch / "state.npz").stat().st_mtime_ns == written  # nothing played again
    again = json.loads((tmp_path / "reproduce.json").read_text())["settings"]["synth-5-2"]
    for name in ("EOFD", "OFUL"):
        assert (
            again["learners"][name]["final_regret_per_trial"]
            == (entry["learners"][name]["final_regret_per_trial"])
        )


def test_sweep_from_config_file(tmp_path):
    cfg = {
        "settings": ["synth-4-1"],
        "learners": ["eofd-paper"],
        "l-grid": [0.0, 1.0],
        "e_grid": [0.5],
        "beta_grid": ["theory"],
        "rounds": 6,
        "trials": 2,
        "eval_trials": 4,  # 4 runs like the tuning sweep (2 x 2): the executable is reused
    }
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    argv = ["sweep", "--config", str(tmp_path / "cfg.json"), "--out", str(out), "--quiet"]
    assert main([*argv, "--seed", "3"]) == 0
    with open(out / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["split"] for r in rows] == ["tuning", "tuning", "evaluation"]
    assert [float(r["l"]) for r in rows[:2]] == [0.0, 1.0]
    tuning = [float(r["final_regret_mean"]) for r in rows[:2]]
    result = json.loads((out / "sweep.json").read_text())
    assert result["chosen"] == [int(np.argmin(tuning))]
    assert result["tuning_seeds"] == [3, 4] and result["eval_seeds"] == [10003, 10004, 10005, 10006]
    assert float(rows[2]["l"]) == [0.0, 1.0][result["chosen"][0]]
    assert (out / "sweep_regret.png").read_bytes()[:8] == PNG
    assert "Honest estimate" in (out / "sweep_summary.txt").read_text()


def test_sweep_heatmaps_draw_every_S_and_beta_block(tmp_path, monkeypatch):
    from bandits_jax.cli import plotting

    drawn = {}
    monkeypatch.setattr(
        plotting, "heatmap_figure", lambda panels, *a, **k: drawn.setdefault(len(drawn), panels)
    )
    argv = [
        "sweep", "--settings", "synth-4-1", "--learners", "eofd-paper", "--l-grid", "0,1",
        "--e-grid", "0.5", "--beta-grid", "0.1,1", "--S-grid", "2,4", "--rounds", "4",
        "--trials", "1", "--eval-trials", "0", "--select", "across", "--quiet",
        "--compile-cache", "off", "--out", str(tmp_path),
    ]  # fmt: skip
    assert main(argv) == 0
    titles = [t for t, _ in drawn[0]]
    want = [f"beta={b} S={S}" for S in (2, 4) for b in ("0.1", "1")]  # S-major, then beta
    assert len(titles) == 4 and all(t.endswith(w) for t, w in zip(titles, want, strict=True))
    assert all(v.shape == (2, 1) for _, v in drawn[0])
