"""``bandits-jax kappa``: final regret against the parameter bound S, i.e. against kappa.

The EOFD-MLogB paper (Remark 1) says the leading term of its regret does not grow with kappa,
which grows like ``exp(S)`` with the bound ``S = ||W*||_F`` (the binary logit's
``1 / sigma'(S) = 2 + e^S + e^-S``), unlike a linear baseline's. This study plays every learner of
the library's registry (:data:`~bandits_jax.mlogb.recipes.REGISTRY`) on Section 4's synthetic
stream (the setting ``synth-D-K`` of ``envs.make``, ``S`` given) for each S of ``--S-grid`` in two
modes:

* ``recipe`` (out of the box): the kind's known-bound point in
  :data:`~bandits_jax.mlogb.recipes.RULES` (the paper's kinds: Section 4's ``(0.75, 0.75,
  theory)``);
* ``tuned`` (per S, honestly): the (l, e, beta) grid point with the least mean final regret on
  the tuning seeds (``--seed`` ...), reported on the evaluation seeds
  (``--seed + EVAL_SEED_OFFSET`` ...), with :func:`bandits_jax.sim.sweep.tune_and_evaluate`.
  Grid points that give a learner identical hyperparameters (``e`` for LinUCB, ``beta`` for
  greedy, everything for uniform) are played once; the first of equal points stands for them.

Both modes report on the same evaluation seeds (common random numbers). S enters the stream only
through ``W*`` (drawn by the environment's ``init``) and the learners only through their
hyperparameters (state), so one compiled step per learner serves the whole S grid.

Every (S, learner, mode) cell is a resumable unit in ``DIR/checkpoints/kappa/S<S>/<learner>/
<mode>``: ``identity.json`` (the options that define it, written first), the chunk checkpoints of
its sweeps and, once done, ``result.json``. ``--resume`` reuses finished cells, continues an
interrupted one from its last chunk, and refuses (one error line, exit status 2, before any work)
a cell made with other options; learners or S values added on a resume are new cells.

Outputs: ``kappa.png``, ``kappa.json``, ``kappa.csv``, ``kappa_summary.txt``.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import pathlib
import shutil
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from bandits_jax.cli import options as opt
from bandits_jax.cli import output
from bandits_jax.cli import reproduce as rep
from bandits_jax.mlogb import recipes
from bandits_jax.mlogb.exploration import SWEEP_FIELDS, exploration_columns

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


def _unique(errors: list[str], values: Sequence[Any], option: str) -> None:
    dup = sorted({str(v) for v in values if list(values).count(v) > 1})
    if dup:
        errors.append(f"{option}: repeated value(s) {', '.join(dup)}")


def validate(args: argparse.Namespace) -> None:
    """Checks every option and resolves the study into ``args.plan``; raises ``UsageError``."""
    errors: list[str] = []
    opt.fill_defaults(args, FULL, QUICK)
    opt.check_common(args, errors)
    opt.check_int(errors, args.eval_trials, "--eval-trials", minimum=1)
    opt.check_int(errors, args.dim, "--dim", minimum=1)
    opt.check_int(errors, args.num_outcomes, "--num-outcomes", minimum=1)
    if args.trials > opt.EVAL_SEED_OFFSET:
        errors.append(f"--trials: at most {opt.EVAL_SEED_OFFSET} (evaluation seeds follow)")
    S_grid = opt.check_float_list(errors, args.S_grid, "--S-grid", positive=True)
    K = args.num_outcomes if args.num_outcomes >= 1 else 1
    given = "learners" in args.given
    learners = opt.check_learners(errors, args.learners, LEARNERS) if given else [
        n for n in rep.DEFAULT_LEARNERS if rep.supports(n, K)]  # fmt: skip
    errors += [f"--learners: {n} is defined for K = 1 only (--num-outcomes {K})"
               for n in learners if n in LEARNERS and not rep.supports(n, K)]  # fmt: skip
    if not any(n in LEARNERS and recipes.REGISTRY[n].sketched for n in learners):
        opt.refuse_unused(errors, args, {"sketch": "no sketched learner in --learners"})
    if not args.tune:
        tuned = ("l_grid", "e_grid", "beta_grid", "trials")
        opt.refuse_unused(errors, args, dict.fromkeys(tuned, "the tuned column is off (--no-tune)"))
    ls = opt.check_float_list(errors, args.l_grid, "--l-grid")
    es = opt.check_float_list(errors, args.e_grid, "--e-grid")
    betas = opt.check_float_list(errors, args.beta_grid, "--beta-grid")
    if any(b < 0 for b in betas):
        errors.append(f"--beta-grid: expected numbers >= 0, got {args.beta_grid!r}")
    for vals, option in ((S_grid, "--S-grid"), (ls, "--l-grid"), (es, "--e-grid"),
                         (betas, "--beta-grid")):  # fmt: skip
        _unique(errors, vals, option)
    opt.finish(errors, args)
    off = args.seed + opt.EVAL_SEED_OFFSET
    args.plan = {
        "T": args.rounds, "chunk": opt.chunk_size(args.rounds, args.chunk), "dim": args.dim,
        "K": args.num_outcomes, "S_grid": [float(s) for s in S_grid], "learners": learners,
        "modes": list(MODES) if args.tune else ["recipe"],
        "grid": {"l": ls, "e": es, "beta": betas},
        "tuning_seeds": list(range(args.seed, args.seed + args.trials)),
        "eval_seeds": list(range(off, off + args.eval_trials)),
    }  # fmt: skip


# ----------------------------------------------------------------------------- cells


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


def plan_cells(
    plan: dict, root: pathlib.Path, *, dtype: str, sketch: int | None, xla: Any = None
) -> list[Cell]:
    """The study's cells, S-major, then learner, then mode, with their identities: every option
    that changes a cell's numbers (chunk size and XLA options included)."""
    K, d = plan["K"], plan["dim"]
    cells = []
    for S in plan["S_grid"]:
        for name in plan["learners"]:
            m = rep.learner_sketch(sketch, K, d, name)
            for mode in plan["modes"]:
                ident: dict[str, Any] = {
                    "version": VERSION,
                    "S": S,
                    "dim": d,
                    "num_outcomes": K,
                    "rounds": plan["T"],
                    "chunk": plan["chunk"],
                    "dtype": dtype,
                    "learner": name,
                    "sketch": m if recipes.REGISTRY[name].sketched else None,
                    "xla": xla,
                    "mode": mode,
                    "eval_seeds": plan["eval_seeds"],
                }
                if mode == "recipe":
                    ident["point"] = list(recipe_point(name, S))
                else:
                    ident["grid"] = plan["grid"]
                    ident["tuning_seeds"] = plan["tuning_seeds"]
                cells.append(Cell(S, name, mode, ident, cell_dir(root, S, name, mode)))
    return cells


