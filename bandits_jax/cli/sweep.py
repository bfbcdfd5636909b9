"""``bandits-jax sweep``: learners x hyperparameter grid x trials x settings in one compiled call
(sharded over all devices), tuned honestly: best configuration on tuning seeds, reported on
separate evaluation seeds; the exploration diagnostic and the update status per configuration.

MLogB learners (``reproduce``'s registry) take the (l, e, beta) grid on the MLogB settings; BCO
learners (``bandits_jax.cli.bco.BCO_LEARNERS``) take ``--scale-grid`` (step-size scale) on the
BCO settings ``bco-linear-D`` (convex family) and ``bco-quadratic-D`` (strongly convex family),
each learner on the settings of its family; their table reports the dynamic regret (eq. 5.1).
"""

from __future__ import annotations

import argparse
import pathlib
import re
import time
from typing import Any

import numpy as np

from bandits_jax.cli import bco as bco_cmd
from bandits_jax.cli import options as opt
from bandits_jax.cli import output, tables
from bandits_jax.cli import reproduce as rep
from bandits_jax.mlogb import recipes
from bandits_jax.mlogb.exploration import SWEEP_FIELDS, bonus_ratio, exploration_columns


def add_arguments(s: argparse.ArgumentParser) -> None:
    """Adds ``sweep``'s own options to its subparser."""
    s.add_argument("--config", default=None, help="JSON file with any of these options")
    s.add_argument(
        "--settings",
        default="synth-20-1",
        help="comma list of MLogB settings and bco-linear-D, bco-quadratic-D (default synth-20-1)",
    )
    s.add_argument(
        "--learners",
        default="eofd-paper",
        help=f"comma list of {', '.join(recipes.KINDS)} and the BCO learners "
        f"{', '.join(bco_cmd.BCO_LEARNERS)} (default eofd-paper)",
    )
    grid = ",".join(f"{v:g}" for v in opt.PAPER_GRID)
    s.add_argument("--l-grid", default=grid, help=f"l values (default the paper's {grid})")
    s.add_argument("--e-grid", default=grid, help=f"e values (default the paper's {grid})")
    s.add_argument(
        "--beta-grid",
        default="theory",
        help="confidence radii beta_t: theory (Theorem 1's radius, eq. 36), order (eq. 27's "
        "order-form radius, constants dropped) or fixed numbers >= 0 (default theory)",
    )
    s.add_argument(
        "--S-grid",
        default=None,
        help="the learners' parameter bound S as a grid axis, e.g. 2,4,8 (default: one value, "
        "--S or the setting's; on classification data each recipe's own S)",
    )
    s.add_argument("--scale-grid", default="1", help="BCO step-size scales (default 1)")
    s.add_argument("--rounds", type=int, default=200, help="T (default 200)")
    s.add_argument("--trials", type=int, default=10, help="tuning seeds (default 10)")
    s.add_argument("--eval-trials", type=int, default=10, help="evaluation seeds (default 10)")
    s.add_argument(
        "--select",
        default="each",
        help="each: the best grid point per (learner, setting); across: one point per learner, "
        "the least mean over settings of regret / that setting's best (how the tuned recipes "
        "of bandits_jax.mlogb.recipes are chosen)",
    )
    s.add_argument("--no-shard", action="store_true", help="one device even if more exist")
    s.add_argument("--compare-loop", action="store_true", help="also time the same runs one by one")
    s.add_argument(
        "--max-memory",
        default="auto",
        help="memory budget per device of one compiled call, in bytes (suffix K, M, G, T: "
        "powers of 1024) or auto (90%% of a GPU's memory limit, half the physical memory on "
        "CPU); runs that do not fit are played in batches (default auto)",
    )
    s.add_argument(
        "--microbatch",
        type=int,
        default=None,
        help="play each device's runs as slices of this many (lax.map over vmap): the table then "
        "does not depend on how the runs are batched, bit for bit (default: one vmap over all)",
    )


