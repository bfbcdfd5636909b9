"""``bandits-jax bco``: the BCO paper's studies, regret vs the dimension d and vs the gradient
variation V_T (Table 1, Theorems 1-4 and 8), beside the Chiang et al. 2013 strongly convex rate
and the sphere-estimator baseline (Algorithm 3). The paper has no experiments; these measure its
claims (theory: regret ~ d^1.5 sqrt(V_T) (Thm 1), d sqrt(W_T + d) (Thm 3), d log V_T / lambda
(Thm 2) vs Chiang's d^2 / lambda).

The losses are the settings ``bco-linear-D`` and ``bco-quadratic-D`` of
:func:`bandits_jax.envs.make` (the optimum on the boundary of the unit ball with a non-zero
gradient); the learners the presets of ``bco.PRESETS``, each on its family's losses. The d study
keeps their slow drift (``V_T ~ 1e-5``); the V_T study fixes ``d``, varies the amplitude ``a`` of
a fast oscillation (``w = 2``: ``V_T ~ 2.8 a^2 T``) and adds an i.i.d.-noise point. Every
(scale, point, seed) run of a learner is one ``vmap``-ed batch in the chunked runner; regret is
the static regret against the best fixed point in hindsight (``bandits_jax.bco.summarize``).
With several ``--scale-grid`` values the step-size scale of each (learner, point) is tuned on
tuning seeds and reported on disjoint evaluation seeds (one value: nothing is tuned).
"""

from __future__ import annotations

import argparse
import pathlib
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax import bco, envs
from bandits_jax.bco import PRESETS
from bandits_jax.bco import rounds as bint
from bandits_jax.cli import options as opt
from bandits_jax.cli import output, plotting, process, tables
from bandits_jax.sim import chunks, runner, sweep
from bandits_jax.status import CONVERGED, MAX_STEPS

FAST_OMEGA = 2.0
FAMILIES = {"convex": "linear", "strongly_convex": "quadratic"}  # -> bco-<losses>-D
STUDIES = ("dimension", "variation")
LEARNERS = tuple(PRESETS)
FULL = {"rounds": 10000, "trials": 8, "dims": "5,10,20,40,80", "d_variation": 20,
        "amplitudes": "0,0.003,0.01,0.03,0.1,0.3,1", "noise": 0.3, "learners": ",".join(PRESETS),
        "scale_grid": "1", "tune_trials": 4}  # fmt: skip
QUICK = {**FULL, "rounds": 2000, "trials": 4, "dims": "5,10,20,40", "d_variation": 10,
         "amplitudes": "0,0.01,0.03,0.1,0.3,1"}  # fmt: skip
OPTION_HELP = {"--trials": f"evaluation seeds (default {FULL['trials']}; quick {QUICK['trials']})"}


def losses(family: str, d: int, T: int, noise: float = 0.0, dtype: Any = None) -> Any:
    """The family's losses in dimension ``d`` (the setting ``bco-linear-D`` or
    ``bco-quadratic-D`` of :func:`bandits_jax.envs.make`, its drift over ``T`` rounds)."""
    return envs.make(f"bco-{FAMILIES[family]}-{d}", horizon=T, noise=noise, dtype=dtype).env


def preset(name: str, env: Any, T: int, scales: Sequence[float], lipschitz=None) -> tuple:
    """The preset's learner on ``env`` and its theorem hyperparameters at each step-size scale
    (:func:`bandits_jax.bco.from_preset`; a strongly convex preset gets the losses' lambda)."""
    kw = dict(horizon=T, smoothness=env.smoothness,
              lipschitz=env.lipschitz if lipschitz is None else lipschitz)  # fmt: skip
    if PRESETS[name].family == "strongly_convex":
        kw["lam"] = env.lam
    built = [bco.from_preset(name, dim=env.d, domain=env.domain, scale=s, **kw) for s in scales]
    return built[0][0], [hp for _, hp in built]