def _read_json(path: pathlib.Path) -> dict:
    from bandits_jax.sim.checkpoint import CheckpointError

    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: unreadable ({e}); start without --resume") from None
    if not isinstance(rec, dict):
        raise CheckpointError(f"{path}: not a kappa cell record; start without --resume")
    return rec


def _differences(have: Any, want: dict) -> list[str]:
    if not isinstance(have, dict):
        return ["identity"]
    keys = list(dict.fromkeys([*want, *have]))
    return [k for k in keys if have.get(k) != want.get(k)]


def check_resume(cells: Sequence[Cell]) -> None:
    """Refuses (``CheckpointError``, one line) any cell whose saved identity is not this run's,
    before anything is played."""
    from bandits_jax.sim.checkpoint import CheckpointError

    for c in cells:
        for name in ("result.json", "identity.json"):
            path = c.path / name
            if not path.is_file():
                continue
            rec = _read_json(path)
            have = rec.get("identity") if name == "result.json" else rec
            diff = _differences(have, c.identity)
            if diff:
                what = "; ".join(
                    f"{k} {json.dumps(have.get(k) if isinstance(have, dict) else None)} there, "
                    f"{json.dumps(c.identity.get(k))} here"
                    for k in diff[:3]
                )
                raise CheckpointError(
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
    does, through ``W*``), so the step built on the S = 1 stream serves every S (and both modes:
    equal batch shapes reuse one executable, as do later studies in the same process)."""
    import jax.numpy as jnp

    from bandits_jax import envs, mlogb

    K, d = plan["K"], plan["dim"]
    out = {}
    for name in plan["learners"]:
        m = rep.learner_sketch(sketch, K, d, name)
        key = (name, K, d, m, plan["T"], jnp.dtype(dtype).name)
        if key not in _GAMES:
            if len(_GAMES) >= 32:
                _GAMES.pop(next(iter(_GAMES)))
            env = envs.make(f"synth-{d}-{K}", S=1.0, dtype=dtype).env
            learner = recipes.make_learner(name, num_outcomes=K, dim=d, sketch_size=m,
                                           horizon=plan["T"])  # fmt: skip
            _GAMES[key] = _Learner(name, learner, mlogb.interact(learner, env))
        out[name] = _GAMES[key]
    return out


def _distinct(hp: Any) -> tuple[list[int], list[int]]:
    """``(first, unique)``: for each grid point the first point with identical hyperparameters,
    and those first points in order."""
    import jax

    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(hp)]
    G = leaves[0].shape[0]
    seen: dict[bytes, int] = {}
    first = [seen.setdefault(b"".join(x[g].tobytes() for x in leaves), g) for g in range(G)]
    return first, sorted(set(first))


def _recorded_seconds(ckdir: pathlib.Path) -> float:
    """Run seconds of every chunk of a finished sweep, restored ones included (the chunk
    checkpoints record them; ``run_sweep`` reports only the chunks it played)."""
    from bandits_jax.sim import checkpoint

    return float(
        sum(
            float(checkpoint.read_meta(p).get("run_seconds", 0.0))
            for p in sorted(ckdir.rglob("state.npz"))
        )
    )


def play_cell(
    cell: Cell, game: _Learner, plan: dict, *, dtype: Any, common: dict, show_progress: bool = False
) -> dict:
    """Plays one cell (its chunk checkpoints under ``cell.path``) and returns its record; with
    ``show_progress`` a bar counts its trial-rounds (tuning and evaluation)."""
    from bandits_jax import envs
    from bandits_jax.sim import sweep
    from bandits_jax.sim.chunks import Progress

    K, d, T, S = plan["K"], plan["dim"], plan["T"], cell.S
    env = envs.make(f"synth-{d}-{K}", S=S, dtype=dtype).env
    t0 = time.perf_counter()
    how = (_recipe_play if cell.mode == "recipe" else _tuned_play)(cell, game.kind, plan, dtype)
    label = recipes.REGISTRY[game.kind].label
    exp = sweep.Experiment(label, f"synth-{d}-{K} S={S:g}", game.step, game.learner.init,
                           how.hparams, how.grid, env.init)  # fmt: skip
    with Progress(how.runs * T, _cell_name(cell), enabled=show_progress) as bar:  # trial-rounds
        played = how.play([exp], num_rounds=T, config=cell.identity, progress=bar, **common)
    ev, compile_s, point, tuning = how.read(played)
    return _cell_record(cell, game.kind, T, ev, point, tuning, compile_s, t0)


def _cell_name(cell: Cell) -> str:
    """``S=<S> <learner> <mode>``: how bars and messages name a cell."""
    return f"S={cell.S:g} {cell.learner} {cell.mode}"


class _CellPlay(NamedTuple):
    """How a mode plays a cell: the hyperparameters and labels of its grid, the runs it plays
    (for the bar), ``play(experiments, **options)`` (a sweep with the cell's seeds and
    checkpoints) and ``read(played) -> (evaluation sweep, compile seconds, point, tuning)``."""

    hparams: Any
    grid: dict
    runs: int
    play: Callable
    read: Callable


def _recipe_play(cell: Cell, kind: str, plan: dict, dtype: Any) -> _CellPlay:
    """The recipe mode: the learner's out-of-the-box point on the evaluation seeds."""
    import jax
    import jax.numpy as jnp

    from bandits_jax.sim import sweep

    K, d, T, S = plan["K"], plan["dim"], plan["T"], cell.S
    l_, e_, b_ = recipe_point(kind, S)
    hp = recipes.hparams_for(kind, num_outcomes=K, dim=d, S=S, horizon=T, l=l_, e=e_, beta=b_,
                             dtype=dtype)  # fmt: skip
    hp = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[None], hp)
    grid = {"l": np.asarray([l_]), "e": np.asarray([e_]), "beta": np.asarray([str(b_)])}
    play = functools.partial(
        sweep.run_sweep,
        seeds=plan["eval_seeds"],
        checkpoint_dir=cell.path / "evaluation",
        fields=SWEEP_FIELDS,
    )
    point = {"l": l_, "e": e_, "beta": b_}
    return _CellPlay(
        hp, grid, len(plan["eval_seeds"]), play, lambda ev: (ev, ev.compile_seconds, point, None)
    )


