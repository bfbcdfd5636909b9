"""Commands end to end with tiny settings: a BCO study against an independent unchunked run,
resume, honest tuning; sweep with BCO learners; reproduce's status columns; checkpoint errors."""

import csv
import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bandits_jax import bco, envs
from bandits_jax.bco import rounds as bint
from bandits_jax.cli import bco as study
from bandits_jax.cli import main
from bandits_jax.sim import sweep
from bandits_jax.sim.runner import make_rollout

PNG = b"\x89PNG\r\n\x1a\n"
T = 8


@functools.lru_cache
def _reference_fns(name, d, T):
    env = envs.make(f"bco-linear-{d}", horizon=T, noise=0.3).env
    learner, _ = bco.from_preset(name, dim=d, domain=env.domain, horizon=T)
    run = make_rollout(bint.interact(learner, env), T, trials=True)
    summ = jax.jit(jax.vmap(lambda e, m: bint.summarize(env, e, m, T).regret))
    return env, learner, run, summ


def reference_regret(name, d, T, amplitude, noise, seeds, scale=1.0):
    """Static regret of one learner at one V_T point, played unchunked (one scan per run): the
    library's preset and setting, the noise-free losses' G."""
    env, learner, run, summ = _reference_fns(name, d, T)
    G = envs.make(f"bco-linear-{d}", horizon=T).env.lipschitz
    _, hp = bco.from_preset(name, dim=d, domain=env.domain, horizon=T, scale=scale,
                            smoothness=env.smoothness, lipschitz=G)  # fmt: skip
    env_keys, run_keys = sweep.seed_keys(seeds)
    es = jax.vmap(env.init)(env_keys)
    dt, n = es.base.dtype, len(seeds)
    es = es._replace(
        omega=jnp.full((n,), study.FAST_OMEGA, dt),
        noise=jnp.full((n,), noise, dt),
        amplitude=jnp.full((n,), amplitude, dt),
    )
    m = run(learner.init(hp), es, run_keys)
    return np.asarray(summ(es, m)).tolist()


@pytest.mark.long  # minutes of CPU: CI runs it after the default suite
def test_bco_study_end_to_end_tuned_and_resumed(tmp_path, capsys, bars):
    argv = [
        "bco", "--study", "variation", "--learners", "alg1_thm3", "--rounds", str(T),
        "--trials", "2", "--tune-trials", "1", "--d-variation", "2", "--amplitudes", "0.5",
        "--scale-grid", "0.1,3", "--chunk", "4", "--seed", "5", "--out", str(tmp_path), "--quiet",
    ]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    for name in ("bco_dimension.png", "bco.json", "bco.csv", "bco_summary.txt"):
        assert str((tmp_path / name).resolve()) in printed
    assert (tmp_path / "bco_dimension.png").read_bytes()[:8] == PNG
    res = json.loads((tmp_path / "bco.json").read_text())
    assert "dimension" not in res and set(res["variation"]) == {"convex"}
    cfg = res["config"]
    # 2 scales x 2 points x 1 tuning seed = 2 points x 2 evaluation seeds: one executable
    assert cfg["tuning_seeds"] == [5] and cfg["eval_seeds"] == [10005, 10006]  # disjoint
    p = res["variation"]["convex"]["alg1_thm3"]
    # The drift point (a = 0.5), then the i.i.d.-noise point (a = 0, noise 0.3).
    for i, (a, noise) in enumerate([(0.5, 0.0), (0.0, 0.3)]):
        tune = [np.mean(reference_regret("alg1_thm3", 2, T, a, noise, [5], sc))
                for sc in (0.1, 3.0)]  # fmt: skip
        best = [0.1, 3.0][int(np.argmin(tune))]
        assert p["scale"][i] == best
        want = reference_regret("alg1_thm3", 2, T, a, noise, [10005, 10006], best)
        np.testing.assert_allclose(p["regret"][i], want, rtol=1e-9, atol=1e-12)
        assert p["mean"][i] == np.mean(p["regret"][i])
    assert p["rejected"] == [0, 0] and p["all_in_domain"]
    with open(tmp_path / "bco.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 and {r["learner"] for r in rows} == {"alg1_thm3"}
    summary = (tmp_path / "bco_summary.txt").read_text()
    assert "final regret vs V_T" in summary and "nan" not in summary
    ck = tmp_path / "checkpoints" / "bco" / "variation" / "alg1_thm3"
    assert (ck / "tuning" / "state.npz").is_file() and (ck / "evaluation" / "state.npz").is_file()
    # Resume: nothing replayed, the same numbers.
    assert main([*argv, "--resume", "--no-plots"]) == 0
    again = json.loads((tmp_path / "bco.json").read_text())["variation"]["convex"]["alg1_thm3"]
    assert again["regret"] == p["regret"]
    # Both bars announce the trial-rounds they count (the resumed one restores them all):
    # 2 points x (2 scales x 1 tuning seed + 2 evaluation seeds) x T.
    assert [(b.done, b.total) for b in bars] == [(2 * (2 * 1 + 2) * T,) * 2] * 2


def test_sweep_takes_bco_learners(tmp_path):
    out = tmp_path / "out"
    argv = [
        "sweep", "--settings", "bco-linear-2", "--learners", "sphere", "--scale-grid", "0.5,2",
        "--rounds", "6", "--trials", "2", "--eval-trials", "4", "--out", str(out), "--quiet",
    ]  # fmt: skip
    assert main(argv) == 0
    with open(out / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["split"] for r in rows] == ["tuning", "tuning", "evaluation"]
    assert [float(r["scale"]) for r in rows[:2]] == [0.5, 2.0]
    assert all(r["rejected"] == "0" for r in rows) and "status_converged" in rows[0]
    result = json.loads((out / "sweep.json").read_text())
    tuning = [float(r["final_regret_mean"]) for r in rows[:2]]
    assert result["chosen"] == [int(np.argmin(tuning))]
    assert "Honest estimate" in (out / "sweep_summary.txt").read_text()


def test_reproduce_rows_carry_status_and_checkpoint_mismatch_is_one_line(tmp_path, capsys):
    argv = [
        "reproduce", "--settings", "synth-3-1", "--learners", "eofd-paper", "--rounds", "4",
        "--trials", "1", "--chunk", "2", "--out", str(tmp_path), "--quiet", "--no-plots",
    ]  # fmt: skip
    assert main(argv) == 0
    with open(tmp_path / "reproduce.csv") as f:
        row = next(csv.DictReader(f))
    assert row["rejected_updates"] == "0" and row["max_steps"] == "0"
    stats = json.loads((tmp_path / "reproduce.json").read_text())["settings"]["synth-3-1"]
    counts = stats["learners"]["EOFD"]["status_counts"]
    assert sum(counts.values()) == 4
    assert "Update status:" in (tmp_path / "reproduce_summary.txt").read_text()
    capsys.readouterr()
    # Resuming with other settings: the checkpoint error is one line, exit status 2.
    assert main([*argv, "--resume", "--l", "0.5"]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and err[0].startswith("bandits-jax: error:") and "checkpoint" in err[0]