class Played(NamedTuple):
    """Per (configuration, seed): static regret ``(C, N)``, V_T ``(C, N)``, rejected and
    MAX_STEPS counts ``(C,)``; whether every query was in the domain and every hindsight solve
    converged."""

    regret: np.ndarray
    V_T: np.ndarray
    rejected: np.ndarray
    max_steps: np.ndarray
    all_in_domain: bool
    best_point_ok: bool


class StudyPlan(NamedTuple):
    """What every study run shares: evaluation seeds, the step-size scale grid tuned on
    ``tuning_seeds`` (one scale: nothing tuned), the learners (``None``: every preset), the
    dtype; how batches are played: checkpoints under ``root/<tag>`` (``None``: none), the chunk
    size, ``resume``, a progress bar and the identity (``config``) the checkpoints carry."""

    eval_seeds: Sequence[int]
    tuning_seeds: Sequence[int] = ()
    scales: Sequence[float] = (1.0,)
    learners: Sequence[str] | None = None
    dtype: Any = None
    root: pathlib.Path | None = None
    chunk: int | None = None
    resume: bool = False
    progress: Any = None
    config: Any = None


class _Game(NamedTuple):
    """A learner on its losses with its compiled pieces, shared by the tuning and evaluation
    runs (equal batch sizes reuse one executable): the rounds' chunks, the builder of a batch's
    run state and the per-run summary."""

    chunk_fn: Any
    build: Any  # (hps, overrides, env keys, run keys) -> RunState, runs c * N + n
    summarize: Any  # (env states, metrics) -> per-run summaries


def _game(learner: Any, env: Any, T: int) -> _Game:

    @jax.jit
    def build(hps, overs, env_keys, run_keys):  # one compiled call, not dozens of small ones
        C, N = jax.tree_util.tree_leaves(hps)[0].shape[0], env_keys.shape[0]
        es_seed = jax.vmap(env.init)(env_keys)  # (N, ...)
        dt = es_seed.base.dtype

        def per_config(hp, over):
            es = es_seed._replace(**{k: jnp.full((N,), v, dt) for k, v in over.items()})
            ls = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (N, *x.shape)),
                                        learner.init(hp))  # fmt: skip
            return ls, es

        ls, es = jax.vmap(per_config)(hps, overs)  # (C, N, ...)
        flat = jax.tree_util.tree_map(lambda x: x.reshape((C * N, *x.shape[2:])), (ls, es))
        keys = jnp.concatenate([run_keys] * C, axis=0)
        return runner.RunState(flat[0], flat[1], keys, jnp.zeros((C * N,), jnp.int32))

    summarize = jax.jit(jax.vmap(lambda e, m: bint.summarize(env, e, m, T)))
    return _Game(chunks.ChunkFn(bint.interact(learner, env), batched=True), build, summarize)


def play(game: _Game, hps, points, seeds, T: int, plan: StudyPlan, tag: str) -> Played:
    """Plays every (hyperparameters, env-state overrides) pair of ``hps`` x ``points`` (zipped)
    on every seed in one batched, chunked call (its checkpoints under ``plan.root/tag``)."""
    N, C = len(seeds), len(points)
    env_keys, run_keys = sweep.seed_keys(seeds)
    names = sorted({k for over in points for k in over})
    overs = {k: np.asarray([over[k] for over in points], np.float64) for k in names}
    state = game.build(sweep.stack_trees(hps), overs, env_keys, run_keys)
    metrics = chunks.run_chunked(
        game.chunk_fn, state, T, chunk_size=opt.chunk_size(T, plan.chunk), resume=plan.resume,
        checkpoint_dir=None if plan.root is None else plan.root / tag, progress=plan.progress,
        config={"study": plan.config, "tag": tag},
    ).metrics  # fmt: skip
    summ = game.summarize(state.env, metrics)
    status = np.asarray(metrics.status).reshape(C, N * T)
    return Played(
        regret=np.asarray(summ.regret, np.float64).reshape(C, N),
        V_T=np.asarray(summ.V_T, np.float64).reshape(C, N),
        rejected=np.asarray([tables.rejected_count(s) for s in status]),
        max_steps=np.asarray([int(np.sum(s == MAX_STEPS)) for s in status]),
        all_in_domain=bool(np.all(np.asarray(summ.all_in_domain))),
        best_point_ok=bool(np.all(np.asarray(summ.best_point_status) == CONVERGED)),
    )


