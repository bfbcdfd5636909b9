"""``bandits-jax bco``: the BCO paper's studies, regret vs the dimension d and vs the gradient
variation V_T (Table 1, Theorems 1-4 and 8), next to the Chiang et al. 2013 strongly convex rate
and the sphere-estimator baseline (Algorithm 3). The paper has no experiments; these measure its
claims. ``python -m benchmarks.bco_dimension`` runs the same studies.

Every run goes through the shared chunked runner (``bandits_jax.sim.chunks.run_chunked``: rounds
in ``lax.scan`` chunks with progress and checkpoints, (scale, V_T point, seed) runs flattened
into one ``vmap``-ed batch); regret is the static regret against the best fixed point in
hindsight (``bandits_jax.bco.summarize``), loss charged = mean of the two queried
values.

Families (benign: the optimum lies on the boundary of the unit ball with a non-zero gradient):

* convex: linear losses ``<l_t, x>``, ``||l|| ~ 1``, ``l_t = b + 0.5 (cos(w t) u + sin(w t) v)``;
* strongly convex: quadratics ``1/2 ||x - c_t||^2`` (lambda = 1), ``||b|| = 2`` (centre outside
  the ball), ``c_t = b + 0.5 (cos(w t) u + sin(w t) v)``.

The d study uses a slow drift (``w = 0.2 / T``, ``V_T ~ 1e-5``: a static comparator stays
meaningful); the V_T study fixes ``d`` and varies the amplitude ``a`` of a fast oscillation
(``w = 2``: ``V_T ~ 2.8 a^2 T``) and adds an i.i.d.-noise point. Learners (:data:`BCO_LEARNERS`)
are the library's presets ``bco.schedules.PRESETS``: convex ``alg1_thm3``, ``alg1_thm1``,
``sphere``; strongly convex ``alg1_thm2``, ``chiang2013``, ``sphere_thm8``.

Honest tuning: with ``--scale-grid`` of several values the step-size scale of each (learner,
point) is chosen by mean final regret on tuning seeds and reported on disjoint evaluation seeds
(as ``sweep`` does); with one value (default ``1``, the theorems' constants) nothing is tuned.
Theory: regret ~ d^1.5 sqrt(V_T) (Thm 1), d sqrt(W_T + d) (Thm 3), d log V_T / lambda (Thm 2) vs
Chiang's d^2 / lambda.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from bandits_jax.bco.schedules import PRESETS
from bandits_jax.cli import options as opt
from bandits_jax.cli import output, tables

AMPLITUDE = 0.5
SLOW_ANGLE = 0.2  # total rotation of the slow drift over the horizon (omega = SLOW_ANGLE / T)
FAST_OMEGA = 2.0
FAMILIES = ("convex", "strongly_convex")
SETTING_FAMILY = {"linear": "convex", "quadratic": "strongly_convex"}  # bco-linear-D, ...
STUDIES = ("dimension", "variation")


# The studies' learners: the library's step-size presets (``bco.schedules.PRESETS``), one name
# set for the library and the command; a strongly convex learner gets the losses' lambda = 1.
BCO_LEARNERS = PRESETS
_EXTRA = {"convex": {}, "strongly_convex": {"lam": 1.0}}

QUICK = dict(
    dims=[5, 10, 20, 40],
    T=2000,
    seeds=4,
    d_variation=10,
    amplitudes=[0.0, 0.01, 0.03, 0.1, 0.3, 1.0],
    noise=0.3,
)
FULL = dict(
    dims=[5, 10, 20, 40, 80],
    T=10000,
    seeds=8,
    d_variation=20,
    amplitudes=[0.0, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0],
    noise=0.3,
)


def make_env(family: str, d: int, T: int, noise: float = 0.0, dtype: Any = None) -> Any:
    """The study's loss family at dimension ``d`` with the slow drift of the d study."""
    from bandits_jax.envs import bco_losses as bl

    omega = SLOW_ANGLE / T
    if family == "convex":
        return bl.linear(
            d, base_norm=1.0, amplitude=AMPLITUDE, omega=omega, noise=noise, dtype=dtype
        )
    return bl.quadratic(
        d, lam=1.0, base_norm=2.0, amplitude=AMPLITUDE, omega=omega, noise=noise, dtype=dtype
    )


