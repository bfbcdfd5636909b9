"""``bandits-jax sweep``: learners x hyperparameter grid x trials x settings (names of
:func:`bandits_jax.envs.make`) in one compiled call, sharded over all devices, tuned honestly
(best configuration on tuning seeds, reported on evaluation seeds). MLogB learners take the
(l, e, beta) grid on MLogB settings; BCO presets take ``--scale-grid`` on the BCO settings of
their family (their table reports the dynamic regret, eq. 5.1).
"""

from __future__ import annotations

import argparse
import pathlib
import re
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax import envs, mlogb
from bandits_jax.bco import PRESETS
from bandits_jax.bco import rounds as bint
from bandits_jax.cli import bco as bco_cmd
from bandits_jax.cli import options as opt
from bandits_jax.cli import output, plotting, process, tables
from bandits_jax.cli import reproduce as rep
from bandits_jax.mlogb import recipes
from bandits_jax.mlogb.exploration import SWEEP_FIELDS, bonus_ratio, exploration_columns
from bandits_jax.sim import chunks, sharding, sweep
from bandits_jax.sim.runner import rollout

LEARNERS = (*recipes.KINDS, *PRESETS)
_GRID = ",".join(f"{v:g}" for v in opt.PAPER_GRID)
FULL = {"rounds": 200, "trials": 10, "eval_trials": 10, "settings": "synth-20-1",
        "learners": "eofd-paper", "l_grid": _GRID, "e_grid": _GRID, "beta_grid": "theory",
        "scale_grid": "1"}  # fmt: skip
OPTION_HELP = {
    "--trials": "tuning seeds (default 10)",
    "--l-grid": f"l values (default the paper's {_GRID})",
    "--e-grid": f"e values (default the paper's {_GRID})",
    "--learners": f"comma list of {', '.join(recipes.KINDS)} and the BCO learners "
    f"{', '.join(PRESETS)} (default eofd-paper)",
}


def add_arguments(s: argparse.ArgumentParser) -> None:
    """Adds ``sweep``'s own options to its subparser."""
    s.add_argument("--S-grid", help="the learners' parameter bound S as a grid axis, e.g. 2,4,8 "
                   "(default: one value, --S or the setting's; on classification data each "
                   "recipe's own S)")  # fmt: skip
    s.add_argument("--select", default="each", choices=("each", "across"), help="each: the "
                   "best grid point per (learner, setting); across: one point per learner, the "
                   "least mean over settings of regret / that setting's best (how the tuned "
                   "recipes of bandits_jax.mlogb.recipes are chosen)")  # fmt: skip
    s.add_argument("--no-shard", action="store_true", help="one device even if more exist")
    s.add_argument("--compare-loop", action="store_true", help="also time the same runs one by one")
    s.add_argument("--max-memory", default="auto", help="memory budget per device of one "
                   "compiled call, in bytes (suffix K, M, G, T: powers of 1024) or auto (90%% of "
                   "a GPU's memory limit, half the physical memory on CPU); runs that do not fit "
                   "are played in batches (default auto)")  # fmt: skip
    s.add_argument("--microbatch", type=int, help="play each device's runs as slices of this "
                   "many (lax.map over vmap): the table then does not depend on how the runs are "
                   "batched, bit for bit (default: one vmap over all)")  # fmt: skip


_BYTE_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_bytes(text: Any) -> int | str | None:
    """``--max-memory``: ``"auto"``, or a positive byte count with an optional K/M/G/T suffix
    (powers of 1024, e.g. ``512M``); ``None`` if it is neither."""
    t = str(text).strip()
    if t == "auto":
        return "auto"
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?", t, flags=re.IGNORECASE)
    value = 0 if m is None else int(float(m.group(1)) * _BYTE_SUFFIX[m.group(2).upper()])
    return value if value >= 1 else None


def _family(name: str) -> str:
    """A learner's or a setting's family: ``mlogb``, ``convex`` or ``strongly_convex``."""
    if name in PRESETS:
        return PRESETS[name].family
    if name in recipes.KINDS:
        return "mlogb"
    family = envs.parse(name).family
    return family if family in envs.registry.BCO_FAMILIES else "mlogb"