def tuned_play(name, env, points, T: int, plan: StudyPlan, *, tag: str, lipschitz=None):
    """Honest tuning of the step-size scale per point: the best scale on ``plan.tuning_seeds``
    (lowest mean final regret), reported on ``plan.eval_seeds``: ``(Played, chosen scales)``."""
    scales = plan.scales
    learner, hps = preset(name, env, T, scales, lipschitz)
    game = _game(learner, env, T)
    chosen = [0] * len(points)
    if len(scales) > 1:
        if set(plan.tuning_seeds) & set(plan.eval_seeds):
            raise ValueError("eval_seeds: must be disjoint from tuning_seeds")
        grid = [(hp, pt) for hp in hps for pt in points]  # scale-major
        tuned = play(game, *zip(*grid, strict=True), plan.tuning_seeds, T, plan, tag + "/tuning")
        means = tuned.regret.mean(axis=1).reshape(len(scales), len(points))
        chosen = [int(np.nanargmin(means[:, j])) for j in range(len(points))]
    out = play(game, [hps[c] for c in chosen], points, plan.eval_seeds, T, plan,
               tag + "/evaluation")  # fmt: skip
    return out, [float(scales[c]) for c in chosen]


def _std(r: np.ndarray) -> list[float]:
    return (r.std(axis=-1, ddof=1) if r.shape[-1] > 1 else 0 * r[..., 0]).tolist()


def _by_family(learners: Sequence[str] | None) -> list[tuple[str, list[str]]]:
    """``(family, learner names)`` for each family with at least one of ``learners``."""
    out = [(f, [n for n in learners or PRESETS if PRESETS[n].family == f]) for f in FAMILIES]
    return [(f, names) for f, names in out if names]


def dimension_study(dims: Sequence[int], T: int, plan: StudyPlan) -> dict:
    """Final static regret vs d per learner and family (slow drift, V_T ~ 0)."""
    res: dict[str, dict] = {}
    for family, names in _by_family(plan.learners):
        keys = ("d", "mean", "std", "regret", "V_T", "scale", "rejected", "max_steps")
        per = {n: {**{k: [] for k in keys}, "all_in_domain": True, "best_point_ok": True}
               for n in names}  # fmt: skip
        for d in dims:
            env = losses(family, d, T, dtype=plan.dtype)
            for name in names:
                out, chosen = tuned_play(name, env, [{}], T, plan, tag=f"dimension/{name}/d{d}")
                p, r = per[name], out.regret[0]
                values = (int(d), float(r.mean()), _std(r[None])[0], r.tolist(),
                          float(out.V_T[0].mean()), chosen[0], int(out.rejected[0]),
                          int(out.max_steps[0]))  # fmt: skip
                for k, v in zip(keys, values, strict=True):
                    p[k].append(v)
                p["all_in_domain"] &= out.all_in_domain
                p["best_point_ok"] &= out.best_point_ok
        for p in per.values():
            p["slope_vs_d"] = tables.loglog_slope(p["d"], p["mean"])
        res[family] = per
    return res