def _tuned_play(cell: Cell, kind: str, plan: dict, dtype: Any) -> _CellPlay:
    """The tuned mode: the grid's distinct points tuned on the tuning seeds, the best one
    reported on the evaluation seeds (:func:`bandits_jax.sim.sweep.tune_and_evaluate`)."""
    import jax
    import jax.numpy as jnp

    from bandits_jax.sim import sweep

    K, d, T, S = plan["K"], plan["dim"], plan["T"], cell.S
    pg = plan["grid"]
    g = sweep.grid_product(beta=pg["beta"], l=pg["l"], e=pg["e"])  # beta-major, as sweep
    hp = recipes.hparams_for(kind, num_outcomes=K, dim=d, S=S, horizon=T, l=g["l"], e=g["e"],
                             beta=g["beta"], dtype=dtype)  # fmt: skip
    first, uniq = _distinct(hp)
    hp_u = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[np.asarray(uniq)], hp)
    grid_u = {k: np.asarray(v)[uniq] for k, v in g.items()}
    runs = len(uniq) * len(plan["tuning_seeds"]) + len(plan["eval_seeds"])
    play = functools.partial(
        sweep.tune_and_evaluate,
        tuning_seeds=plan["tuning_seeds"],
        eval_seeds=plan["eval_seeds"],
        checkpoint_dir=str(cell.path),
        fields=SWEEP_FIELDS,
        columns=exploration_columns,
    )
    return _CellPlay(hp_u, grid_u, runs, play, functools.partial(_tuned_outcome, g, first, uniq))


