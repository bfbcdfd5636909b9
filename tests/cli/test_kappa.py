"""``bandits-jax kappa`` end to end with tiny settings (d = 3, T = 6, two S values, two learners):
its numbers against independent runs, honest tuning, resume after an interruption, refusals,
bad options, help, and the figure's tick labels."""

import csv
import json
import shutil

import jax
import numpy as np
import pytest

from bandits_jax import cli, envs, mlogb
from bandits_jax.cli import kappa, plotting
from bandits_jax.cli import options as opt
from bandits_jax.mlogb import recipes
from bandits_jax.sim import chunks, sweep
from bandits_jax.sim.runner import make_rollout

PNG = b"\x89PNG\r\n\x1a\n"
T, D = 6, 3
ARGV = [
    "kappa", "--dim", str(D), "--S-grid", "1,2", "--learners", "eofd-robust,uniform",
    "--rounds", str(T), "--chunk", "3", "--trials", "2", "--eval-trials", "2",
    "--l-grid=-1,0", "--e-grid", "0", "--beta-grid", "0.1,1", "--seed", "3", "--quiet",
]  # fmt: skip
TUNING_SEEDS, EVAL_SEEDS = [3, 4], [10003, 10004]
FILES = ("kappa.png", "kappa.json", "kappa.csv", "kappa_summary.txt")


def _keys(seeds):
    """(env keys, run keys) of each seed, as documented in ``bandits_jax.sim.sweep.seed_keys``."""
    both = [jax.random.split(jax.random.key(s), 2) for s in seeds]
    return jax.numpy.stack([b[0] for b in both]), jax.numpy.stack([b[1] for b in both])


def independent_final_regret(S, seeds, l, e, beta):
    """Final regret ``(grid points, seeds)`` of robust EOFD on the S stream, one plain scan per
    run (no chunks, no checkpoints, no step shared across S)."""
    env = envs.synthetic_mlogb(num_outcomes=1, dim=D, S=S)
    m = recipes.sketch_size(1, D)
    learner = recipes.make_learner("eofd-robust", num_outcomes=1, dim=D, sketch_size=m)
    hp = recipes.hparams_for(
        "eofd-robust", num_outcomes=1, dim=D, S=S, horizon=T, l=l, e=e, beta=beta
    )
    run = make_rollout(mlogb.interact(learner, env), T, trials=True, grid=True)
    env_keys, run_keys = _keys(seeds)
    metrics = run(jax.vmap(learner.init)(hp), jax.vmap(env.init)(env_keys), run_keys)
    return np.asarray(metrics.regret, np.float64).sum(-1)


def cells_of(out):
    res = json.loads((out / "kappa.json").read_text())
    return {(c["learner"], c["S"], c["mode"]): c for c in res["cells"]}, res


def numbers(cells):
    """What a resumed run must reproduce exactly (timings aside)."""
    keep = ("final_regret", "point", "tuning", "status_counts", "rejected", "identity")
    return {k: {f: c[f] for f in keep} for k, c in cells.items()}