def variation_study(d: int, T: int, plan: StudyPlan, *, amplitudes, noise: float) -> dict:
    """Final static regret vs V_T at fixed d: drift amplitudes at the fast frequency
    :data:`FAST_OMEGA` plus an i.i.d.-noise point, all (point, seed) runs in one batched call per
    learner. The learners use the noise-free family's G at every point, so they are the same
    learners as in the d study."""
    points = [{"omega": FAST_OMEGA, "noise": 0.0, "amplitude": float(a)} for a in amplitudes]
    points.append({"omega": FAST_OMEGA, "noise": float(noise), "amplitude": 0.0})
    res: dict[str, dict] = {}
    for family, names in _by_family(plan.learners):
        env = losses(family, d, T, noise=noise, dtype=plan.dtype)  # the noise knob is live
        G = losses(family, d, T, dtype=plan.dtype).lipschitz
        per = {}
        for name in names:
            out, chosen = tuned_play(name, env, points, T, plan, tag=f"variation/{name}",
                                     lipschitz=G)  # fmt: skip
            v_all, m_all = out.V_T.mean(axis=1), out.regret.mean(axis=1)
            top = v_all >= v_all.max() / 100  # where V_T dominates the additive d-terms
            per[name] = {
                "amplitude": [float(a) for a in amplitudes] + [0.0], "omega": FAST_OMEGA,
                "noise": [0.0] * len(amplitudes) + [float(noise)], "V_T": v_all.tolist(),
                "mean": m_all.tolist(), "std": _std(out.regret), "regret": out.regret.tolist(),
                "scale": chosen, "rejected": out.rejected.tolist(),
                "max_steps": out.max_steps.tolist(), "all_in_domain": out.all_in_domain,
                "best_point_ok": out.best_point_ok,
                "slope_vs_V_T": tables.loglog_slope(v_all, m_all),
                "slope_vs_V_T_top": tables.loglog_slope(v_all[top], m_all[top]),
            }  # fmt: skip
        res[family] = per
    return res


def add_arguments(b: argparse.ArgumentParser) -> None:
    """Adds ``bco``'s own options to its subparser."""
    b.add_argument("--study", default="both", choices=(*STUDIES, "both"),
                   help="dimension, variation or both (default both)")  # fmt: skip
    b.add_argument("--dims", help="d values of the d study")
    b.add_argument("--d-variation", type=int, help="d of the V_T study")
    b.add_argument("--amplitudes", help="drift amplitudes of the V_T study")
    b.add_argument("--noise", type=float, help="noise of the V_T study's i.i.d. point")
    b.add_argument("--tune-trials", type=int, help="tuning seeds (more than one --scale-grid)")


def validate(args: argparse.Namespace) -> None:
    """Checks every option of ``bco`` before any work (:class:`~.options.UsageError`)."""
    errors: list[str] = []
    opt.fill_defaults(args, FULL, QUICK)
    opt.check_common(args, errors)
    opt.check_int(errors, args.tune_trials, "--tune-trials", minimum=1)
    if args.tune_trials > opt.EVAL_SEED_OFFSET:
        errors.append(f"--tune-trials: at most {opt.EVAL_SEED_OFFSET} (evaluation seeds follow)")
    opt.check_int(errors, args.d_variation, "--d-variation", minimum=1)
    opt.check_float(errors, args.noise, "--noise", nonneg=True)
    dims = opt.check_float_list(errors, args.dims, "--dims", positive=True)
    if any(d != int(d) for d in dims):
        errors.append(f"--dims: expected integers >= 1, got {args.dims!r}")
    amps = opt.check_float_list(errors, args.amplitudes, "--amplitudes")
    if any(a < 0 for a in amps):
        errors.append(f"--amplitudes: expected numbers >= 0, got {args.amplitudes!r}")
    scales = opt.check_float_list(errors, args.scale_grid, "--scale-grid", positive=True)
    learners = opt.check_learners(errors, args.learners, LEARNERS)
    studies = list(STUDIES) if args.study == "both" else [args.study]
    only = f"the {studies[0]} study (--study {args.study}) does not use it"
    opt.refuse_unused(errors, args, {"dims": only} if "dimension" not in studies else
                      dict.fromkeys(("d_variation", "amplitudes", "noise"), only)
                      if "variation" not in studies else {})  # fmt: skip
    if len(scales) == 1:
        opt.refuse_unused(errors, args, {"tune_trials": "one --scale-grid value: nothing tuned"})
    opt.finish(errors, args)
    eval0 = args.seed + opt.EVAL_SEED_OFFSET
    args.plan = {
        "cfg": {"dims": [int(d) for d in dims], "T": args.rounds, "seeds": args.trials,
                "d_variation": args.d_variation, "amplitudes": amps, "noise": args.noise},
        "studies": studies, "scales": scales, "learners": learners,
        "eval_seeds": list(range(eval0, eval0 + args.trials)),
        "tuning_seeds": list(range(args.seed, args.seed + args.tune_trials)),
    }  # fmt: skip