def bco_learner(name: str, d: int) -> Any:
    """The BCO learner ``name`` of :data:`BCO_LEARNERS` in dimension ``d``."""
    from bandits_jax.bco import two_point as tp

    p = PRESETS[name]
    return (tp.sphere_learner if p.algorithm == "alg3" else tp.two_point_learner)(
        dim=d, schedule=p.kind
    )


def hyperparams(name: str, learner: Any, env: Any, T: int, scale: float, lipschitz=None) -> Any:
    """The learner's theorem hyperparameters on ``env`` with step-size ``scale``."""
    return learner.hyperparams(
        env.domain,
        horizon=T,
        smoothness=env.smoothness,
        lipschitz=env.lipschitz if lipschitz is None else lipschitz,
        scale=scale,
        **_EXTRA[BCO_LEARNERS[name].family],
    )


# ----------------------------------------------------------------------------- runs


Runner = Callable[[str, Any, Any, int], dict]


class ChunkedRunner:
    """Plays a batch of runs with ``run_chunked``: progress, and with ``root`` a checkpoint
    directory per tag (``root/tag``) so that ``resume=True`` continues an interrupted study."""

    def __init__(
        self,
        root: str | pathlib.Path | None = None,
        *,
        chunk: int | None = None,
        resume: bool = False,
        progress: Any = None,
        config: Any = None,
    ):
        self.root = None if root is None else pathlib.Path(root)
        self.chunk, self.resume, self.progress, self.config = chunk, resume, progress, config
        self._fns: dict[int, tuple[Any, Any]] = {}  # id(step) -> (step, ChunkFn)

    def __call__(self, tag: str, step: Any, state: Any, T: int) -> dict:
        from bandits_jax.sim.chunks import ChunkFn, run_chunked

        if id(step) not in self._fns:  # one ChunkFn per step: equal batches share executables
            if len(self._fns) >= 8:
                self._fns.pop(next(iter(self._fns)))
            self._fns[id(step)] = (step, ChunkFn(step, batched=True))
        res = run_chunked(
            self._fns[id(step)][1],
            state,
            T,
            chunk_size=opt.chunk_size(T, self.chunk),
            checkpoint_dir=None if self.root is None else self.root / tag,
            resume=self.resume,
            config={"study": self.config, "tag": tag},
            progress=self.progress,
        )
        return res.metrics


class Played(NamedTuple):
    """Per (configuration, seed): static regret, V_T, rejected and MAX_STEPS counts; plus
    whether every query was in the domain and every hindsight solve converged."""

    regret: np.ndarray  # (C, N)
    V_T: np.ndarray  # (C, N)
    rejected: np.ndarray  # (C,)
    max_steps: np.ndarray  # (C,)
    all_in_domain: bool
    best_point_ok: bool


class _Game(NamedTuple):
    """A learner on an env with its compiled pieces, shared by the tuning and evaluation runs
    (so that equal batch sizes reuse one executable)."""

    learner: Any
    env: Any
    step: Any
    build: Any  # (hps, overrides, env_keys, run_keys) -> batched RunState
    summarize: Any  # (env_states, metrics) -> per-run summaries


def _game(name: str, env: Any, T: int) -> _Game:
    import jax
    import jax.numpy as jnp

    from bandits_jax.bco import rounds as bint
    from bandits_jax.sim.runner import RunState

    learner = bco_learner(name, env.d)

    @jax.jit
    def build(hps, overs, env_keys, run_keys):  # one compiled call, not dozens of small ones
        C, N = jax.tree_util.tree_leaves(hps)[0].shape[0], env_keys.shape[0]
        es_seed = jax.vmap(env.init)(env_keys)  # (N, ...)
        dt = es_seed.base.dtype

        def per_config(hp, over):
            es = es_seed._replace(**{k: jnp.full((N,), v, dt) for k, v in over.items()})
            ls = jax.tree_util.tree_map(
                lambda x: jnp.broadcast_to(x, (N, *x.shape)), learner.init(hp)
            )
            return ls, es

        ls, es = jax.vmap(per_config)(hps, overs)  # (C, N, ...)
        flat = jax.tree_util.tree_map(lambda x: x.reshape((C * N, *x.shape[2:])), (ls, es))
        keys = jnp.concatenate([run_keys] * C, axis=0)
        return RunState(flat[0], flat[1], keys, jnp.zeros((C * N,), jnp.int32))

    summ = jax.jit(jax.vmap(lambda e, m: bint.summarize(env, e, m, T)))
    return _Game(learner, env, bint.interact(learner, env), build, summ)