def _tuned_outcome(g: dict, first: list[int], uniq: list[int], res: Any) -> tuple:
    """``(evaluation sweep, compile seconds, point, tuning record)`` of a tuned cell: the
    tuning regrets spread back over the whole grid (equal points share their numbers)."""
    ev = res.evaluation_sweep
    compile_s = res.tuning_sweep.compile_seconds + ev.compile_seconds
    finals_u = np.asarray(res.tuning_sweep.experiments[0].metrics["regret"], np.float64)
    finals_u = finals_u.sum(-1)  # (distinct points, tuning seeds)
    where = {u: i for i, u in enumerate(uniq)}
    finals = finals_u[[where[f] for f in first]]
    chosen = uniq[res.chosen[0]]
    point = {k: float(v[chosen]) for k, v in g.items()}
    tuning = {
        "grid": {k: np.asarray(v).tolist() for k, v in g.items()},
        "same_as": first,
        "final_regret": finals.tolist(),
        "mean_final_regret": finals.mean(axis=1).tolist(),
        "chosen": int(chosen),
        "distinct_points": len(uniq),
    }
    return ev, compile_s, point, tuning


def _cell_record(cell: Cell, kind: str, T: int, ev, point, tuning, compile_s, t0: float) -> dict:
    """A played cell's record (``result.json``): its evaluation regrets and their summary,
    timings (chunk times recorded in its checkpoints), update status and tuning."""
    from bandits_jax.sim import sweep

    r = ev.experiments[0]
    final = np.asarray(r.metrics["regret"], np.float64).sum(-1)[0]  # (eval seeds,)
    row = sweep.table([r], columns=exploration_columns)[0]
    N = final.size
    std = float(final.std(ddof=1)) if N > 1 else 0.0
    seconds = _recorded_seconds(cell.path / "evaluation")
    return {
        "identity": cell.identity,
        "S": cell.S,
        "learner": cell.learner,
        "label": recipes.REGISTRY[kind].label,
        "mode": cell.mode,
        "point": point,
        "final_regret": final.tolist(),
        "final_regret_mean": float(final.mean()),
        "final_regret_std": std,
        "final_regret_se": std / math.sqrt(N),
        "trials": int(N),
        "rounds": T,
        "ms_per_round": 1e3 * seconds / (T * N),
        "compile_seconds": float(compile_s),
        "wall_seconds": time.perf_counter() - t0,
        "rejected": int(row.get("rejected", 0)),
        "status_counts": {
            k.removeprefix("status_"): v for k, v in row.items() if k.startswith("status_")
        },
        "explore_rate": row.get("explore_rate"),
        "bonus_ratio": row.get("bonus_ratio"),
        "tuning": tuning,
        "kappa_bound": kappa_bound(cell.S),
    }


# ----------------------------------------------------------------------------- tables