_BYTE_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_bytes(text: Any) -> int | str | None:
    """``--max-memory``: ``"auto"``, or a positive byte count with an optional K/M/G/T suffix
    (powers of 1024, e.g. ``512M``); ``None`` if it is neither."""
    t = str(text).strip()
    if t == "auto":
        return "auto"
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", t, flags=re.IGNORECASE)
    if m is None:
        return None
    value = int(float(m.group(1)) * _BYTE_SUFFIX[m.group(2).upper()])
    return value if value >= 1 else None


def _family(setting: str) -> str:
    m = opt.BCO_SETTING.fullmatch(setting)
    return "mlogb" if m is None else bco_cmd.SETTING_FAMILY[m.group(1)]


def _learner_family(name: str) -> str:
    return "mlogb" if name in recipes.KINDS else bco_cmd.BCO_LEARNERS[name].family


def validate(args: argparse.Namespace) -> None:
    """Checks every option of ``sweep`` before any work (:class:`~.options.UsageError`)."""
    errors: list[str] = []
    opt.check_common(args, errors)  # --rounds and --trials too
    opt.check_int(errors, args.eval_trials, "--eval-trials", minimum=0)
    if args.select not in ("each", "across"):
        errors.append(f"--select: expected each or across, got {args.select!r}")
    if args.eval_trials is not None and args.trials is not None:
        if args.trials > opt.EVAL_SEED_OFFSET:
            errors.append(f"--trials: at most {opt.EVAL_SEED_OFFSET} (evaluation seeds follow)")
    settings = opt.split_list(args.settings)
    if not settings:
        errors.append("--settings: expected a non-empty comma list")
    for name in settings:
        if (err := opt.check_setting(name, bco=True)) is not None:
            errors.append(err)
    learners = opt.split_list(args.learners)
    if not learners:
        errors.append("--learners: expected a non-empty comma list")
    known = [*recipes.KINDS, *bco_cmd.BCO_LEARNERS]
    for name in learners:
        if name not in known:
            errors.append(f"--learners: unknown learner {name!r}, expected one of {known}")
    ls = opt.check_float_list(errors, args.l_grid, "--l-grid")
    es = opt.check_float_list(errors, args.e_grid, "--e-grid")
    betas = opt.split_list(args.beta_grid)
    if not betas:
        errors.append(f"--beta-grid: expected a non-empty comma list, got {args.beta_grid!r}")
    for b in betas:
        opt.check_beta(errors, b, "--beta-grid")
    scales = opt.check_float_list(errors, args.scale_grid, "--scale-grid", positive=True)
    bounds = (
        [None]
        if args.S_grid is None
        else opt.check_float_list(errors, args.S_grid, "--S-grid", positive=True)
    )
    if args.S_grid is not None and args.S is not None:
        errors.append("--S-grid: give --S or --S-grid, not both")
    if args.microbatch is not None:
        opt.check_int(errors, args.microbatch, "--microbatch", minimum=1)
    args.max_bytes = parse_bytes(args.max_memory)
    if args.max_bytes is None:
        errors.append(
            "--max-memory: expected a positive byte count (e.g. 2000000000 or 2G) or auto, "
            f"got {args.max_memory!r}"
        )
    pairs = []
    if not errors:
        fams = {_family(s) for s in settings}
        for lname in learners:
            fam = _learner_family(lname)
            if fam not in fams:
                errors.append(
                    f"--learners: {lname!r} has no setting of its family ({fam}) in --settings"
                )
        pairs = [(l_, s) for s in settings for l_ in learners if _learner_family(l_) == _family(s)]
        if "mnist" in settings or args.mnist is not None:
            opt.check_mnist(errors, args.mnist)
    opt.finish(errors, args)
    args.plan = {
        "ls": ls,
        "es": es,
        "betas": betas,
        "bounds": bounds,
        "scales": scales,
        "pairs": pairs,
    }


# ----------------------------------------------------------------------------- experiments


