"""``bandits-jax kappa``: final regret against the parameter bound S, i.e. against kappa.

The EOFD-MLogB paper (Remark 1) says the leading term of its regret does not grow with kappa
(``1 / sigma'(S) = 2 + e^S + e^-S``, ``S = ||W*||_F``), unlike a linear baseline's. The study
plays learners of the registry on the setting ``synth-D-K`` of ``envs.make`` at each S of
``--S-grid``, ``recipe`` (out of the box: the kind's known-bound point in ``recipes.RULES``) and
``tuned`` (per S: the (l, e, beta) grid point of least mean final regret on the tuning seeds;
grid points that give identical hyperparameters are played once), both reported on the same
evaluation seeds. S enters the stream only through ``W*`` and the learners only through their
hyperparameters, so one compiled step per learner serves the whole S grid.

Every (S, learner, mode) cell is a resumable unit in ``DIR/checkpoints/kappa/S<S>/<learner>/
<mode>``: ``identity.json`` (the options that define it, written first), its sweeps' chunk
checkpoints and, once done, ``result.json``. ``--resume`` reuses finished cells, continues an
interrupted one and refuses (one line, exit status 2, before any work) a cell made with other
options; learners or S values added on a resume are new cells.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import pathlib
import shutil
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax import envs, mlogb
from bandits_jax.cli import options as opt
from bandits_jax.cli import output, plotting, process, tables
from bandits_jax.cli import reproduce as rep
from bandits_jax.mlogb import recipes
from bandits_jax.mlogb.exploration import SWEEP_FIELDS, exploration_columns
from bandits_jax.sim import checkpoint, chunks, sharding, sweep

LEARNERS = recipes.KINDS
FULL = {"rounds": 2000, "trials": 4, "eval_trials": 10, "S_grid": "1,2,4,8", "dim": 20,
        "num_outcomes": 1, "l_grid": "-1,-0.5,0", "e_grid": "-0.5,0,0.5",
        "beta_grid": "0.01,0.1,1"}  # fmt: skip
QUICK = {**FULL, "rounds": 300, "trials": 2, "eval_trials": 3, "S_grid": "1,4,8"}
OPTION_HELP = {
    "--trials": f"tuning seeds (default {FULL['trials']}; quick {QUICK['trials']})",
    "--beta-grid": f"beta values, numbers >= 0 (default {FULL['beta_grid']})",
    "--learners": f"comma list of {', '.join(LEARNERS)} (default "
    f"{','.join(rep.DEFAULT_LEARNERS)}, those defined for K)",
}
MODES = ("recipe", "tuned")
VERSION = 1  # of the cell identity and result layout


def _grid_text(values: Sequence[float]) -> str:
    return ",".join(f"{v:g}" for v in values)


def kappa_bound(S: float) -> float:
    """``1 / sigma'(S) = 2 + e^S + e^-S``: the binary logit's kappa over ``||x|| <= 1``,
    ``||w|| <= S`` (the ``exp(S)`` scale the study is about)."""
    return 2.0 + math.exp(S) + math.exp(-S)


def add_arguments(k: argparse.ArgumentParser) -> None:
    """The ``kappa`` options (its shared groups leave out ``--S``/``--mnist``)."""
    k.add_argument("--S-grid", help="parameter bounds S = ||W*||_F (default "
                   f"{FULL['S_grid']}; quick {QUICK['S_grid']})")  # fmt: skip
    k.add_argument("--dim", type=int, help=f"dimension d (default {FULL['dim']})")
    k.add_argument("--num-outcomes", type=int, help="outcomes K (default 1)")
    # --no-tune first: a --config key "tune" then maps to --tune (true: tuned column on).
    k.add_argument("--no-tune", dest="tune", action="store_false", help="recipe column only")
    k.add_argument("--tune", dest="tune", action="store_true", default=True,
                   help="tuned column (default)")  # fmt: skip


def validate(args: argparse.Namespace) -> None:
    """Checks every option and resolves the study into ``args.plan``; raises ``UsageError``."""
    errors: list[str] = []
    opt.fill_defaults(args, FULL, QUICK)
    opt.check_common(args, errors)
    for value, option in ((args.eval_trials, "--eval-trials"), (args.dim, "--dim"),
                          (args.num_outcomes, "--num-outcomes")):  # fmt: skip
        opt.check_int(errors, value, option, minimum=1)
    if args.trials > opt.EVAL_SEED_OFFSET:
        errors.append(f"--trials: at most {opt.EVAL_SEED_OFFSET} (evaluation seeds follow)")
    S_grid = opt.check_float_list(errors, args.S_grid, "--S-grid", positive=True)
    K = max(args.num_outcomes, 1)
    if "learners" in args.given:
        learners = opt.check_learners(errors, args.learners, LEARNERS)
    else:
        learners = [n for n in rep.DEFAULT_LEARNERS if rep.supports(n, K)]
    errors += [f"--learners: {n} is defined for K = 1 only (--num-outcomes {K})"
               for n in learners if n in LEARNERS and not rep.supports(n, K)]  # fmt: skip
    if not any(n in LEARNERS and recipes.REGISTRY[n].sketched for n in learners):
        opt.refuse_unused(errors, args, {"sketch": "no sketched learner in --learners"})
    if not args.tune:
        tuned = ("l_grid", "e_grid", "beta_grid", "trials")
        opt.refuse_unused(errors, args, dict.fromkeys(tuned, "the tuned column is off (--no-tune)"))
    grid = {k: opt.check_float_list(errors, getattr(args, f"{k}_grid"), f"--{k}-grid")
            for k in ("l", "e", "beta")}  # fmt: skip
    if any(b < 0 for b in grid["beta"]):
        errors.append(f"--beta-grid: expected numbers >= 0, got {args.beta_grid!r}")
    for vals, option in ((S_grid, "--S-grid"), *((v, f"--{k}-grid") for k, v in grid.items())):
        opt.check_unique(errors, vals, option)
    opt.finish(errors, args)
    off = args.seed + opt.EVAL_SEED_OFFSET
    args.plan = {
        "T": args.rounds, "chunk": opt.chunk_size(args.rounds, args.chunk), "dim": args.dim,
        "K": args.num_outcomes, "S_grid": [float(s) for s in S_grid], "learners": learners,
        "modes": list(MODES) if args.tune else ["recipe"], "grid": grid,
        "tuning_seeds": list(range(args.seed, args.seed + args.trials)),
        "eval_seeds": list(range(off, off + args.eval_trials)),
    }  # fmt: skip


class Cell(NamedTuple):
    """One (S, learner, mode) unit of the study, its identity and its directory."""

    S: float
    learner: str
    mode: str
    identity: dict
    path: pathlib.Path


def cell_dir(root: pathlib.Path, S: float, learner: str, mode: str) -> pathlib.Path:
    """``root/S<repr(S)>/<learner>/<mode>`` (``repr``: distinct S values, distinct names)."""
    return root / f"S{float(S)!r}" / learner / mode


def recipe_point(name: str, S: float) -> tuple[float, float, Any]:
    """The (l, e, beta) a registry kind runs out of the box at the known bound ``S``."""
    p, _ = recipes.tuned_point(name, float(S), num_outcomes=1, dim=1)
    return float(p.l), float(p.e), p.beta if isinstance(p.beta, str) else float(p.beta)


def plan_cells(plan: dict, root: pathlib.Path, *, dtype: str, sketch: int | None,
               xla: Any = None) -> list[Cell]:  # fmt: skip
    """The study's cells, S-major, then learner, then mode, with their identities: every option
    that changes a cell's numbers (chunk size and XLA options included)."""
    K, d, cells = plan["K"], plan["dim"], []
    for S in plan["S_grid"]:
        for name in plan["learners"]:
            m = rep.learner_sketch(sketch, K, d, name)
            for mode in plan["modes"]:
                ident = {"version": VERSION, "S": S, "dim": d, "num_outcomes": K,
                         "rounds": plan["T"], "chunk": plan["chunk"], "dtype": dtype,
                         "learner": name, "sketch": m if recipes.REGISTRY[name].sketched else None,
                         "xla": xla, "mode": mode, "eval_seeds": plan["eval_seeds"]}  # fmt: skip
                if mode == "recipe":
                    ident["point"] = list(recipe_point(name, S))
                else:
                    ident.update(grid=plan["grid"], tuning_seeds=plan["tuning_seeds"])
                cells.append(Cell(S, name, mode, ident, cell_dir(root, S, name, mode)))
    return cells