def play(
    game: _Game,
    configs: Sequence[tuple[Any, dict]],
    seeds: Sequence[int],
    T: int,
    runner: Runner,
    tag: str,
) -> Played:
    """Plays ``configs`` (``(hyperparameters, env-state overrides)`` each) on every seed in one
    batched call: runs ``c * N + n``."""
    from bandits_jax.sim import sweep
    from bandits_jax.status import CONVERGED, MAX_STEPS

    N, C = len(seeds), len(configs)
    env_keys, run_keys = sweep.seed_keys(seeds)
    names = sorted({k for _, over in configs for k in over})
    if any(set(over) != set(names) for _, over in configs):
        raise ValueError("configs: every configuration must override the same fields")
    hps = sweep.stack_trees([hp for hp, _ in configs])  # (C, ...)
    overs = {k: np.asarray([over[k] for _, over in configs], np.float64) for k in names}
    state = game.build(hps, overs, env_keys, run_keys)
    metrics = runner(tag, game.step, state, T)
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


class StudyPlan(NamedTuple):
    """What every study run shares: evaluation seeds, the step-size scale grid tuned on
    ``tuning_seeds`` (one scale: nothing tuned), the learners (``None``: all of
    :data:`BCO_LEARNERS`), the runner (``None``: an in-memory :class:`ChunkedRunner`) and the
    dtype."""

    eval_seeds: Sequence[int]
    tuning_seeds: Sequence[int] = ()
    scales: Sequence[float] = (1.0,)
    learners: Sequence[str] | None = None
    runner: Runner | None = None
    dtype: Any = None


def tuned_play(
    name: str,
    env: Any,
    points: Sequence[dict],
    T: int,
    plan: StudyPlan,
    *,
    tag: str,
    lipschitz: float | None = None,
) -> tuple[Played, list[float]]:
    """Honest tuning of the step-size scale per point: the best scale on ``plan.tuning_seeds``
    (lowest mean final regret), reported on ``plan.eval_seeds``. One scale: no tuning run."""
    scales, tuning_seeds, eval_seeds = plan.scales, plan.tuning_seeds, plan.eval_seeds
    runner = plan.runner or ChunkedRunner()
    game = _game(name, env, T)
    hps = [hyperparams(name, game.learner, env, T, s, lipschitz) for s in scales]
    if len(scales) > 1:
        if set(tuning_seeds) & set(eval_seeds):
            raise ValueError("eval_seeds: must be disjoint from tuning_seeds")
        grid = [(hp, pt) for hp in hps for pt in points]  # scale-major
        tuned = play(game, grid, tuning_seeds, T, runner, tag + "/tuning")
        means = tuned.regret.mean(axis=1).reshape(len(scales), len(points))
        chosen = [int(np.nanargmin(means[:, j])) for j in range(len(points))]
    else:
        chosen = [0] * len(points)
    configs = [(hps[c], pt) for c, pt in zip(chosen, points, strict=True)]
    return play(game, configs, eval_seeds, T, runner, tag + "/evaluation"), [
        float(scales[c]) for c in chosen
    ]


def _std(r: np.ndarray) -> list[float]:
    return (r.std(axis=-1, ddof=1) if r.shape[-1] > 1 else 0 * r[..., 0]).tolist()