def validate(args: argparse.Namespace) -> None:
    """Checks every option of ``sweep`` before any work (:class:`~.options.UsageError`)."""
    errors: list[str] = []
    opt.fill_defaults(args, FULL)
    opt.check_common(args, errors)
    opt.check_int(errors, args.eval_trials, "--eval-trials", minimum=0)
    if args.trials > opt.EVAL_SEED_OFFSET:
        errors.append(f"--trials: at most {opt.EVAL_SEED_OFFSET} (evaluation seeds follow)")
    settings = opt.check_settings(errors, args.settings, bco=True)
    learners = opt.check_learners(errors, args.learners, LEARNERS)
    ls = opt.check_float_list(errors, args.l_grid, "--l-grid")
    es = opt.check_float_list(errors, args.e_grid, "--e-grid")
    betas = opt.split_list(args.beta_grid)
    if not betas:
        errors.append(f"--beta-grid: expected a non-empty comma list, got {args.beta_grid!r}")
    for b in betas:
        opt.check_beta(errors, b, "--beta-grid")
    scales = opt.check_float_list(errors, args.scale_grid, "--scale-grid", positive=True)
    bounds = [None]
    if args.S_grid is not None:
        bounds = opt.check_float_list(errors, args.S_grid, "--S-grid", positive=True)
        if args.S is not None:
            errors.append("--S-grid: give --S or --S-grid, not both")
    opt.check_int(errors, args.microbatch, "--microbatch", minimum=1)
    args.max_bytes = parse_bytes(args.max_memory)
    if args.max_bytes is None:
        errors.append("--max-memory: expected a positive byte count (e.g. 2000000000 or 2G) or "
                      f"auto, got {args.max_memory!r}")  # fmt: skip
    pairs = []
    if not errors:
        families = {_family(s) for s in settings}
        for lname in learners:
            if _family(lname) not in families:
                errors.append(f"--learners: {lname!r} has no setting of its family "
                              f"({_family(lname)}) in --settings")  # fmt: skip
        pairs = [(lr, s) for s in settings for lr in learners if _family(lr) == _family(s)]
        mlogb = [n for n in learners if n in recipes.KINDS]
        none = "no MLogB learner in --learners"
        opt.refuse_unused(errors, args, {} if mlogb else dict.fromkeys(
            ("l_grid", "e_grid", "beta_grid", "S_grid", "S", "sketch", "mnist"), none))  # fmt: skip
        if not any(recipes.REGISTRY[n].sketched for n in mlogb):
            opt.refuse_unused(errors, args, {"sketch": "no sketched learner in --learners"})
        if len(mlogb) == len(learners):
            opt.refuse_unused(errors, args, {"scale_grid": "no BCO learner in --learners"})
        if "mnist" in settings:
            opt.check_mnist(errors, args.mnist)
        elif mlogb:
            opt.refuse_unused(errors, args, {"mnist": "no mnist in --settings"})
    opt.finish(errors, args)
    args.plan = {"ls": ls, "es": es, "betas": betas, "bounds": bounds, "scales": scales,
                 "pairs": pairs}  # fmt: skip


def experiments(args: argparse.Namespace, T: int, dtype: Any) -> list:
    """The sweep's experiments: one per (learner, setting) pair of the same family."""
    plan = args.plan
    lg = sweep.grid_product(l=plan["ls"], e=plan["es"])
    betas, bounds = plan["betas"], plan["bounds"]
    exps, settings = [], {}
    for lname, sname in plan["pairs"]:
        if lname in PRESETS:
            env = envs.make(sname, horizon=T, dtype=dtype).env
            learner, hps = bco_cmd.preset(lname, env, T, plan["scales"])
            exps.append(sweep.Experiment(
                lname, sname, bint.interact(learner, env), learner.init, sweep.stack_trees(hps),
                {"scale": np.asarray(plan["scales"])}, env.init,
                regret=lambda mt: mt.loss - mt.comparator_loss,
            ))  # fmt: skip
            continue
        if sname not in settings:
            settings[sname] = rep.build_setting(args, sname, dtype)
        setting = settings[sname]
        K, d = setting.num_outcomes, setting.dim
        if not rep.supports(lname, K):
            continue  # ECOLog: K = 1 only (the summary's chosen points list what ran)
        known = args.S if args.S is not None else setting.S
        Ss = [known if S is None else S for S in bounds]
        rewards = rep.env_rewards(setting)
        hp = jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs, axis=0), *[
            recipes.hparams_for(lname, num_outcomes=K, dim=d, S=S, horizon=T, l=lg["l"],
                                e=lg["e"], beta=opt.beta_arg(b), rewards=rewards, dtype=dtype)
            for S in Ss for b in betas
        ])  # fmt: skip
        n_lg, n_b = lg["l"].size, len(betas)
        grid = {
            "l": np.tile(lg["l"], n_b * len(Ss)),
            "e": np.tile(lg["e"], n_b * len(Ss)),
            "beta": np.tile(np.repeat(np.asarray(betas, dtype=str), n_lg), len(Ss)),
        }
        if bounds != [None]:
            grid["S"] = np.repeat(np.asarray(Ss, float), n_b * n_lg)
        m = rep.learner_sketch(args.sketch, K, d, lname)
        learner = recipes.make_learner(lname, num_outcomes=K, dim=d, sketch_size=m, horizon=T)
        exps.append(sweep.Experiment(
            recipes.REGISTRY[lname].label, sname, mlogb.interact(learner, setting.env),
            learner.init, hp, grid, setting.env.init, init_env_trial=setting.init_env_trial,
        ))  # fmt: skip
    return exps