def experiments(args: argparse.Namespace, T: int, dtype: Any) -> list:
    """The sweep's experiments: one per (learner, setting) pair of the same family."""
    import jax
    import jax.numpy as jnp

    from bandits_jax import mlogb
    from bandits_jax.bco import rounds as bint
    from bandits_jax.sim import sweep

    plan = args.plan
    lg = sweep.grid_product(l=plan["ls"], e=plan["es"])
    betas = plan["betas"]
    exps, settings = [], {}
    for lname, sname in plan["pairs"]:
        m = opt.BCO_SETTING.fullmatch(sname)
        if m is not None:
            env = bco_cmd.make_env(
                bco_cmd.SETTING_FAMILY[m.group(1)], int(m.group(2)), T, dtype=dtype
            )
            learner = bco_cmd.bco_learner(lname, env.d)
            hps = [bco_cmd.hyperparams(lname, learner, env, T, s) for s in plan["scales"]]
            exps.append(
                sweep.Experiment(
                    lname,
                    sname,
                    bint.interact(learner, env),
                    learner.init,
                    sweep.stack_trees(hps),
                    {"scale": np.asarray(plan["scales"])},
                    env.init,
                    regret=lambda mt: mt.loss - mt.comparator_loss,
                )
            )
            continue
        if sname not in settings:
            settings[sname] = rep.make_setting(sname, S=args.S, dtype=dtype, mnist_path=args.mnist)
        setting = settings[sname]
        K, d = setting.num_outcomes, setting.dim
        if not rep.supports(lname, K):
            continue  # ECOLog: K = 1 only (the summary's chosen points list what ran)
        bounds = [rep.learner_bound(args, setting) if S is None else S for S in plan["bounds"]]
        points = [
            rep.Recipe(
                K, d, S, T, lg["l"], lg["e"], opt.beta_arg(b), rep.env_rewards(setting), dtype
            )  # fmt: skip
            for S in bounds
            for b in betas
        ]
        hp = jax.tree_util.tree_map(
            lambda *xs: jnp.concatenate(xs, axis=0),
            *[rep.learner_hparams(lname, r) for r in points],
        )
        m_ = rep.learner_sketch(args.sketch, K, d, lname)
        n_lg, n_b = lg["l"].size, len(betas)
        grid = {
            "l": np.tile(lg["l"], n_b * len(bounds)),
            "e": np.tile(lg["e"], n_b * len(bounds)),
            "beta": np.tile(np.repeat(np.asarray(betas, dtype=str), n_lg), len(bounds)),
        }
        if plan["bounds"] != [None]:
            grid["S"] = np.repeat(np.asarray(bounds, float), n_b * n_lg)
        learner = rep.make_learner(lname, K, d, m_, T)
        exps.append(
            sweep.Experiment(
                rep.learner_row(lname).label,
                sname,
                mlogb.interact(learner, setting.env),
                learner.init,
                hp,
                grid,
                setting.env.init,
                init_env_trial=setting.init_env_trial,
            )
        )
    return exps


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
            for n in range(len(seeds)):
                ls = exp.init_learner(hp)
                es = exp.init_env(env_keys[n])
                t0 = time.perf_counter()
                jax.block_until_ready(exe(ls, es, run_keys[n]))
                run_s += time.perf_counter() - t0
                runs += 1
    return {"runs": runs, "run_seconds": run_s, "compile_seconds": compile_s}


def run(args: argparse.Namespace) -> int:
    """Runs ``sweep``: the tuning and evaluation sweeps, figures, tables and summary;
    returns the exit status."""
    import jax

    from bandits_jax.sim import sharding

    from . import dtype_of

    out = pathlib.Path(args.out)
    T = args.rounds
    dtype = dtype_of(args)
    exps = experiments(args, T, dtype)
    mesh = sharding.run_mesh() if (jax.device_count() > 1 and not args.no_shard) else None
    tune_seeds = list(range(args.seed, args.seed + args.trials))
    off = args.seed + opt.EVAL_SEED_OFFSET
    eval_seeds = list(range(off, off + args.eval_trials))
    total_runs = sum(e.grid_size for e in exps) * len(tune_seeds)
    _announce(args, exps, mesh, total_runs, tune_seeds, eval_seeds, T)
    res = _tune(args, exps, mesh, tune_seeds, eval_seeds, T, dtype)
    timing = _timing(args, exps, res.tuning_sweep, total_runs, tune_seeds, T)
    _write(args, out, res, timing, tune_seeds, eval_seeds, T)
    return 0