def _family_learners(learners: Sequence[str] | None) -> list[tuple[str, list[str]]]:
    """``(family, learner names)`` for each family with at least one of ``learners``."""
    chosen = learners or BCO_LEARNERS
    out = [(f, [n for n in chosen if BCO_LEARNERS[n].family == f]) for f in FAMILIES]
    return [(f, names) for f, names in out if names]


def dimension_study(dims: Sequence[int], T: int, plan: StudyPlan) -> dict:
    """Final static regret vs d per learner and family (slow drift, V_T ~ 0)."""
    plan = plan._replace(runner=plan.runner or ChunkedRunner())
    res: dict[str, dict] = {}
    for family, names in _family_learners(plan.learners):
        per = {n: {"d": [], "mean": [], "std": [], "regret": [], "V_T": [], "scale": [],
                   "rejected": [], "max_steps": [], "all_in_domain": True, "best_point_ok": True}
               for n in names}  # fmt: skip
        for d in dims:
            env = make_env(family, d, T, dtype=plan.dtype)
            for name in names:
                out, chosen = tuned_play(name, env, [{}], T, plan, tag=f"dimension/{name}/d{d}")
                p = per[name]
                r = out.regret[0]
                p["d"].append(int(d))
                p["mean"].append(float(r.mean()))
                p["std"].append(_std(r[None])[0])
                p["regret"].append(r.tolist())
                p["V_T"].append(float(out.V_T[0].mean()))
                p["scale"].append(chosen[0])
                p["rejected"].append(int(out.rejected[0]))
                p["max_steps"].append(int(out.max_steps[0]))
                p["all_in_domain"] &= out.all_in_domain
                p["best_point_ok"] &= out.best_point_ok
        for p in per.values():
            p["slope_vs_d"] = tables.loglog_slope(p["d"], p["mean"])
        res[family] = per
    return res


def variation_study(
    d: int, T: int, plan: StudyPlan, *, amplitudes: Sequence[float], noise: float
) -> dict:
    """Final static regret vs V_T at fixed d: drift amplitudes at the fast frequency
    ``FAST_OMEGA`` plus an i.i.d.-noise point, all (point, seed) runs in one batched call per
    learner. The learners use the noise-free family's G at every point, so they are the same
    learners as in the d study."""
    plan = plan._replace(runner=plan.runner or ChunkedRunner())
    res: dict[str, dict] = {}
    points = [{"omega": FAST_OMEGA, "noise": 0.0, "amplitude": float(a)} for a in amplitudes]
    points.append({"omega": FAST_OMEGA, "noise": float(noise), "amplitude": 0.0})
    for family, names in _family_learners(plan.learners):
        env = make_env(family, d, T, noise=noise, dtype=plan.dtype)  # the noise knob is live
        G = make_env(family, d, T, dtype=plan.dtype).lipschitz
        per = {}
        for name in names:
            out, chosen = tuned_play(
                name, env, points, T, plan, tag=f"variation/{name}", lipschitz=G
            )
            v_all = out.V_T.mean(axis=1)
            m_all = out.regret.mean(axis=1)
            top = v_all >= v_all.max() / 100  # where V_T dominates the additive d-terms
            per[name] = {
                "amplitude": [float(a) for a in amplitudes] + [0.0],
                "omega": FAST_OMEGA,
                "noise": [0.0] * len(amplitudes) + [float(noise)],
                "V_T": v_all.tolist(),
                "mean": m_all.tolist(),
                "std": _std(out.regret),
                "regret": out.regret.tolist(),
                "scale": chosen,
                "rejected": out.rejected.tolist(),
                "max_steps": out.max_steps.tolist(),
                "all_in_domain": out.all_in_domain,
                "best_point_ok": out.best_point_ok,
                "slope_vs_V_T": tables.loglog_slope(v_all, m_all),
                "slope_vs_V_T_top": tables.loglog_slope(v_all[top], m_all[top]),
            }
        res[family] = per
    return res


