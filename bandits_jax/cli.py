"""``bandits-jax``: reproduce the EOFD-MLogB paper's experiments, run sweeps and benchmarks.

Subcommands (each writes PNG figures, JSON/CSV numbers and a text summary to ``--out DIR``,
default ``./results``, and prints where):

* ``reproduce`` -- the paper's Figures 1 and 2 (section 4): cumulative regret with one-std bands
  over trials and per-round time bars, EOFD-MLogB vs OFUL-MLogB, on the synthetic (d, K) =
  (100, 4) and (400, 1) streams and on the digits data (MNIST too when its files are found).
  ``--quick`` is a reduced run of a minute or two on a laptop CPU.
* ``sweep`` -- learners x (l, e, beta) grid x trials x settings in one compiled call (sharded
  over all devices), tuned honestly: best configuration on tuning seeds, reported on separate
  evaluation seeds; the exploration diagnostic per configuration.
* ``bench`` -- the speed benchmarks (``python -m benchmarks.mlogb_speed``, and
  ``benchmarks.bco_speed`` if present) from a source checkout.

Runs are played in chunks of rounds with a progress bar and a checkpoint after each chunk
(``DIR/checkpoints``); ``--resume`` continues an interrupted run bit-identically.

Settings: ``synth-D-K`` (section 4's synthetic stream with dimension D and K outcomes, e.g.
``synth-100-4``), ``digits`` (the classification protocol on scikit-learn's digits, d = 65),
``digits-k4`` (its multinomial K = 4 variant), ``mnist`` (d = 785; files via ``--mnist`` or the
cache directory, see ``bandits_jax.envs.mnist``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

PAPER_GRID = (-0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0)
LEARNERS = {"eofd": "EOFD", "oful": "OFUL"}
DEFAULT_SETTINGS = ("synth-100-4", "synth-400-1", "digits")
EVAL_SEED_OFFSET = 10_000


# ----------------------------------------------------------------------------- settings


class Setting(NamedTuple):
    name: str
    title: str
    env: Any
    num_outcomes: int
    dim: int


def make_setting(name: str, *, S: float, dtype: Any, mnist_path: str | None = None) -> Setting:
    """Builds the environment of a named setting (see module docstring)."""
    from bandits_jax import envs
    from bandits_jax.envs import classification

    m = re.fullmatch(r"synth-(\d+)-(\d+)", name)
    if m:
        d, K = int(m.group(1)), int(m.group(2))
        env = envs.synthetic_mlogb(num_outcomes=K, dim=d, S=S, dtype=dtype)
        return Setting(name, f"synthetic (d, K) = ({d}, {K})", env, K, d)
    if name == "digits":
        env = classification.digits(dtype=dtype)
        return Setting(name, "digits (d = 65, K = 1)", env, 1, env.dim)
    if name == "digits-k4":
        env = classification.digits_multinomial(num_outcomes=4, dtype=dtype)
        return Setting(name, "digits multinomial (d = 65, K = 4)", env, 4, env.dim)
    if name == "mnist":
        env = classification.mnist(mnist_path, dtype=dtype)
        return Setting(name, "MNIST (d = 785, K = 1)", env, 1, env.dim)
    raise SystemExit(
        f"unknown setting {name!r}: expected synth-D-K (e.g. synth-100-4), digits, digits-k4 "
        "or mnist"
    )


def make_learner(name: str, K: int, d: int, sketch_size: int):
    from bandits_jax import mlogb

    if name == "eofd":
        return mlogb.eofd(num_outcomes=K, dim=d, sketch_size=sketch_size)
    if name == "oful":
        return mlogb.oful(num_outcomes=K, dim=d)
    raise SystemExit(f"unknown learner {name!r}: expected one of {sorted(LEARNERS)}")


def _beta_arg(b: Any) -> Any:
    if isinstance(b, str) and b not in ("theory", "order"):
        return float(b)
    return b


def _env_rewards(setting: Setting) -> Any:
    r = getattr(setting.env, "rewards", None)
    return None if r is None else np.asarray(r, np.float64).tolist()


def mnist_available(path: str | None) -> bool:
    from bandits_jax.envs.mnist import MNISTNotFoundError, load_mnist

    try:
        load_mnist(path)
    except MNISTNotFoundError:
        return False
    return True


# ----------------------------------------------------------------------------- helpers


def _split_list(text: str | Sequence[Any] | None) -> list[str]:
    if text is None:
        return []
    if isinstance(text, str):
        return [t.strip() for t in text.split(",") if t.strip()]
    return [str(t) for t in text]


def _floats(text: Any) -> list[float]:
    return [float(t) for t in _split_list(text)]


def _chunk_size(num_rounds: int, requested: int | None) -> int:
    """The requested chunk, else about a tenth of the run (a divisor of T when one is near, so
    that only one chunk length is compiled)."""
    if requested:
        return max(1, min(requested, num_rounds))
    target = max(1, math.ceil(num_rounds / 10))
    for c in range(target, max(1, target // 2) - 1, -1):
        if num_rounds % c == 0:
            return c
    return target


def _dtype(args):
    import jax.numpy as jnp

    return jnp.float32 if args.float32 else jnp.float64


def _say(args, text: str) -> None:
    if not getattr(args, "quiet", False):
        print(text, flush=True)


def _write_outputs(out: pathlib.Path, written: list[pathlib.Path]) -> None:
    print(f"\nResults in {out.resolve()}:")
    for p in written:
        print(f"  {p.resolve()}")


def _keep_mlogb(metrics):
    return {
        "regret": metrics.regret,
        "bonus_spread": metrics.bonus_spread,
        "estimate_spread": metrics.estimate_spread,
        "explored": metrics.explored,
        "status": metrics.status,
    }


def _median_ratio(bonus: np.ndarray, estimate: np.ndarray) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(estimate > 0, bonus / estimate, np.nan)
    r = r[np.isfinite(r)]
    return float(np.median(r)) if r.size else float("nan")


def _downsample(x: np.ndarray, points: int = 400) -> tuple[list[int], list[float]]:
    idx = np.unique(np.linspace(0, x.size - 1, min(points, x.size)).round().astype(int))
    return (idx + 1).tolist(), x[idx].tolist()


# ----------------------------------------------------------------------------- reproduce


def cmd_reproduce(args) -> int:
    import jax

    from bandits_jax import mlogb, plotting
    from bandits_jax.envs.mnist import MNISTNotFoundError
    from bandits_jax.sim import sweep
    from bandits_jax.sim.chunks import ChunkFn, Progress, run_chunked
    from bandits_jax.sim.runner import init_run

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    T = args.rounds or (200 if args.quick else 2000)
    trials = args.trials or (4 if args.quick else 10)
    chunk = _chunk_size(T, args.chunk)
    names = _split_list(args.settings) or list(DEFAULT_SETTINGS)
    notes = []
    if not args.settings and "mnist" not in names:
        if args.mnist or mnist_available(None):  # an explicit --mnist must load or fail
            names.append("mnist")
        else:
            from bandits_jax.envs.mnist import default_cache_dir

            notes.append(
                f"MNIST skipped: no files in {default_cache_dir()} (put train-images-idx3-ubyte"
                "[.gz] and train-labels-idx1-ubyte[.gz], or mnist.npz, there or pass --mnist PATH)."
            )
    learners = _split_list(args.learners) or ["eofd", "oful"]
    dtype = _dtype(args)
    _say(
        args,
        f"reproduce: settings {names}, learners {learners}, T = {T}, {trials} trials, "
        f"chunks of {chunk} rounds, {jax.numpy.dtype(dtype).name}, (l, e) = ({args.l}, {args.e}),"
        f" beta = {args.beta}",
    )
    report: dict[str, Any] = {
        "command": " ".join(["bandits-jax", *sys.argv[1:]]) if args.argv is None else args.argv,
        "rounds": T,
        "trials": trials,
        "chunk": chunk,
        "dtype": jax.numpy.dtype(dtype).name,
        "l": args.l,
        "e": args.e,
        "beta": args.beta,
        "S": args.S,
        "backend": jax.default_backend(),
        "settings": {},
    }
    regret_panels, time_panels, rows = [], [], []
    for name in names:
        try:
            setting = make_setting(name, S=args.S, dtype=dtype, mnist_path=args.mnist)
        except MNISTNotFoundError as e:
            raise SystemExit(str(e)) from None
        K, d = setting.num_outcomes, setting.dim
        rec = mlogb.section4(
            num_outcomes=K,
            dim=d,
            S=args.S,
            horizon=T,
            l=args.l,
            e=args.e,
            beta=_beta_arg(args.beta),
            rewards=_env_rewards(setting),
            dtype=dtype,
        )
        m = args.sketch or rec.sketch_size
        bar = Progress(len(learners) * trials * T, name, enabled=not args.quiet)
        entry: dict[str, Any] = {"title": setting.title, "d": d, "K": K, "m": m, "learners": {}}
        curves, times = {}, {}
        for lname in learners:
            label = LEARNERS[lname]
            learner = make_learner(lname, K, d, m)
            chunk_fn = ChunkFn(mlogb.interact(learner, setting.env))
            ls = learner.init(rec.hparams)
            regrets, per_round, bonus, estimate, failures, compile_s = [], [], [], [], 0, 0.0
            explored = []
            for i in range(trials):
                env_keys, run_keys = sweep.seed_keys([args.seed + i])
                state = init_run(ls, setting.env.init(env_keys[0]), run_keys[0])
                res = run_chunked(
                    chunk_fn,
                    state,
                    T,
                    chunk_size=chunk,
                    checkpoint_dir=out / "checkpoints" / name / lname / f"trial_{i:03d}",
                    resume=args.resume,
                    config={
                        "setting": name,
                        "learner": lname,
                        "seed": args.seed + i,
                        "l": args.l,
                        "e": args.e,
                        "beta": args.beta,
                        "S": args.S,
                        "m": m,
                        "dtype": report["dtype"],
                    },
                    progress=bar,
                    keep=_keep_mlogb,
                )
                compile_s += res.stats.compile_seconds
                regrets.append(np.asarray(res.metrics["regret"], np.float64))
                bonus.append(res.metrics["bonus_spread"])
                estimate.append(res.metrics["estimate_spread"])
                explored.append(float(np.mean(res.metrics["explored"])))
                failures += int(np.sum(np.asarray(res.metrics["status"]) >= 2))
                per_round.append(res.stats.total_run_seconds / T)
            regrets_a = np.stack(regrets)
            final = regrets_a.sum(axis=1)
            cum = np.cumsum(regrets_a, axis=1)
            ratio = _median_ratio(np.stack(bonus), np.stack(estimate))
            rounds_x, mean_y = _downsample(cum.mean(axis=0))
            _, std_y = _downsample(cum.std(axis=0, ddof=1) if trials > 1 else 0 * cum[0])
            stats = {
                "final_regret_mean": float(final.mean()),
                "final_regret_std": float(final.std(ddof=1)) if trials > 1 else 0.0,
                "final_regret_per_trial": final.tolist(),
                "seconds_per_round_mean": float(np.mean(per_round)),
                "seconds_per_round_std": float(np.std(per_round, ddof=1)) if trials > 1 else 0.0,
                "seconds_per_round_per_trial": per_round,
                "compile_seconds": compile_s,
                "bonus_ratio_median": ratio,
                "explore_rate": float(np.mean(explored)),
                "rejected_updates": failures,
                "curve_rounds": rounds_x,
                "cumulative_regret_mean": mean_y,
                "cumulative_regret_std": std_y,
            }
            entry["learners"][label] = stats
            curves[label], times[label] = regrets_a, per_round
            rows.append(
                {
                    "setting": name,
                    "learner": label,
                    "d": d,
                    "K": K,
                    "m": m if lname == "eofd" else "",
                    "trials": trials,
                    "rounds": T,
                    "final_regret_mean": stats["final_regret_mean"],
                    "final_regret_std": stats["final_regret_std"],
                    "ms_per_round_mean": 1e3 * stats["seconds_per_round_mean"],
                    "ms_per_round_std": 1e3 * stats["seconds_per_round_std"],
                    "compile_s": compile_s,
                    "bonus_ratio": ratio,
                    "explore_rate": stats["explore_rate"],
                }
            )
        if "EOFD" in entry["learners"] and "OFUL" in entry["learners"]:
            e_, o_ = entry["learners"]["EOFD"], entry["learners"]["OFUL"]
            entry["eofd_over_oful"] = {
                "final_regret": e_["final_regret_mean"] / o_["final_regret_mean"]
                if o_["final_regret_mean"] > 0
                else float("nan"),
                "time_per_round": e_["seconds_per_round_mean"] / o_["seconds_per_round_mean"],
            }
        report["settings"][name] = entry
        regret_panels.append((setting.title, curves))
        time_panels.append((setting.title, times))

    written = []
    if args.plots:
        plotting.regret_figure(regret_panels, out / "reproduce_regret.png")
        plotting.time_figure(time_panels, out / "reproduce_time.png")
        written += [out / "reproduce_regret.png", out / "reproduce_time.png"]
    sweep.write_json(out / "reproduce.json", report)
    sweep.write_csv(out / "reproduce.csv", rows)
    summary = _reproduce_summary(report, rows, notes)
    (out / "reproduce_summary.txt").write_text(summary)
    written += [out / "reproduce.json", out / "reproduce.csv", out / "reproduce_summary.txt"]
    print("\n" + summary)
    _write_outputs(out, written)
    return 0


def _reproduce_summary(report: dict, rows: list[dict], notes: list[str]) -> str:
    from bandits_jax.sim.sweep import GREEDY_RATIO, format_table

    lines = [
        f"EOFD-MLogB vs OFUL-MLogB, section 4 recipe (l, e) = ({report['l']}, {report['e']}), "
        f"beta = {report['beta']}, S = {report['S']}; T = {report['rounds']} rounds, "
        f"{report['trials']} trials, {report['dtype']} on {report['backend']}.",
        "Per-round time: wall time of the compiled chunks / T per trial (compile excluded).",
        "",
        format_table(
            rows,
            [
                "setting",
                "learner",
                "final_regret_mean",
                "final_regret_std",
                "ms_per_round_mean",
                "ms_per_round_std",
                "compile_s",
                "bonus_ratio",
            ],
        ),
        "",
    ]
    for name, entry in report["settings"].items():
        ratio = entry.get("eofd_over_oful")
        if ratio:
            lines.append(
                f"{name}: EOFD/OFUL final regret {ratio['final_regret']:.3f}, per-round time "
                f"{ratio['time_per_round']:.3f} ({abs(100 * (1 - ratio['time_per_round'])):.0f}% "
                f"{'less' if ratio['time_per_round'] < 1 else 'more'} time)"
            )
    greedy = [
        f"{r['setting']}/{r['learner']} ({r['bonus_ratio']:.1e})"
        for r in rows
        if np.isfinite(r["bonus_ratio"]) and r["bonus_ratio"] < GREEDY_RATIO
    ]
    lines.append("")
    lines.append(
        "Exploration diagnostic (bonus_ratio = median over rounds of the spread of the optimistic "
        "bonus across the action set / the spread of the estimated rewards):"
    )
    if greedy:
        lines.append(
            f"  effectively greedy (ratio < {GREEDY_RATIO:g}): {', '.join(greedy)}. The bonus "
            "cannot change which action wins, so beta hardly matters there; see `bandits-jax "
            "sweep --beta-grid ...` for (l, e, beta) where exploration matters."
        )
    else:
        lines.append("  no learner/setting is effectively greedy by this measure.")
    failures = [f"{r['setting']}/{r['learner']}" for r in rows if r.get("rejected_updates")]
    if failures:
        lines.append(f"Rejected (non-finite) updates in: {', '.join(failures)}")
    lines += notes
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- sweep


def _sweep_experiments(args, T: int, dtype) -> list:
    from bandits_jax import mlogb
    from bandits_jax.sim import sweep

    ls, es = _floats(args.l_grid), _floats(args.e_grid)
    betas = _split_list(args.beta_grid)
    lg = sweep.grid_product(l=ls, e=es)
    exps = []
    for name in _split_list(args.settings):
        setting = make_setting(name, S=args.S, dtype=dtype, mnist_path=args.mnist)
        K, d = setting.num_outcomes, setting.dim
        parts = []
        for b in betas:
            parts.append(
                mlogb.section4(
                    num_outcomes=K,
                    dim=d,
                    S=args.S,
                    horizon=T,
                    l=lg["l"],
                    e=lg["e"],
                    beta=_beta_arg(b),
                    rewards=_env_rewards(setting),
                    dtype=dtype,
                )
            )
        hp = jax_concat([p.hparams for p in parts])
        m = args.sketch or parts[0].sketch_size
        grid = {
            "l": np.tile(lg["l"], len(betas)),
            "e": np.tile(lg["e"], len(betas)),
            "beta": np.repeat(np.asarray(betas, dtype=str), lg["l"].size),
        }
        for lname in _split_list(args.learners):
            learner = make_learner(lname, K, d, m)
            exps.append(
                sweep.Experiment(
                    LEARNERS[lname],
                    name,
                    mlogb.interact(learner, setting.env),
                    learner.init,
                    hp,
                    grid,
                    setting.env.init,
                )
            )
    return exps


def jax_concat(trees: list) -> Any:
    import jax
    import jax.numpy as jnp

    return jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs, axis=0), *trees)


def _loop_timing(exps, seeds: list[int], T: int) -> dict:
    """Wall time of the same runs one by one: one compiled single-run scan per experiment,
    called once per (grid point, seed)."""
    import jax

    from bandits_jax.sim import sweep
    from bandits_jax.sim.runner import rollout

    env_keys, run_keys = sweep.seed_keys(seeds)
    run_s = compile_s = 0.0
    runs = 0
    for exp in exps:
        fn = jax.jit(lambda ls, es, k, step=exp.step: rollout(step, ls, es, k, T))
        hp0 = jax.tree_util.tree_map(lambda x: x[0], exp.hparams)
        ls0, es0 = exp.init_learner(hp0), exp.init_env(env_keys[0])
        t0 = time.perf_counter()
        exe = fn.lower(ls0, es0, run_keys[0]).compile()
        compile_s += time.perf_counter() - t0
        for g in range(exp.grid_size):
            hp = jax.tree_util.tree_map(lambda x, g=g: x[g], exp.hparams)
            ls = exp.init_learner(hp)
            for n in range(len(seeds)):
                es = exp.init_env(env_keys[n])
                t0 = time.perf_counter()
                jax.block_until_ready(exe(ls, es, run_keys[n]))
                run_s += time.perf_counter() - t0
                runs += 1
    return {"runs": runs, "run_seconds": run_s, "compile_seconds": compile_s}


def cmd_sweep(args) -> int:
    import jax

    from bandits_jax import plotting
    from bandits_jax.sim import sharding, sweep
    from bandits_jax.sim.chunks import Progress

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    T = args.rounds
    dtype = _dtype(args)
    exps = _sweep_experiments(args, T, dtype)
    n_dev = jax.device_count()
    mesh = sharding.run_mesh() if (n_dev > 1 and not args.no_shard) else None
    tune_seeds = list(range(args.seed, args.seed + args.trials))
    eval_seeds = list(
        range(args.seed + EVAL_SEED_OFFSET, args.seed + EVAL_SEED_OFFSET + args.eval_trials)
    )
    G = exps[0].grid_size if exps else 0
    total_runs = sum(e.grid_size for e in exps) * len(tune_seeds)
    _say(
        args,
        f"sweep: {len(exps)} experiments (learners x settings) x {G} grid points x "
        f"{len(tune_seeds)} tuning seeds = {total_runs} runs of {T} rounds in one compiled call"
        f" per chunk, on {1 if mesh is None else mesh.size} device(s)"
        + (
            f"; then the best point of each on {len(eval_seeds)} evaluation seeds"
            if eval_seeds
            else ""
        ),
    )
    chunk = _chunk_size(T, args.chunk)
    common = dict(
        mesh=mesh,
        chunk_size=chunk,
        resume=args.resume,
        config={"dtype": jax.numpy.dtype(dtype).name, "S": args.S, "m": args.sketch},
    )
    ck = out / "checkpoints" / "sweep"
    # The bar counts rounds of the batched sweep (every run advances together).
    bar = Progress(T, f"tuning ({total_runs} runs)", enabled=not args.quiet)
    tune = sweep.run_sweep(
        exps, num_rounds=T, seeds=tune_seeds, progress=bar, checkpoint_dir=ck / "tuning", **common
    )
    tuning_rows = sweep.table(tune, split="tuning")
    eval_rows, chosen = [], []
    if eval_seeds:
        for r in tune.experiments:
            chosen.append(int(np.nanargmin(np.asarray(r.metrics["regret"]).sum(-1).mean(-1))))
        picked = [sweep.select_grid(e, [g]) for e, g in zip(exps, chosen, strict=True)]
        n_eval = len(picked) * len(eval_seeds)
        bar = Progress(T, f"evaluation ({n_eval} runs)", enabled=not args.quiet)
        ev = sweep.run_sweep(
            picked,
            num_rounds=T,
            seeds=eval_seeds,
            progress=bar,
            checkpoint_dir=ck / "evaluation",
            **common,
        )
        eval_rows = sweep.table(ev, split="evaluation")
    timing = {
        "runs": total_runs,
        "one_call_run_seconds": tune.run_seconds,
        "one_call_compile_seconds": tune.compile_seconds,
        "devices": tune.devices,
    }
    if args.compare_loop:
        _say(args, "timing the same runs one by one ...")
        loop = _loop_timing(exps, tune_seeds, T)
        timing.update(
            loop_run_seconds=loop["run_seconds"], loop_compile_seconds=loop["compile_seconds"]
        )
    written = []
    rows = tuning_rows + eval_rows
    sweep.write_csv(out / "sweep.csv", rows)
    sweep.write_json(
        out / "sweep.json",
        {
            "rounds": T,
            "tuning_seeds": tune_seeds,
            "eval_seeds": eval_seeds,
            "timing": timing,
            "chosen": chosen,
            "rows": rows,
        },
    )
    written += [out / "sweep.csv", out / "sweep.json"]
    if args.plots:
        written += _sweep_figures(
            out,
            tune,
            _floats(args.l_grid),
            _floats(args.e_grid),
            _split_list(args.beta_grid),
            plotting,
        )
    summary = _sweep_summary(tuning_rows, eval_rows, timing, T, _split_list(args.beta_grid))
    (out / "sweep_summary.txt").write_text(summary)
    written.append(out / "sweep_summary.txt")
    print("\n" + summary)
    _write_outputs(out, written)
    return 0


def _sweep_figures(out, tune, ls, es, betas, plotting) -> list[pathlib.Path]:
    from bandits_jax.sim.sweep import bonus_ratio

    reg_panels, ratio_panels = [], []
    nl, ne = len(ls), len(es)
    for r in tune.experiments:
        final = np.asarray(r.metrics["regret"], np.float64).sum(-1).mean(-1)
        ratio = bonus_ratio(r.metrics)
        for bi, b in enumerate(betas):
            sl = slice(bi * nl * ne, (bi + 1) * nl * ne)
            title = f"{r.learner} {r.env} beta={b}"
            reg_panels.append((title, final[sl].reshape(nl, ne)))
            if ratio is not None:
                ratio_panels.append((title, ratio[sl].reshape(nl, ne)))
    paths = [out / "sweep_regret.png"]
    plotting.heatmap_figure(reg_panels, ls, es, paths[0], cbar_label="mean final regret")
    if ratio_panels:
        paths.append(out / "sweep_exploration.png")
        plotting.heatmap_figure(
            ratio_panels, ls, es, paths[1], cbar_label="bonus/estimate spread", log10=True
        )
    return paths


def _sweep_summary(tuning_rows, eval_rows, timing, T, betas) -> str:
    from bandits_jax.sim.sweep import GREEDY_RATIO, format_table

    lines = [f"Sweep of {timing['runs']} runs x {T} rounds on {timing['devices']} device(s):"]
    lines.append(
        f"  one call: {timing['one_call_run_seconds']:.2f} s run + "
        f"{timing['one_call_compile_seconds']:.2f} s compile"
    )
    if "loop_run_seconds" in timing:
        lines.append(
            f"  one by one: {timing['loop_run_seconds']:.2f} s run + "
            f"{timing['loop_compile_seconds']:.2f} s compile "
            f"(speed-up of the one call: "
            f"{timing['loop_run_seconds'] / max(timing['one_call_run_seconds'], 1e-12):.2f}x)"
        )
    cols = [
        "learner",
        "env",
        "l",
        "e",
        "beta",
        "final_regret_mean",
        "final_regret_std",
        "bonus_ratio",
        "explore_rate",
        "greedy",
    ]
    best = sorted(tuning_rows, key=lambda r: (r["learner"], r["env"], r["final_regret_mean"]))
    lines += ["", "Tuning seeds, 10 best configurations per experiment:"]
    shown = []
    for key in dict.fromkeys((r["learner"], r["env"]) for r in best):
        shown += [r for r in best if (r["learner"], r["env"]) == key][:10]
    lines.append(format_table(shown, cols))
    if eval_rows:
        lines += [
            "",
            "Honest estimate: the configuration chosen on the tuning seeds, on separate "
            "evaluation seeds:",
            format_table(eval_rows, cols),
        ]
    n_greedy = sum(1 for r in tuning_rows if r.get("greedy"))
    lines += [
        "",
        f"Exploration: {n_greedy} of {len(tuning_rows)} configurations have a median bonus "
        f"spread below {GREEDY_RATIO:g} of the estimate spread (effectively greedy).",
    ]
    if len(betas) > 1:
        groups: dict[Any, list[dict]] = {}
        for r in tuning_rows:
            groups.setdefault((r["learner"], r["env"], r["l"], r["e"]), []).append(r)
        sens = []
        for (lrn, env, l_, e_), rs in groups.items():
            vals = [r["final_regret_mean"] for r in rs]
            sens.append(
                (
                    max(vals) - min(vals),
                    lrn,
                    env,
                    l_,
                    e_,
                    min(rs, key=lambda r: r["final_regret_mean"]),
                )
            )
        sens.sort(key=lambda s: -s[0])
        lines.append("Where beta matters most (range of mean final regret over beta):")
        for rng, lrn, env, l_, e_, bestr in sens[:8]:
            lines.append(
                f"  {lrn} {env} l={l_:g} e={e_:g}: range {rng:.3g}, best beta={bestr['beta']}"
                f" ({bestr['final_regret_mean']:.3g})"
            )
        flat = sum(1 for s in sens if s[0] == 0.0)
        lines.append(f"  {flat} of {len(sens)} (l, e) points give identical regret for every beta.")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- bench


def cmd_bench(args) -> int:
    from bandits_jax import plotting

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = pathlib.Path(__file__).resolve().parent.parent
    if not (root / "benchmarks" / "mlogb_speed.py").is_file():
        raise SystemExit(
            f"the benchmarks live in the source checkout (benchmarks/ next to bandits_jax/), not "
            f"found under {root}; run `bandits-jax bench` from an editable install of a clone"
        )
    written, texts = [], []
    for mod in ("mlogb_speed", "bco_speed"):
        if not (root / "benchmarks" / f"{mod}.py").is_file():
            texts.append(f"benchmarks.{mod}: not present, skipped\n")
            continue
        js = out / f"bench_{mod}.json"
        cmd = [sys.executable, "-m", f"benchmarks.{mod}", "--json", str(js)]
        if args.quick:
            cmd.append("--quick")
        if args.float32:
            cmd.append("--float32")
        _say(args, "$ " + " ".join(cmd))
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr[-4000:])
        texts.append(f"$ {' '.join(cmd)}\n{proc.stdout}")
        if proc.returncode != 0:
            texts.append(f"(exit status {proc.returncode})\n{proc.stderr[-4000:]}")
            continue
        written.append(js)
        try:
            cases = json.loads(js.read_text()).get("cases", [])
        except (OSError, ValueError):
            cases = []
        if cases and args.plots:
            png = out / f"bench_{mod}.png"
            plotting.bench_figure(cases, png)
            written.append(png)
    (out / "bench_summary.txt").write_text("\n".join(texts))
    written.append(out / "bench_summary.txt")
    _write_outputs(out, written)
    return 0


# ----------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", default="results", help="output directory (default ./results)")
    common.add_argument("--resume", action="store_true", help="continue from checkpoints")
    common.add_argument(
        "--devices",
        type=int,
        default=None,
        help="on CPU, split the host into N devices (sets XLA_FLAGS before JAX starts)",
    )
    common.add_argument("--float32", action="store_true", help="float32 (default float64)")
    common.add_argument("--quiet", action="store_true", help="no progress bar")
    common.add_argument("--no-plots", dest="plots", action="store_false", help="skip PNGs")
    common.add_argument("--seed", type=int, default=0, help="first trial seed")
    common.add_argument("--S", type=float, default=1.0, help="parameter-norm bound S (1.0)")
    common.add_argument("--mnist", default=None, help="directory or .npz with the MNIST files")
    common.add_argument("--chunk", type=int, default=None, help="rounds per compiled chunk")
    common.add_argument("--sketch", type=int, default=None, help="override m = floor(Kd/10)")

    p = argparse.ArgumentParser(
        prog="bandits-jax",
        description="Reproduce the EOFD-MLogB experiments, run sweeps and benchmarks.",
    )
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser(
        "reproduce",
        parents=[common],
        help="the paper's Figures 1-2 (regret curves, per-round time)",
        description="EOFD-MLogB vs OFUL-MLogB on the section-4 settings: cumulative regret "
        "(mean, one-std band over trials) and per-round time bars.",
    )
    r.add_argument("--quick", action="store_true", help="reduced run (T=200, 4 trials)")
    r.add_argument("--rounds", type=int, default=None, help="T (default 2000; quick 200)")
    r.add_argument("--trials", type=int, default=None, help="trials (default 10; quick 4)")
    r.add_argument(
        "--settings",
        default=None,
        help="comma list of synth-D-K, digits, digits-k4, mnist (default synth-100-4, "
        "synth-400-1, digits, + mnist if found)",
    )
    r.add_argument("--learners", default=None, help="comma list of eofd, oful (default both)")
    r.add_argument("--l", type=float, default=0.75, help="lambda exponent l (0.75)")
    r.add_argument("--e", type=float, default=0.75, help="eta exponent e (0.75)")
    r.add_argument("--beta", default="theory", help="theory, order or a fixed radius (theory)")
    r.set_defaults(func=cmd_reproduce)

    s = sub.add_parser(
        "sweep",
        parents=[common],
        help="learners x (l, e, beta) grid x trials x settings in one compiled call",
        description="A hyperparameter sweep in one compiled call (sharded over all devices), "
        "tuned on tuning seeds and reported on separate evaluation seeds.",
    )
    s.add_argument("--config", default=None, help="JSON file with any of these options")
    s.add_argument("--settings", default="synth-20-1", help="comma list (default synth-20-1)")
    s.add_argument("--learners", default="eofd", help="comma list of eofd, oful (default eofd)")
    grid = ",".join(f"{v:g}" for v in PAPER_GRID)
    s.add_argument("--l-grid", default=grid, help=f"l values (default the paper's {grid})")
    s.add_argument("--e-grid", default=grid, help="e values (default the paper's grid)")
    s.add_argument("--beta-grid", default="theory", help="beta values: theory, order, floats")
    s.add_argument("--rounds", type=int, default=200, help="T (default 200)")
    s.add_argument("--trials", type=int, default=10, help="tuning seeds (default 10)")
    s.add_argument("--eval-trials", type=int, default=10, help="evaluation seeds (default 10)")
    s.add_argument("--no-shard", action="store_true", help="one device even if more exist")
    s.add_argument("--compare-loop", action="store_true", help="also time the same runs one by one")
    s.set_defaults(func=cmd_sweep)

    b = sub.add_parser(
        "bench",
        parents=[common],
        help="speed benchmarks (benchmarks.mlogb_speed, benchmarks.bco_speed)",
        description="Runs python -m benchmarks.mlogb_speed (and bco_speed if present).",
    )
    b.add_argument("--quick", action="store_true", help="reduced benchmark")
    b.set_defaults(func=cmd_bench)
    p.subcommands = {"reproduce": r, "sweep": s, "bench": b}  # for --config defaults
    return p


def _apply_config(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    args = parser.parse_args(argv)
    if getattr(args, "config", None):
        try:
            cfg = json.loads(pathlib.Path(args.config).read_text())
        except (OSError, ValueError) as e:
            raise SystemExit(f"--config {args.config}: {e}") from None
        if not isinstance(cfg, dict):
            raise SystemExit(f"--config {args.config}: expected a JSON object")
        sub = parser.subcommands[args.command]
        known = {a.dest for a in sub._actions}
        cleaned = {}
        for k, v in cfg.items():
            dest = k.replace("-", "_")
            if dest not in known:
                raise SystemExit(f"--config {args.config}: unknown option {k!r}")
            cleaned[dest] = ",".join(map(str, v)) if isinstance(v, list) else v
        sub.set_defaults(**cleaned)  # the command line still wins over the file
        args = parser.parse_args(argv)
    return args


def _configure_devices(n: int | None) -> None:
    if not n:
        return
    flag = f"--xla_force_host_platform_device_count={n}"
    flags = re.sub(
        r"--xla_force_host_platform_device_count=\d+", "", os.environ.get("XLA_FLAGS", "")
    )
    os.environ["XLA_FLAGS"] = (flags + " " + flag).strip()
    import jax

    if jax.device_count() != n and jax.default_backend() == "cpu":
        print(
            f"note: --devices {n} ignored (JAX was started with {jax.device_count()} devices)",
            file=sys.stderr,
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``bandits-jax`` console script (and ``python -m bandits_jax``)."""
    argv_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = _apply_config(parser, argv_list)
    args.argv = None if argv is None else "bandits-jax " + " ".join(argv_list)
    _configure_devices(args.devices)
    import jax

    if not args.float32:
        jax.config.update("jax_enable_x64", True)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(
            "\ninterrupted: the checkpoints of finished chunks are kept; rerun with --resume",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