def trial_rounds(cfg: dict, studies: Sequence[str], plan: StudyPlan) -> int:
    """Trial-rounds the studies play (the progress bar's total): per learner, the d study plays
    each d on the evaluation seeds, the V_T study each point (amplitudes and the noise point);
    with several scales each also plays scales x points on the tuning seeds."""
    n_scales = len(plan.scales)
    per_point = len(plan.eval_seeds) + (n_scales * len(plan.tuning_seeds) if n_scales > 1 else 0)
    points = len(cfg["dims"]) * ("dimension" in studies)
    points += (len(cfg["amplitudes"]) + 1) * ("variation" in studies)
    return len(plan.learners or PRESETS) * points * per_point * cfg["T"]


def run(args: argparse.Namespace) -> int:
    """Runs ``bco``: the studies, their figures, tables and summary; returns the exit status."""
    t0, plan, out, dtype = time.time(), args.plan, pathlib.Path(args.out), output.dtype_of(args)
    cfg, studies, scales = plan["cfg"], plan["studies"], plan["scales"]
    tuning = len(scales) > 1
    dt = jnp.dtype(dtype).name
    output.say(args, f"bco: studies {studies}, learners {plan['learners']}, T = {cfg['T']}, "
              f"{cfg['seeds']} evaluation seeds"
              + (f", scale tuned over {scales} on {len(plan['tuning_seeds'])} tuning seeds"
                 if tuning else "") + f", {dt}")  # fmt: skip
    seeds = {"eval_seeds": plan["eval_seeds"], "tuning_seeds": plan["tuning_seeds"] * tuning}
    study = StudyPlan(plan["eval_seeds"], plan["tuning_seeds"], scales, plan["learners"], dtype,
                      out / "checkpoints" / "bco", args.chunk, args.resume, None,
                      {"cfg": cfg, "scales": scales, "dtype": dt, **seeds,
                       "xla": process.numeric_flags()})  # fmt: skip
    result: dict[str, Any] = {"config": {
        **cfg, "seeds": len(plan["eval_seeds"]), "amplitude": envs.registry.AMPLITUDE,
        "fast_omega": FAST_OMEGA, "slow_angle": envs.registry.SLOW_ANGLE,
        "backend": jax.default_backend(), "dtype": dt, "scale_grid": scales, **seeds,
    }}  # fmt: skip
    with chunks.Progress(trial_rounds(cfg, studies, study), "bco", enabled=not args.quiet) as bar:
        study = study._replace(progress=bar)
        if "dimension" in studies:
            result["dimension"] = dimension_study(cfg["dims"], cfg["T"], study)
        if "variation" in studies:
            result["variation"] = variation_study(cfg["d_variation"], cfg["T"], study,
                                                  amplitudes=cfg["amplitudes"],
                                                  noise=cfg["noise"])  # fmt: skip
    result["config"].update(wall_s=time.time() - t0, command=output.command_line(args))
    figures = []
    if args.plots:
        figures = [out / "bco_dimension.png"]
        plotting.bco_figure(result, figures[0])
    output.finish(args, "bco", result, tables.bco_rows(result), tables.bco_summary(result),
                  figures)  # fmt: skip
    return 0