def _read_json(path: pathlib.Path) -> dict:
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        rec = f"unreadable ({e})"
    if not isinstance(rec, dict):
        what = rec if isinstance(rec, str) else "not a kappa cell record"
        raise checkpoint.CheckpointError(f"{path}: {what}; start without --resume")
    return rec


def check_resume(cells: Sequence[Cell]) -> None:
    """Refuses (``CheckpointError``, one line) any cell whose saved identity is not this run's,
    before anything is played."""
    for c in cells:
        for name in ("result.json", "identity.json"):
            path = c.path / name
            if not path.is_file():
                continue
            rec = _read_json(path)
            have = rec.get("identity") if name == "result.json" else rec
            have = have if isinstance(have, dict) else {"identity": None}
            diff = [k for k in dict.fromkeys([*c.identity, *have])
                    if have.get(k) != c.identity.get(k)]  # fmt: skip
            if diff:
                what = "; ".join(f"{k} {json.dumps(have.get(k))} there, "
                                 f"{json.dumps(c.identity.get(k))} here"
                                 for k in diff[:3])  # fmt: skip
                raise checkpoint.CheckpointError(
                    f"{path}: made with other options ({what}): a resumed run is the run it "
                    "claims to be; resume with the same options or start without --resume"
                )


class _Learner(NamedTuple):
    """A registry learner with its compiled-once step (shared by every S and mode)."""

    kind: str
    learner: Any
    step: Any