def _loop_timing(exps, seeds: list[int], T: int) -> dict:
    """Wall time of the same runs one by one: one compiled single-run scan per experiment,
    called once per (grid point, seed)."""
    env_keys, run_keys = sweep.seed_keys(seeds)
    run_s = compile_s = 0.0
    runs = 0
    for exp in exps:
        fn = jax.jit(lambda ls, es, k, step=exp.step: rollout(step, ls, es, k, T))
        hp0 = jax.tree_util.tree_map(lambda x: x[0], exp.hparams)
        t0 = time.perf_counter()
        exe = fn.lower(exp.init_learner(hp0), exp.init_env(env_keys[0]), run_keys[0]).compile()
        compile_s += time.perf_counter() - t0
        for g in range(exp.grid_size):
            hp = jax.tree_util.tree_map(lambda x, g=g: x[g], exp.hparams)
            for n in range(len(seeds)):
                ls, es = exp.init_learner(hp), exp.init_env(env_keys[n])
                t0 = time.perf_counter()
                jax.block_until_ready(exe(ls, es, run_keys[n]))
                run_s += time.perf_counter() - t0
                runs += 1
    return {"runs": runs, "run_seconds": run_s, "compile_seconds": compile_s}


def run(args: argparse.Namespace) -> int:
    """Runs ``sweep``: the tuning and evaluation sweeps, figures, tables and summary."""
    T, dtype = args.rounds, output.dtype_of(args)
    exps = experiments(args, T, dtype)
    mesh = sharding.run_mesh() if (jax.device_count() > 1 and not args.no_shard) else None
    tune_seeds = list(range(args.seed, args.seed + args.trials))
    off = args.seed + opt.EVAL_SEED_OFFSET
    eval_seeds = list(range(off, off + args.eval_trials))
    total = sum(e.grid_size for e in exps) * len(tune_seeds)
    sizes = "/".join(map(str, sorted({e.grid_size for e in exps})))
    then = f"; then the best point of each on {len(eval_seeds)} evaluation seeds"
    output.say(args, f"sweep: {len(exps)} experiments (learners x settings) x {sizes} grid "
                     f"points x {len(tune_seeds)} tuning seeds = {total} runs of {T} rounds in "
                     f"one compiled call per chunk, on {1 if mesh is None else mesh.size} "
                     "device(s)" + (then if eval_seeds else ""))  # fmt: skip
    res = sweep.tune_and_evaluate(
        exps, num_rounds=T, tuning_seeds=tune_seeds, eval_seeds=eval_seeds,
        chooser=sweep.choose_across if args.select == "across" else None,
        progress_for=lambda split, runs: chunks.Progress(runs * T, f"{split} ({runs} runs)",
                                                  enabled=not args.quiet),
        fields=SWEEP_FIELDS, columns=exploration_columns,
        checkpoint_dir=pathlib.Path(args.out) / "checkpoints" / "sweep", mesh=mesh,
        chunk_size=opt.chunk_size(T, args.chunk), max_bytes=args.max_bytes,
        microbatch=args.microbatch, resume=args.resume,
        config={"dtype": jax.numpy.dtype(dtype).name, "S": args.S, "S_grid": args.S_grid,
                "m": args.sketch, "xla": process.numeric_flags()},
    )  # fmt: skip
    tune = res.tuning_sweep
    timing = {"runs": total, "one_call_run_seconds": tune.run_seconds, "devices": tune.devices,
              "one_call_compile_seconds": tune.compile_seconds}  # fmt: skip
    if args.compare_loop:
        output.say(args, "timing the same runs one by one ...")
        loop = _loop_timing(exps, tune_seeds, T)
        timing.update(loop_run_seconds=loop["run_seconds"],
                      loop_compile_seconds=loop["compile_seconds"])  # fmt: skip
    _write(args, res, timing, tune_seeds, eval_seeds, T)
    return 0