def _announce(args, exps: list, mesh, total_runs: int, tune_seeds: list, eval_seeds: list, T: int):
    """Says what the sweep plays: experiments, grid sizes, seeds, runs and devices."""
    from . import say

    sizes = sorted({e.grid_size for e in exps})
    say(
        args,
        f"sweep: {len(exps)} experiments (learners x settings) x {'/'.join(map(str, sizes))} "
        f"grid points x {len(tune_seeds)} tuning seeds = {total_runs} runs of {T} rounds in one "
        f"compiled call per chunk, on {1 if mesh is None else mesh.size} device(s)"
        + (
            f"; then the best point of each on {len(eval_seeds)} evaluation seeds"
            if eval_seeds
            else ""
        ),
    )


def _tune(args, exps: list, mesh, tune_seeds: list[int], eval_seeds: list[int], T: int, dtype):
    """The tuning sweep and, with evaluation seeds, the chosen points' evaluation sweep
    (:func:`bandits_jax.sim.sweep.tune_and_evaluate`, points chosen by ``--select``), each with
    a bar of its trial-rounds (run_sweep adds any padding runs) and checkpoints under
    ``OUT/checkpoints/sweep``."""
    import jax

    from bandits_jax.sim import sweep
    from bandits_jax.sim.chunks import Progress

    def choose(tune) -> list[int]:
        finals = [np.asarray(r.metrics["regret"]).sum(-1).mean(-1) for r in tune.experiments]
        learners = [r.learner for r in tune.experiments]
        return tables.choose_grid_points(learners, finals, across=args.select == "across")

    def bar(split: str, runs: int) -> Progress:
        return Progress(runs * T, f"{split} ({runs} runs)", enabled=not args.quiet)

    return sweep.tune_and_evaluate(
        exps,
        num_rounds=T,
        tuning_seeds=tune_seeds,
        eval_seeds=eval_seeds,
        chooser=choose,
        progress_for=bar,
        fields=SWEEP_FIELDS,
        columns=exploration_columns,
        checkpoint_dir=pathlib.Path(args.out) / "checkpoints" / "sweep",
        mesh=mesh,
        chunk_size=opt.chunk_size(T, args.chunk),
        max_bytes=args.max_bytes,
        microbatch=args.microbatch,
        resume=args.resume,
        config={
            "dtype": jax.numpy.dtype(dtype).name,
            "S": args.S,
            "S_grid": args.S_grid,
            "m": args.sketch,
        },
    )


def _timing(args, exps: list, tune, total_runs: int, tune_seeds: list[int], T: int) -> dict:
    """The tuning sweep's timings (one compiled call) and, with ``--compare-loop``, those of
    the same runs one by one."""
    from . import say

    timing = {
        "runs": total_runs,
        "one_call_run_seconds": tune.run_seconds,
        "one_call_compile_seconds": tune.compile_seconds,
        "devices": tune.devices,
    }
    if args.compare_loop:
        say(args, "timing the same runs one by one ...")
        loop = _loop_timing(exps, tune_seeds, T)
        timing.update(
            loop_run_seconds=loop["run_seconds"], loop_compile_seconds=loop["compile_seconds"]
        )
    return timing