_GAMES: dict[tuple, _Learner] = {}  # kept across calls in one process: executables are reused


def _learners(plan: dict, dtype: Any, sketch: int | None) -> dict[str, _Learner]:
    """One step per learner: the stream's round functions do not depend on S (only ``init``
    does, through ``W*``), so the step built on the S = 1 stream serves every S and both modes
    (equal batch shapes reuse one executable, as do later studies in the same process)."""
    K, d, T, out = plan["K"], plan["dim"], plan["T"], {}
    for name in plan["learners"]:
        m = rep.learner_sketch(sketch, K, d, name)
        key = (name, K, d, m, T, jnp.dtype(dtype).name)
        if key not in _GAMES:
            if len(_GAMES) >= 32:
                _GAMES.pop(next(iter(_GAMES)))
            env = envs.make(f"synth-{d}-{K}", S=1.0, dtype=dtype).env
            learner = recipes.make_learner(name, num_outcomes=K, dim=d, sketch_size=m, horizon=T)
            _GAMES[key] = _Learner(name, learner, mlogb.interact(learner, env))
        out[name] = _GAMES[key]
    return out


def _distinct(hp: Any) -> tuple[list[int], list[int]]:
    """``(first, unique)``: for each grid point the first point with identical hyperparameters,
    and those first points in order."""
    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(hp)]
    seen: dict[bytes, int] = {}
    first = [seen.setdefault(b"".join(x[g].tobytes() for x in leaves), g)
             for g in range(leaves[0].shape[0])]  # fmt: skip
    return first, sorted(set(first))