def _write(args, res, timing: dict, tune_seeds, eval_seeds, T: int) -> None:
    """Writes ``sweep.csv``, ``sweep.json``, the figures and ``sweep_summary.txt``."""
    tune, ev = res.tuning_sweep, res.evaluation_sweep
    rows = res.tuning + res.evaluation
    points = [(r.learner, r.env, {k: _plain(v[g]) for k, v in r.grid.items()})
              for r, g in zip(tune.experiments, res.chosen, strict=True)]  # fmt: skip
    sweeps = [("tuning", tune)] + ([("evaluation", ev)] if eval_seeds else [])
    report = {
        "rounds": T, "tuning_seeds": tune_seeds, "eval_seeds": eval_seeds, "timing": timing,
        "select": args.select, "chosen": res.chosen,
        "memory": {name: r.memory for name, r in sweeps},
        "chosen_points": [{"learner": lr, "env": env, **grid} for lr, env, grid in points],
        "rows": rows,
    }  # fmt: skip
    figures = _figures(pathlib.Path(args.out), tune, args.plan) if args.plots else []
    summary = tables.sweep_summary(res.tuning, res.evaluation, timing, T, args.plan["betas"])
    summary += tables.chosen_summary(points, args.select) + memory_summary(sweeps)
    output.finish(args, "sweep", report, rows, summary, figures)


def _fmt_bytes(n: float | None) -> str:
    for unit in ("B", "KiB", "MiB", "GiB") if n is not None else ():
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return "-"


def memory_summary(sweeps: list[tuple[str, Any]]) -> str:
    """Lines of the summary on memory: per sweep, the static peak of its compiled call, bytes per
    run, the batches it was played in (and any out-of-memory retry); per experiment its carry."""
    lines = ["", "Memory (XLA's static figure per device of one compiled chunk call: arguments + "
             "outputs + temporaries - donated; measured where the device reports it):"]  # fmt: skip
    for name, res in sweeps:
        if (m := res.memory) is None:
            continue
        budget = "none" if m["budget_bytes"] is None else _fmt_bytes(m["budget_bytes"])
        measured = m["measured_peak_bytes"]
        measured = "" if measured is None else f"; measured device peak {_fmt_bytes(measured)}"
        lines.append(f"  {name}: peak {_fmt_bytes(m['peak_bytes'])} per call"
                     + " (estimated)" * m["estimated"] + f", {_fmt_bytes(m['bytes_per_run'])} "
                     f"per run; batches: {m['batches']} of {m['runs']} runs "
                     f"({m['runs_per_batch']} per batch, budget {budget}){measured}")  # fmt: skip
        lines += [f"    note: {note}" for note in m["notes"]]
        lines += [f"    {r.learner} {r.env}: {r.memory['runs']} runs, state "
                  f"{_fmt_bytes(r.memory['state_bytes_per_run'])} per run "
                  f"({_fmt_bytes(r.memory['state_bytes'])})" for r in res.experiments]  # fmt: skip
    return "\n".join(lines) + "\n"


def _plain(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


def _figures(out: pathlib.Path, tune, plan: dict) -> list[pathlib.Path]:
    """(l, e) heatmaps per MLogB experiment and (S, beta) block of its grid (S-major, then beta,
    then (l, e): see :func:`experiments`); BCO experiments are in the tables."""
    ls, es = plan["ls"], plan["es"]
    nl, ne = len(ls), len(es)
    reg_panels, ratio_panels = [], []
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
        plotting.heatmap_figure(ratio_panels, ls, es, paths[-1],
                                cbar_label="bonus/estimate spread", log10=True)  # fmt: skip
    return paths