def csv_rows(cells: Sequence[dict]) -> list[dict]:
    """One row per cell: learner, S, mode, final regret mean and standard error, trials, ms per
    round, the point run (tuned: the chosen one), rejected updates and status counts."""
    rows = []
    for c in cells:
        rows.append(
            {
                "learner": c["learner"],
                "label": c["label"],
                "S": c["S"],
                "mode": c["mode"],
                "final_regret_mean": c["final_regret_mean"],
                "final_regret_se": c["final_regret_se"],
                "trials": c["trials"],
                "rounds": c["rounds"],
                "ms_per_round": c["ms_per_round"],
                "l": c["point"]["l"],
                "e": c["point"]["e"],
                "beta": c["point"]["beta"],
                "rejected": c["rejected"],
                **{f"status_{k}": v for k, v in c["status_counts"].items()},
            }
        )
    return rows


def growth(cells: Sequence[dict]) -> dict[str, dict[str, float | None]]:
    """Per learner and mode, ``regret(S_max) / regret(S_min)`` over the S values run."""
    from bandits_jax.cli import tables

    out: dict[str, dict[str, float | None]] = {}
    for c in cells:
        out.setdefault(c["learner"], {})
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
    from bandits_jax.cli import tables
    from bandits_jax.cli.output import format_table

    cfg = report["config"]
    S = sorted(cfg["S_grid"])
    lines = [
        f"kappa study: final regret at T = {cfg['rounds']} vs S = ||W*||_F on synth-{cfg['dim']}-"
        f"{cfg['num_outcomes']} ({cfg['dtype']}), mean +- standard error over "
        f"{len(cfg['eval_seeds'])} evaluation seeds ({_seed_range(cfg['eval_seeds'])})",
    ]
    if "tuned" in cfg["modes"]:
        lines.append(
            f"  tuned: the (l, e, beta) point of the grid l={_grid_text(cfg['grid']['l'])}, "
            f"e={_grid_text(cfg['grid']['e'])}, beta={_grid_text(cfg['grid']['beta'])} with the "
            f"least mean final regret on tuning seeds {_seed_range(cfg['tuning_seeds'])}, "
            "per (learner, S)"
        )
    lines.append("  recipe: the learner's tuned default point (out of the box)")
    cols = ["learner", "mode", "S", "l", "e", "beta", "final_regret_mean", "final_regret_se",
            "trials", "ms_per_round", "rejected"]  # fmt: skip
    order = {n: i for i, n in enumerate(cfg["learners"])}
    shown = sorted(rows, key=lambda r: (order.get(r["learner"], 0), r["mode"], r["S"]))
    lines += ["", format_table(shown, cols), ""]
    if len(S) >= 2:
        k_growth = kappa_bound(S[-1]) / kappa_bound(S[0])
        lines.append(
            f"Growth from S = {S[0]:g} to S = {S[-1]:g}, regret(S_max) / regret(S_min) (kappa "
            f"bound 1/sigma'(S) grows x{k_growth:.3g}):"
        )
        for name, g in report["growth"].items():
            parts = [f"{mode} x{g[mode]:.3g}" if g.get(mode) is not None else f"{mode} -"
                     for mode in cfg["modes"]]  # fmt: skip
            lines.append(f"  {name:<14} " + ", ".join(parts))
    else:
        lines.append("Growth: one S value only")
    status_rows = [
        {**r, "setting": f"S={r['S']:g} {r['mode']}", "max_steps": r.get("status_max_steps")}
        for r in rows
    ]
    lines += ["", *tables.status_lines(status_rows)]
    return "\n".join(lines) + "\n"


def figure_series(cells: Sequence[dict], learners: Sequence[str]) -> list[dict]:
    """The figure's curves: per learner and mode, S ascending, with the registry's colour."""
    series = []
    for name in learners:
        row = recipes.REGISTRY[name]
        for mode in MODES:
            mine = sorted((c for c in cells if c["learner"] == name and c["mode"] == mode),
                          key=lambda c: c["S"])  # fmt: skip
            if mine:
                series.append(
                    {
                        "label": row.legend,
                        "color": row.color,
                        "mode": mode,
                        "S": [c["S"] for c in mine],
                        "mean": [c["final_regret_mean"] for c in mine],
                        "se": [c["final_regret_se"] for c in mine],
                    }
                )
    return series


# ----------------------------------------------------------------------------- run


def run(args: argparse.Namespace) -> int:
    """Plays (or restores) every cell, then writes the figure, JSON, CSV and summary."""
    import jax

    from bandits_jax.sim import sharding

    from . import dtype_of

    t_start = time.perf_counter()
    plan = args.plan
    out = pathlib.Path(args.out)
    dtype = dtype_of(args)
    dtype_name = jax.numpy.dtype(dtype).name
    cells = plan_cells(plan, out / "checkpoints" / "kappa", dtype=dtype_name, sketch=args.sketch,
                       xla=getattr(args, "xla_applied", None))  # fmt: skip
    if args.resume:
        check_resume(cells)  # before any work
    mesh = sharding.run_mesh() if jax.device_count() > 1 else None
    _announce(args, plan, mesh, dtype_name)
    results = _play_cells(args, cells, _learners(plan, dtype, args.sketch), mesh, dtype)
    rows = csv_rows(results)
    report = _report(args, plan, results, mesh, dtype_name, t_start)
    _write(args, out, plan, report, rows)
    return 0