def play_cell(cell: Cell, game: _Learner, plan: dict, *, dtype: Any, common: dict,
              show_progress: bool = False) -> dict:  # fmt: skip
    """Plays one cell (its chunk checkpoints under ``cell.path``) and returns its record: the
    recipe mode its point on the evaluation seeds, the tuned mode the grid's distinct points on
    the tuning seeds and the best one on the evaluation seeds."""
    K, d, T, S = plan["K"], plan["dim"], plan["T"], cell.S
    t0 = time.perf_counter()
    hparams = functools.partial(recipes.hparams_for, game.kind, num_outcomes=K, dim=d, S=S,
                                horizon=T, dtype=dtype)  # fmt: skip
    if cell.mode == "recipe":
        l_, e_, b_ = recipe_point(game.kind, S)
        hp = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[None], hparams(l=l_, e=e_, beta=b_))
        grid = {"l": np.asarray([l_]), "e": np.asarray([e_]), "beta": np.asarray([str(b_)])}
        uniq = [0]
    else:  # the grid's distinct points, beta-major as sweep
        pg = plan["grid"]
        g = sweep.grid_product(beta=pg["beta"], l=pg["l"], e=pg["e"])
        hp = hparams(l=g["l"], e=g["e"], beta=g["beta"])
        first, uniq = _distinct(hp)
        hp = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[np.asarray(uniq)], hp)
        grid = {k: np.asarray(v)[uniq] for k, v in g.items()}
    env = envs.make(f"synth-{d}-{K}", S=S, dtype=dtype).env
    exp = sweep.Experiment(recipes.REGISTRY[game.kind].label, f"synth-{d}-{K} S={S:g}",
                           game.step, game.learner.init, hp, grid, env.init)  # fmt: skip
    tuning_runs = len(uniq) * len(plan["tuning_seeds"]) if cell.mode == "tuned" else 0
    kw = dict(num_rounds=T, config=cell.identity, fields=SWEEP_FIELDS, **common)
    with chunks.Progress((tuning_runs + len(plan["eval_seeds"])) * T, _cell_name(cell),
                  enabled=show_progress) as bar:  # fmt: skip
        if cell.mode == "recipe":
            ev = sweep.run_sweep([exp], seeds=plan["eval_seeds"], progress=bar,
                                 checkpoint_dir=cell.path / "evaluation", **kw)  # fmt: skip
            compile_s, point, tuning = ev.compile_seconds, {"l": l_, "e": e_, "beta": b_}, None
        else:
            res = sweep.tune_and_evaluate(
                [exp], tuning_seeds=plan["tuning_seeds"], eval_seeds=plan["eval_seeds"],
                checkpoint_dir=str(cell.path), columns=exploration_columns, progress=bar, **kw,
            )  # fmt: skip
            ev = res.evaluation_sweep
            compile_s = res.tuning_sweep.compile_seconds + ev.compile_seconds
            finals_u = np.asarray(res.tuning_sweep.experiments[0].metrics["regret"], np.float64)
            finals = finals_u.sum(-1)[[uniq.index(f) for f in first]]  # (grid, tuning seeds)
            chosen = uniq[res.chosen[0]]
            point = {k: float(v[chosen]) for k, v in g.items()}
            tuning = {"grid": {k: np.asarray(v).tolist() for k, v in g.items()},
                      "same_as": first, "final_regret": finals.tolist(),
                      "mean_final_regret": finals.mean(axis=1).tolist(), "chosen": int(chosen),
                      "distinct_points": len(uniq)}  # fmt: skip
    r = ev.experiments[0]
    final = np.asarray(r.metrics["regret"], np.float64).sum(-1)[0]  # (eval seeds,)
    row = sweep.table([r], columns=exploration_columns)[0]
    N = final.size
    std = float(final.std(ddof=1)) if N > 1 else 0.0
    seconds = sum(float(checkpoint.read_meta(p).get("run_seconds", 0.0))
                  for p in sorted((cell.path / "evaluation").rglob("state.npz")))  # fmt: skip
    return {
        "identity": cell.identity, "S": S, "learner": cell.learner,
        "label": recipes.REGISTRY[game.kind].label, "mode": cell.mode, "point": point,
        "final_regret": final.tolist(), "final_regret_mean": float(final.mean()),
        "final_regret_std": std, "final_regret_se": std / math.sqrt(N), "trials": int(N),
        "rounds": T, "ms_per_round": 1e3 * seconds / (T * N),  # every chunk's, restored included
        "compile_seconds": float(compile_s), "wall_seconds": time.perf_counter() - t0,
        "rejected": int(row.get("rejected", 0)),
        "status_counts": {k.removeprefix("status_"): v for k, v in row.items()
                          if k.startswith("status_")},
        "explore_rate": row.get("explore_rate"), "bonus_ratio": row.get("bonus_ratio"),
        "tuning": tuning, "kappa_bound": kappa_bound(S),
    }  # fmt: skip