def run_studies(cfg: dict, plan: StudyPlan, *, studies: Sequence[str] = STUDIES) -> dict:
    """Both studies with a configuration ``cfg`` (keys of :data:`QUICK`); the result dict holds
    ``config``, ``dimension`` and ``variation`` as ``benchmarks.bco_dimension`` writes them."""
    import time

    import jax
    import jax.numpy as jnp

    t0 = time.time()
    dt = jnp.dtype(plan.dtype or jnp.float64).name
    scales, eval_seeds = plan.scales, plan.eval_seeds
    result: dict[str, Any] = {
        "config": {
            **cfg,
            "seeds": len(eval_seeds),
            "amplitude": AMPLITUDE,
            "fast_omega": FAST_OMEGA,
            "slow_angle": SLOW_ANGLE,
            "backend": jax.default_backend(),
            "dtype": dt,
            "scale_grid": [float(s) for s in scales],
            "eval_seeds": [int(s) for s in eval_seeds],
            "tuning_seeds": [int(s) for s in plan.tuning_seeds] if len(scales) > 1 else [],
        }
    }
    if "dimension" in studies:
        result["dimension"] = dimension_study(cfg["dims"], cfg["T"], plan)
    if "variation" in studies:
        result["variation"] = variation_study(
            cfg["d_variation"], cfg["T"], plan, amplitudes=cfg["amplitudes"], noise=cfg["noise"]
        )
    result["config"]["wall_s"] = time.time() - t0
    return result


def trial_rounds(cfg: dict, studies: Sequence[str], plan: StudyPlan) -> int:
    """Trial-rounds the studies play (the progress bar's total): per learner, the d
    study plays each d on the evaluation seeds, the V_T study each point (amplitudes and the
    noise point); with several scales each also plays scales x points on the tuning seeds."""
    n_scales = len(plan.scales)
    per_point = len(plan.eval_seeds) + (n_scales * len(plan.tuning_seeds) if n_scales > 1 else 0)
    points = 0
    if "dimension" in studies:
        points += len(cfg["dims"])
    if "variation" in studies:
        points += len(cfg["amplitudes"]) + 1
    return len(plan.learners or BCO_LEARNERS) * points * per_point * cfg["T"]


# ----------------------------------------------------------------------------- command


def add_arguments(b: argparse.ArgumentParser) -> None:
    """Adds ``bco``'s own options to its subparser."""
    b.add_argument(
        "--study",
        default="both",
        help="dimension, variation or both (default both)",
    )
    b.add_argument("--quick", action="store_true", help="d in 5..40, T = 2000, 4 seeds")
    b.add_argument("--rounds", type=int, default=None, help="T (default 10000; quick 2000)")
    b.add_argument("--trials", type=int, default=None, help="evaluation seeds (8; quick 4)")
    b.add_argument("--dims", default=None, help="d values of the d study (5,10,20,40,80)")
    b.add_argument("--d-variation", type=int, default=None, help="d of the V_T study (20)")
    b.add_argument("--amplitudes", default=None, help="drift amplitudes of the V_T study")
    b.add_argument("--noise", type=float, default=None, help="noise of the i.i.d. point (0.3)")
    b.add_argument(
        "--learners",
        default=None,
        help=f"comma list of {', '.join(BCO_LEARNERS)} (default all)",
    )
    b.add_argument(
        "--scale-grid",
        default="1",
        help="step-size scales, tuned on tuning seeds when more than one (default 1)",
    )
    b.add_argument("--tune-trials", type=int, default=4, help="tuning seeds (default 4)")