@pytest.mark.long  # minutes of CPU: CI runs it after the default suite
@pytest.mark.slow
def test_kappa_end_to_end_interrupted_resumed_and_refused(tmp_path, capsys, monkeypatch, bars):
    # 1. A reference study, uninterrupted.
    ref = tmp_path / "ref"
    assert cli.main([*ARGV, "--out", str(ref)]) == 0
    printed = capsys.readouterr().out
    for name in FILES:
        assert str((ref / name).resolve()) in printed
    assert (ref / "kappa.png").read_bytes()[:8] == PNG
    cells, res = cells_of(ref)
    assert len(cells) == 2 * 2 * 2 and res["config"]["eval_seeds"] == EVAL_SEEDS
    # A bar per cell announces its trial-rounds: evaluation seeds x T, and when tuned also
    # distinct grid points x tuning seeds x T.
    want = [
        T * len(EVAL_SEEDS)
        + (T * len(TUNING_SEEDS) * c["tuning"]["distinct_points"] if c["mode"] == "tuned" else 0)
        for c in res["cells"]
    ]
    assert [(b.done, b.total) for b in bars] == [(w, w) for w in want]

    # Independent runs at S = 2 of every grid point (the recipe's point among them) on the
    # tuning and the evaluation seeds, in one call.
    c, t = cells[("eofd-robust", 2.0, "recipe")], cells[("eofd-robust", 2.0, "tuned")]
    tun = t["tuning"]
    g = {k: np.asarray(v) for k, v in tun["grid"].items()}
    assert list(zip(g["beta"], g["l"], g["e"], strict=True)) == [
        (0.1, -1, 0), (0.1, 0, 0), (1, -1, 0), (1, 0, 0)
    ]  # fmt: skip
    indep = independent_final_regret(2.0, TUNING_SEEDS + EVAL_SEEDS, g["l"], g["e"], g["beta"])
    tuning, evaluation = indep[:, :2], indep[:, 2:]

    # The recipe cell equals the independent run of its point on the evaluation seeds.
    ex, _ = recipes.tuned_point("eofd-robust", 2.0, num_outcomes=1, dim=1)
    assert c["point"] == {"l": ex.l, "e": ex.e, "beta": ex.beta}
    points = list(zip(g["beta"], g["l"], g["e"], strict=True))
    at = points.index((ex.beta, ex.l, ex.e))  # the grid holds the recipe's point
    np.testing.assert_allclose(c["final_regret"], evaluation[at], rtol=1e-9, atol=1e-12)
    assert c["final_regret_mean"] == np.mean(c["final_regret"])
    assert c["final_regret_se"] == pytest.approx(np.std(evaluation[at], ddof=1) / np.sqrt(2))

    # The tuned cell: its saved tuning regrets are the independent ones, its point their argmin
    # (recomputed from the saved ones), its number that point on the evaluation seeds.
    np.testing.assert_allclose(tun["final_regret"], tuning, rtol=1e-9, atol=1e-12)
    best = int(np.argmin(np.asarray(tun["final_regret"]).mean(axis=1)))
    assert tun["chosen"] == best == int(np.argmin(tun["mean_final_regret"]))
    assert t["point"] == {k: float(v[best]) for k, v in g.items()}
    np.testing.assert_allclose(t["final_regret"], evaluation[best], rtol=1e-9, atol=1e-12)
    # uniform has no hyperparameters: its grid is one distinct point, played once
    assert cells[("uniform", 1.0, "tuned")]["tuning"]["distinct_points"] == 1

    with open(ref / "kappa.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 8 and {r["mode"] for r in rows} == {"recipe", "tuned"}
    assert {"ms_per_round", "final_regret_se", "rejected", "status_converged"} <= set(rows[0])
    assert all(r["rejected"] == "0" for r in rows)
    summary = (ref / "kappa_summary.txt").read_text()
    assert "regret(S_max) / regret(S_min)" in summary and "eofd-robust" in summary
    assert "nan" not in summary

    # 2. The same study interrupted in its third sweep after one chunk, then resumed.
    out = tmp_path / "out"
    real, calls = sweep.run_chunked, [0]

    def interrupted(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 3:  # eofd-robust S = 1 tuned: its evaluation
            real(*args, **{**kwargs, "stop_after_chunks": 1})
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep, "run_chunked", interrupted)
    assert cli.main([*ARGV, "--out", str(out)]) == 130
    monkeypatch.setattr(sweep, "run_chunked", real)
    assert not (out / "kappa.json").exists()
    assert cli.main([*ARGV, "--out", str(out), "--resume"]) == 0
    assert numbers(cells_of(out)[0]) == numbers(cells)

    # 3. One cell's result and evaluation lost, another cell wholly: resumed identically.
    tuned = kappa.cell_dir(out / "checkpoints" / "kappa", 2.0, "eofd-robust", "tuned")
    (tuned / "result.json").unlink()
    shutil.rmtree(tuned / "evaluation")
    shutil.rmtree(kappa.cell_dir(out / "checkpoints" / "kappa", 1.0, "uniform", "recipe"))
    assert cli.main([*ARGV, "--out", str(out), "--resume", "--no-plots"]) == 0
    assert numbers(cells_of(out)[0]) == numbers(cells)
    capsys.readouterr()

    # 4. A resume with other options is refused: one line, exit status 2, nothing played.
    monkeypatch.setattr(chunks.ChunkFn, "compiled", lambda *a, **k: 1 / 0)
    for other in (["--rounds", "4"], ["--eval-trials", "3"], ["--l-grid", "0"]):
        assert cli.main([*ARGV, *other, "--out", str(out), "--resume"]) == 2
        err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
        assert len(err) == 1 and err[0].startswith("bandits-jax: error:"), err
        assert "other options" in err[0] and other[0].lstrip("-").split("-")[0] in err[0]


BAD = [
    (["--S-grid", "0,1"], "--S-grid"),
    (["--S-grid", "nan"], "--S-grid"),
    (["--S-grid", "1,1"], "--S-grid"),
    (["--learners", "eofd-robust,bogus"], "--learners"),
    (["--beta-grid=-1"], "--beta-grid"),
    (["--dim", "0"], "--dim"),
    (["--eval-trials", "0"], "--eval-trials"),
    (["--mnist", "x"], "--mnist"),  # not an option of kappa
]


@pytest.mark.parametrize("argv,needle", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_option_is_one_line_before_any_work(argv, needle, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(chunks.ChunkFn, "compiled", lambda *a, **k: 1 / 0)
    assert cli.main(["kappa", *argv, "--out", str(tmp_path / "o"), "--quiet"]) == 2
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("bandits-jax: error: "), lines
    assert needle in lines[0]
    assert not (tmp_path / "o").exists()


def test_several_bad_options_one_line_each(tmp_path, capsys):
    argv = ["kappa", "--S-grid", "0,1", "--learners", "bogus", "--out", str(tmp_path / "o")]
    assert cli.main(argv) == 2
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(lines) == 2 and "--S-grid" in lines[0] and "--learners" in lines[1]


def test_help_lists_only_accepted_options_and_the_grids(tmp_path):
    parser = cli.build_parser()
    sub = parser.subcommands["kappa"]
    text = sub.format_help()
    listed = {s for a in sub._actions for s in a.option_strings}
    for flag in ("--S", "--mnist"):  # not in options.COMMAND_GROUPS["kappa"]
        assert flag not in listed and f"{flag} " not in text
    for flag in ("--S-grid", "--tune", "--no-tune", "--quick", "--resume", "--sketch"):
        assert flag in listed and flag in text
    unwrapped = "".join(text.split())  # argparse wraps long lists at spaces and hyphens
    for values in ("1,2,4,8", "-1,-0.5,0", "-0.5,0,0.5", "0.01,0.1,1", "eofd-robust,eofd,oful"):
        assert values in unwrapped
    # every listed option is accepted by the command's validation
    args = opt.apply_config(
        parser,
        sub,
        [
            "kappa", "--sketch", "2", "--chunk", "3", "--float32", "--no-plots", "--no-tune",
            "--threads", "1", "--devices", "1", "--seed", "1", "--quick", "--out",
            str(tmp_path / "o"),
        ],
    )  # fmt: skip
    kappa.validate(args)
    assert args.plan["modes"] == ["recipe"] and args.plan["T"] == 300
    assert args.plan["S_grid"] == [1.0, 4.0, 8.0] and len(args.plan["eval_seeds"]) == 3
    # --config "tune": false turns the tuned column off
    (tmp_path / "cfg.json").write_text(json.dumps({"tune": False, "S-grid": [1, 3]}))
    args = opt.apply_config(parser, sub, ["kappa", "--config", str(tmp_path / "cfg.json")])
    assert args.tune is False and args.S_grid == "1,3"


def test_figure_renders_without_overlapping_tick_labels(tmp_path):
    S = [1.0, 1.05, 1.1, 2.0, 4.0, 8.0]  # crowded on a log axis: labels are thinned
    series = [
        {"label": n, "mode": mode, "color": c, "S": S, "mean": list(np.linspace(5, 9, 6) * k),
         "se": [0.5] * 6}
        for n, c, k in (("A", "tab:green", 1.0), ("B", None, 2.0))
        for mode in ("recipe", "tuned")
    ]  # fmt: skip
    ref = {"S": S, "value": [kappa.kappa_bound(s) for s in S], "label": "kappa bound"}
    fig = plotting.draw_kappa(series, title="t", reference=ref)
    renderer = fig.canvas.get_renderer()
    try:
        for ax in fig.axes:
            labels = [x for x in ax.get_xticklabels() if x.get_visible() and x.get_text()]
            assert labels[0].get_text() == "1" and labels[-1].get_text() == "8"
            boxes = sorted((x.get_window_extent(renderer) for x in labels), key=lambda b: b.x0)
            for a, b in zip(boxes, boxes[1:], strict=False):
                assert a.x1 <= b.x0, (a, b)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    plotting.kappa_figure(series, tmp_path / "k.png", reference=ref)
    assert (tmp_path / "k.png").read_bytes()[:8] == PNG