def _cell_name(cell: Cell) -> str:
    """``S=<S> <learner> <mode>``: how bars and messages name a cell."""
    return f"S={cell.S:g} {cell.learner} {cell.mode}"


def csv_rows(cells: Sequence[dict]) -> list[dict]:
    """One row per cell: learner, S, mode, final regret mean and standard error, trials, ms per
    round, the point run (tuned: the chosen one), rejected updates and status counts."""
    keys = ("learner", "label", "S", "mode", "final_regret_mean", "final_regret_se", "trials",
            "rounds", "ms_per_round")  # fmt: skip
    return [{**{k: c[k] for k in keys}, **{k: c["point"][k] for k in ("l", "e", "beta")},
             "rejected": c["rejected"],
             **{f"status_{k}": v for k, v in c["status_counts"].items()}}
            for c in cells]  # fmt: skip


def growth(cells: Sequence[dict]) -> dict[str, dict[str, float | None]]:
    """Per learner and mode, ``regret(S_max) / regret(S_min)`` over the S values run."""
    out: dict[str, dict[str, float | None]] = {c["learner"]: {} for c in cells}
    for name in out:
        for mode in MODES:
            mine = sorted((c["S"], c["final_regret_mean"]) for c in cells
                          if c["learner"] == name and c["mode"] == mode)  # fmt: skip
            if len(mine) >= 2:
                out[name][mode] = tables.ratio(mine[-1][1], mine[0][1])
    return out


def _seed_range(seeds: Sequence[int]) -> str:
    return f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}..{seeds[-1]}"


def summary(report: dict, rows: Sequence[dict]) -> str:
    """The text summary: the table, the growth per learner and the update status."""
    cfg = report["config"]
    S, grid = sorted(cfg["S_grid"]), cfg["grid"]
    lines = [
        f"kappa study: final regret at T = {cfg['rounds']} vs S = ||W*||_F on synth-"
        f"{cfg['dim']}-{cfg['num_outcomes']} ({cfg['dtype']}), mean +- standard error over "
        f"{len(cfg['eval_seeds'])} evaluation seeds ({_seed_range(cfg['eval_seeds'])})"
    ]
    if "tuned" in cfg["modes"]:
        lines.append(f"  tuned: the (l, e, beta) point of the grid l={_grid_text(grid['l'])}, "
                     f"e={_grid_text(grid['e'])}, beta={_grid_text(grid['beta'])} with the least "
                     f"mean final regret on tuning seeds {_seed_range(cfg['tuning_seeds'])}, per "
                     "(learner, S)")  # fmt: skip
    lines.append("  recipe: the learner's tuned default point (out of the box)")
    cols = ("learner mode S l e beta final_regret_mean final_regret_se trials ms_per_round "
            "rejected").split()  # fmt: skip
    order = {n: i for i, n in enumerate(cfg["learners"])}
    shown = sorted(rows, key=lambda r: (order.get(r["learner"], 0), r["mode"], r["S"]))
    lines += ["", output.format_table(shown, cols), ""]
    if len(S) >= 2:
        k_growth = kappa_bound(S[-1]) / kappa_bound(S[0])
        lines.append(f"Growth from S = {S[0]:g} to S = {S[-1]:g}, regret(S_max) / regret(S_min) "
                     f"(kappa bound 1/sigma'(S) grows x{k_growth:.3g}):")  # fmt: skip
        for name, g in report["growth"].items():
            parts = [f"{mode} x{g[mode]:.3g}" if g.get(mode) is not None else f"{mode} -"
                     for mode in cfg["modes"]]  # fmt: skip
            lines.append(f"  {name:<14} " + ", ".join(parts))
    else:
        lines.append("Growth: one S value only")
    status = [{**r, "setting": f"S={r['S']:g} {r['mode']}", "max_steps": r.get("status_max_steps")}
              for r in rows]  # fmt: skip
    return "\n".join([*lines, "", *tables.status_lines(status)]) + "\n"