def _announce(args: argparse.Namespace, plan: dict, mesh: Any, dtype_name: str) -> None:
    """Says what the study plays."""
    from . import say

    say(
        args,
        f"kappa: S in {_grid_text(plan['S_grid'])}, learners {plan['learners']}, modes "
        f"{plan['modes']}, synth-{plan['dim']}-{plan['K']}, T = {plan['T']}, "
        f"{len(plan['eval_seeds'])} evaluation seeds"
        + (f", {len(plan['tuning_seeds'])} tuning seeds" if "tuned" in plan["modes"] else "")
        + f", chunks of {plan['chunk']} rounds, {dtype_name}, "
        f"{1 if mesh is None else mesh.size} device(s)",
    )


def _play_cells(
    args: argparse.Namespace, cells: Sequence[Cell], games: dict, mesh: Any, dtype: Any
) -> list[dict]:
    """Every cell's record in order: restored where ``--resume`` finds it finished, otherwise
    played (:func:`play_cell`) after its identity is written (a fresh run first clears its
    directory) and saved as its ``result.json``."""
    from . import say

    plan = args.plan
    common = {"mesh": mesh, "chunk_size": plan["chunk"], "resume": args.resume, "max_bytes": "auto"}
    results = []
    for cell in cells:
        done = cell.path / "result.json"
        if args.resume and done.is_file():
            results.append(_read_json(done))
            say(args, f"  {_cell_name(cell)}: restored")
            continue
        if not args.resume and cell.path.exists():
            shutil.rmtree(cell.path)  # a fresh run starts from nothing
        cell.path.mkdir(parents=True, exist_ok=True)
        output.write_json(cell.path / "identity.json", cell.identity)
        rec = play_cell(
            cell,
            games[cell.learner],
            plan,
            dtype=dtype,
            common=common,
            show_progress=not args.quiet,
        )
        output.write_json(done, rec)
        results.append(rec)
        say(
            args,
            f"  {_cell_name(cell)}: final regret "
            f"{rec['final_regret_mean']:.4g} +- {rec['final_regret_se']:.2g} "
            f"({rec['wall_seconds']:.1f} s, {rec['compile_seconds']:.1f} s compiling)",
        )
    return results


def _report(args, plan: dict, results: list[dict], mesh, dtype_name: str, t_start: float) -> dict:
    """``kappa.json``: the command, the study's configuration, every cell and the growth per
    learner."""
    import jax

    keys = ("S_grid", "dim", "rounds", "chunk", "learners", "modes", "grid", "tuning_seeds",
            "eval_seeds")  # fmt: skip
    config = {k: plan["T" if k == "rounds" else k] for k in keys}
    config.update(num_outcomes=plan["K"], dtype=dtype_name, backend=jax.default_backend(),
                  sketch=args.sketch or recipes.sketch_size(plan["K"], plan["dim"]),
                  devices=1 if mesh is None else mesh.size,
                  wall_seconds=time.perf_counter() - t_start)  # fmt: skip
    return {"command": output.command_line(args), "config": config, "cells": results,
            "growth": growth(results)}  # fmt: skip


def _write(args, out: pathlib.Path, plan: dict, report: dict, rows: list[dict]) -> None:
    """Writes ``kappa.png`` (with ``--plots``), ``kappa.json``, ``kappa.csv`` and
    ``kappa_summary.txt`` (also printed), then lists what was written."""
    from bandits_jax.cli import plotting

    figures = []
    if args.plots:
        S = plan["S_grid"]
        ref = {"S": S, "value": [kappa_bound(s) for s in S], "label": "kappa bound 1/sigma'(S)"}
        figures = [out / "kappa.png"]
        plotting.kappa_figure(figure_series(report["cells"], plan["learners"]), figures[0],
                              title=f"synth-{plan['dim']}-{plan['K']}, T = {plan['T']}",
                              reference=ref)  # fmt: skip
    output.finish(args, "kappa", report, rows, summary(report, rows), figures)