def validate(args: argparse.Namespace) -> None:
    """Checks every option of ``bco`` before any work (:class:`~.options.UsageError`)."""
    errors: list[str] = []
    opt.check_common(args, errors)  # --rounds and --trials too
    opt.check_int(errors, args.tune_trials, "--tune-trials", minimum=1)
    if args.tune_trials is not None and args.tune_trials > opt.EVAL_SEED_OFFSET:
        errors.append(f"--tune-trials: at most {opt.EVAL_SEED_OFFSET} (evaluation seeds follow)")
    opt.check_int(errors, args.d_variation, "--d-variation", minimum=1)
    opt.check_float(errors, args.noise, "--noise", nonneg=True)
    if args.study not in (*STUDIES, "both"):
        errors.append(f"--study: expected dimension, variation or both, got {args.study!r}")
    cfg = dict(QUICK if args.quick else FULL)
    if args.dims is not None:
        dims = opt.check_float_list(errors, args.dims, "--dims", positive=True)
        if any(d != int(d) for d in dims):
            errors.append(f"--dims: expected integers >= 1, got {args.dims!r}")
        cfg["dims"] = [int(d) for d in dims]
    if args.amplitudes is not None:
        amps = opt.check_float_list(errors, args.amplitudes, "--amplitudes")
        if any(a < 0 for a in amps):
            errors.append(f"--amplitudes: expected numbers >= 0, got {args.amplitudes!r}")
        cfg["amplitudes"] = amps
    scales = opt.check_float_list(errors, args.scale_grid, "--scale-grid", positive=True)
    learners = opt.split_list(args.learners) if args.learners is not None else list(BCO_LEARNERS)
    if not learners:
        errors.append("--learners: expected a non-empty comma list")
    for n in learners:
        if n not in BCO_LEARNERS:
            errors.append(f"--learners: unknown BCO learner {n!r}, expected one of "
                          f"{list(BCO_LEARNERS)}")  # fmt: skip
    opt.finish(errors, args)
    if args.rounds is not None:
        cfg["T"] = args.rounds
    if args.trials is not None:
        cfg["seeds"] = args.trials
    if args.d_variation is not None:
        cfg["d_variation"] = args.d_variation
    if args.noise is not None:
        cfg["noise"] = args.noise
    args.plan = {
        "cfg": cfg,
        "studies": list(STUDIES) if args.study == "both" else [args.study],
        "scales": scales,
        "learners": learners,
        "eval_seeds": list(range(args.seed + opt.EVAL_SEED_OFFSET,
                                 args.seed + opt.EVAL_SEED_OFFSET + cfg["seeds"])),
        "tuning_seeds": list(range(args.seed, args.seed + args.tune_trials)),
    }  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Runs ``bco``: the studies, their figures, tables and summary; returns the exit status."""
    import jax.numpy as jnp

    from bandits_jax.cli import plotting
    from bandits_jax.sim.chunks import Progress

    from . import compile_cache_report, compile_cache_text, dtype_of, say, write_outputs

    plan = args.plan
    cfg, studies, scales = plan["cfg"], plan["studies"], plan["scales"]
    out = pathlib.Path(args.out)
    dtype = dtype_of(args)
    tuning = len(scales) > 1
    say(
        args,
        f"bco: studies {studies}, learners {plan['learners']}, T = {cfg['T']}, "
        f"{cfg['seeds']} evaluation seeds"
        + (f", scale tuned over {scales} on {len(plan['tuning_seeds'])} tuning seeds"
           if tuning else "")
        + f", {jnp.dtype(dtype).name}",
    )  # fmt: skip
    study = StudyPlan(
        plan["eval_seeds"], plan["tuning_seeds"], scales, plan["learners"], None, dtype
    )
    with Progress(trial_rounds(cfg, studies, study), "bco", enabled=not args.quiet) as bar:
        runner = ChunkedRunner(
            out / "checkpoints" / "bco",
            chunk=args.chunk,
            resume=args.resume,
            progress=bar,
            config={"cfg": cfg, "scales": scales, "dtype": jnp.dtype(dtype).name},
        )
        result = run_studies(cfg, study._replace(runner=runner), studies=studies)
    result["config"]["command"] = (
        " ".join(["bandits-jax", *sys.argv[1:]]) if args.argv is None else args.argv
    )
    written = []
    if args.plots:
        plotting.bco_figure(result, out / "bco_dimension.png")
        written.append(out / "bco_dimension.png")
    result["compile_cache"] = compile_cache_report(args)
    output.write_json(out / "bco.json", result)
    output.write_csv(out / "bco.csv", tables.bco_rows(result))
    summary = tables.bco_summary(result) + compile_cache_text(result["compile_cache"])
    (out / "bco_summary.txt").write_text(summary)
    written += [out / "bco.json", out / "bco.csv", out / "bco_summary.txt"]
    print("\n" + summary)
    write_outputs(out, written)
    return 0