def figure_series(cells: Sequence[dict], learners: Sequence[str]) -> list[dict]:
    """The figure's curves: per learner and mode, S ascending, with the registry's colour."""
    series = []
    for name in learners:
        for mode in MODES:
            mine = sorted((c for c in cells if c["learner"] == name and c["mode"] == mode),
                          key=lambda c: c["S"])  # fmt: skip
            if mine:
                row = recipes.REGISTRY[name]
                series.append({"label": row.legend, "color": row.color, "mode": mode,
                               **{k: [c[f] for c in mine] for k, f in (
                                   ("S", "S"), ("mean", "final_regret_mean"),
                                   ("se", "final_regret_se"))}})  # fmt: skip
    return series


def run(args: argparse.Namespace) -> int:
    """Plays (or restores) every cell, then writes the figure, JSON, CSV and summary."""
    t_start, plan, dtype = time.perf_counter(), args.plan, output.dtype_of(args)
    out = pathlib.Path(args.out)
    dtype_name = jax.numpy.dtype(dtype).name
    cells = plan_cells(plan, out / "checkpoints" / "kappa", dtype=dtype_name, sketch=args.sketch,
                       xla=process.numeric_flags())  # fmt: skip
    if args.resume:
        check_resume(cells)  # before any work
    mesh = sharding.run_mesh() if jax.device_count() > 1 else None
    devices = 1 if mesh is None else mesh.size
    tuning = f", {len(plan['tuning_seeds'])} tuning seeds" if "tuned" in plan["modes"] else ""
    output.say(args, f"kappa: S in {_grid_text(plan['S_grid'])}, learners {plan['learners']}, "
                     f"modes {plan['modes']}, synth-{plan['dim']}-{plan['K']}, T = {plan['T']}, "
                     f"{len(plan['eval_seeds'])} evaluation seeds{tuning}, chunks of "
                     f"{plan['chunk']} rounds, {dtype_name}, {devices} device(s)")  # fmt: skip
    games = _learners(plan, dtype, args.sketch)
    common = {"mesh": mesh, "chunk_size": plan["chunk"], "resume": args.resume, "max_bytes": "auto"}
    results = []
    for cell in cells:
        done = cell.path / "result.json"
        if args.resume and done.is_file():
            results.append(_read_json(done))
            output.say(args, f"  {_cell_name(cell)}: restored")
            continue
        if not args.resume and cell.path.exists():
            shutil.rmtree(cell.path)  # a fresh run starts from nothing
        output.write_json(cell.path / "identity.json", cell.identity)
        rec = play_cell(cell, games[cell.learner], plan, dtype=dtype, common=common,
                        show_progress=not args.quiet)  # fmt: skip
        output.write_json(done, rec)
        results.append(rec)
        output.say(args, f"  {_cell_name(cell)}: final regret {rec['final_regret_mean']:.4g} +- "
                  f"{rec['final_regret_se']:.2g} ({rec['wall_seconds']:.1f} s, "
                  f"{rec['compile_seconds']:.1f} s compiling)")  # fmt: skip
    config = {k: plan["T" if k == "rounds" else k] for k in ("S_grid", "dim", "rounds", "chunk",
              "learners", "modes", "grid", "tuning_seeds", "eval_seeds")}  # fmt: skip
    config.update(num_outcomes=plan["K"], dtype=dtype_name, backend=jax.default_backend(),
                  sketch=args.sketch or recipes.sketch_size(plan["K"], plan["dim"]),
                  devices=devices, wall_seconds=time.perf_counter() - t_start)  # fmt: skip
    report = {"command": output.command_line(args), "config": config, "cells": results,
              "growth": growth(results)}  # fmt: skip
    figures = []
    if args.plots:
        S = plan["S_grid"]
        ref = {"S": S, "value": [kappa_bound(s) for s in S], "label": "kappa bound 1/sigma'(S)"}
        figures = [out / "kappa.png"]
        plotting.kappa_figure(figure_series(results, plan["learners"]), figures[0],
                              title=f"synth-{plan['dim']}-{plan['K']}, T = {plan['T']}",
                              reference=ref)  # fmt: skip
    rows = csv_rows(results)
    output.finish(args, "kappa", report, rows, summary(report, rows), figures)
    return 0