def _write(args, out: pathlib.Path, res, timing: dict, tune_seeds, eval_seeds, T: int) -> None:
    """Writes ``sweep.csv``, ``sweep.json``, the figures and ``sweep_summary.txt`` (also
    printed), then lists what was written."""
    from bandits_jax.cli import plotting

    from . import compile_cache_report, compile_cache_text, write_outputs

    tune, ev = res.tuning_sweep, res.evaluation_sweep
    rows = res.tuning + res.evaluation
    points = [(r.learner, r.env, {k: _plain(v[g]) for k, v in r.grid.items()})
              for r, g in zip(tune.experiments, res.chosen, strict=True)]  # fmt: skip
    sweeps = [("tuning", tune)] + ([("evaluation", ev)] if eval_seeds else [])
    cache = compile_cache_report(args)
    output.write_csv(out / "sweep.csv", rows)
    output.write_json(
        out / "sweep.json",
        {
            "rounds": T,
            "tuning_seeds": tune_seeds,
            "eval_seeds": eval_seeds,
            "timing": timing,
            "select": args.select,
            "chosen": res.chosen,
            "memory": {name: r.memory for name, r in sweeps},
            "chosen_points": [{"learner": lr, "env": env, **grid} for lr, env, grid in points],
            "rows": rows,
            "compile_cache": cache,
        },
    )
    written = [out / "sweep.csv", out / "sweep.json"]
    if args.plots:
        written += _figures(out, tune, args.plan, plotting)
    summary = tables.sweep_summary(res.tuning, res.evaluation, timing, T, args.plan["betas"])
    summary += tables.chosen_summary(points, args.select)
    summary += memory_summary(sweeps)
    summary += compile_cache_text(cache)
    (out / "sweep_summary.txt").write_text(summary)
    written.append(out / "sweep_summary.txt")
    print("\n" + summary)
    write_outputs(out, written)


def _fmt_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


def memory_summary(sweeps: list[tuple[str, Any]]) -> str:
    """Lines of the summary on memory: per sweep, the static peak of its compiled call, bytes per
    run, the batches it was played in (and any out-of-memory retry); per experiment its carry."""
    lines = ["", "Memory (XLA's static figure per device of one compiled chunk call: arguments + "
             "outputs + temporaries - donated; measured where the device reports it):"]  # fmt: skip
    for name, res in sweeps:
        mem = res.memory
        if mem is None:
            continue
        budget = mem["budget_bytes"]
        lines.append(
            f"  {name}: peak {_fmt_bytes(mem['peak_bytes'])} per call"
            + (" (estimated)" if mem["estimated"] else "")
            + f", {_fmt_bytes(mem['bytes_per_run'])} per run; batches: {mem['batches']} of "
            f"{mem['runs']} runs ({mem['runs_per_batch']} per batch, budget "
            f"{'none' if budget is None else _fmt_bytes(budget)})"
            + (
                ""
                if mem["measured_peak_bytes"] is None
                else f"; measured device peak {_fmt_bytes(mem['measured_peak_bytes'])}"
            )
        )
        lines += [f"    note: {note}" for note in mem["notes"]]
        for r in res.experiments:
            m = r.memory
            lines.append(
                f"    {r.learner} {r.env}: {m['runs']} runs, state "
                f"{_fmt_bytes(m['state_bytes_per_run'])} per run ({_fmt_bytes(m['state_bytes'])})"
            )
    return "\n".join(lines) + "\n"


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def _figures(out: pathlib.Path, tune, plan: dict, plotting) -> list[pathlib.Path]:
    """(l, e) heatmaps per MLogB experiment and (S, beta) block of its grid (S-major, then beta,
    then (l, e): see :func:`experiments`); BCO experiments are in the tables."""
    ls, es = plan["ls"], plan["es"]
    reg_panels, ratio_panels = [], []
    nl, ne = len(ls), len(es)
    for r in tune.experiments:
        if "l" not in r.grid:
            continue
        final = np.asarray(r.metrics["regret"], np.float64).sum(-1).mean(-1)
        ratio = bonus_ratio(r.metrics)
        for k in range(final.size // (nl * ne)):
            sl = slice(k * nl * ne, (k + 1) * nl * ne)
            S = f" S={r.grid['S'][sl][0]:g}" if "S" in r.grid else ""
            title = f"{r.learner} {r.env} beta={r.grid['beta'][sl][0]}{S}"
            reg_panels.append((title, final[sl].reshape(nl, ne)))
            if ratio is not None:
                ratio_panels.append((title, ratio[sl].reshape(nl, ne)))
    paths = []
    if reg_panels:
        paths.append(out / "sweep_regret.png")
        plotting.heatmap_figure(reg_panels, ls, es, paths[-1], cbar_label="mean final regret")
    if ratio_panels:
        paths.append(out / "sweep_exploration.png")
        plotting.heatmap_figure(
            ratio_panels, ls, es, paths[-1], cbar_label="bonus/estimate spread", log10=True
        )
    return paths
