"""``bandits-jax reproduce``: the EOFD-MLogB paper's Figures 1 and 2 (section 4).

The learners come from one registry, :data:`LEARNERS` (key -> :class:`LearnerSpec`: label,
factory, hyperparameter builder): a new row adds a learner to ``--learners``, the figures, the
CSV/JSON tables and the summary; :data:`RATIO_PAIRS` lists the (numerator, denominator) pairs
whose final-regret and time ratios the summary reports when both are run.
"""

from __future__ import annotations

import argparse
import functools
import pathlib
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from bandits_jax.cli import options as opt
from bandits_jax.cli import tables

# ----------------------------------------------------------------------------- settings


class Setting(NamedTuple):
    """A named setting (see ``options.SETTINGS_HELP``).

    Attributes:
      name: the setting's name (e.g. ``"synth-20-1-S8"``).
      title: its title in figures and tables.
      env: the MLogB environment.
      num_outcomes: ``K``.
      dim: ``d``.
      init_env_trial: ``(key, trial_index) -> env_state`` where the environment depends on the
        trial (``-all`` settings: trial ``i`` rewards class ``i mod C``; the index may be a
        traced int32), ``None`` where every trial uses ``env.init(key)``.
      S: the known bound on ``||W*||_F`` (the name's ``S<s>`` or ``--S``) for synthetic and
        low-rank settings, ``None`` for classification data.
      family: ``"synthetic"``, ``"lowrank"`` or ``"classification"``.
    """

    name: str
    title: str
    env: Any
    num_outcomes: int
    dim: int
    init_env_trial: Callable[[Any, Any], Any] | None = None
    S: float | None = None
    family: str = "synthetic"


def _all_targets(env: Any) -> Callable[[Any, Any], Any]:
    """Trial ``i`` of a binary classification env rewards class ``i mod C``."""
    C = env.num_classes

    def init_env_trial(key: Any, trial_index: Any) -> Any:
        return env.init_target(key, trial_index % C)

    return init_env_trial


def make_setting(
    name: str, *, S: float | None, dtype: Any, mnist_path: str | None = None
) -> Setting:
    """Builds the environment of a named setting (names checked by ``options.check_setting``).

    ``S`` (``--S``) is ``||W*||_F`` of synthetic and low-rank settings whose name has no
    ``-S<s>``; classification settings ignore it.
    """
    from bandits_jax import envs
    from bandits_jax.envs import classification

    try:
        p = opt.parse_setting(name)
    except ValueError as e:
        raise ValueError(f"setting: {e}") from None
    if p is None:
        raise ValueError(f"setting: unknown {name!r}, expected {opt.SETTINGS_HELP}")
    if p.family in ("synthetic", "lowrank"):
        d, K = p.D, p.K
        S_env = p.S if p.S is not None else (1.0 if S is None else S)
        named_S = "" if p.S is None else f", S = {p.S:g}"
        if p.family == "synthetic":
            env = envs.synthetic_mlogb(num_outcomes=K, dim=d, S=S_env, dtype=dtype)
            title = f"synthetic (d, K) = ({d}, {K}){named_S}"
        else:
            env = envs.lowrank_mlogb(num_outcomes=K, dim=d, rank=p.R, S=S_env, dtype=dtype)
            title = f"low-rank (d, K, r) = ({d}, {K}, {p.R}){named_S}"
        return Setting(name, title, env, K, d, None, float(S_env), p.family)
    part = "" if p.half is None else f", {('even', 'odd')[p.half]} half"
    if p.kind == "digits-k4":
        env = classification.digits_multinomial(num_outcomes=4, half=p.half, dtype=dtype)
        title = f"digits multinomial (d = 65, K = 4{part})"
        return Setting(name, title, env, 4, env.dim, family=p.family)
    if p.kind == "mnist":
        env = classification.mnist(mnist_path, dtype=dtype)
        return Setting(name, "MNIST (d = 785, K = 1)", env, 1, env.dim, family=p.family)
    build = {
        "digits": classification.digits,
        "wine": classification.wine,
        "iris": classification.iris,
        "cancer": classification.breast_cancer,
    }[p.kind]
    if p.kind == "digits":
        build = functools.partial(build, half=p.half)
    if p.all_targets:
        env = build(target=0, dtype=dtype)
        title = f"{p.kind}{part}, {env.num_classes} classes in turn (d = {env.dim})"
        return Setting(name, title, env, 1, env.dim, _all_targets(env), None, p.family)
    env = build(target=p.target, dtype=dtype)
    title = "digits" if name == "digits" else f"digits, target {p.target}"
    return Setting(name, f"{title} (d = {env.dim}, K = 1{part})", env, 1, env.dim, family=p.family)


def env_rewards(setting: Setting) -> Any:
    """The reward of each outcome of the setting's environment (``None``: the learner's default)."""
    r = getattr(setting.env, "rewards", None)
    return None if r is None else np.asarray(r, np.float64).tolist()


# ----------------------------------------------------------------------------- learners


class Recipe(NamedTuple):
    """What a hyperparameter builder sees. ``l`` and ``e`` are floats in ``reproduce`` and
    arrays (one entry per grid point) in ``sweep``; ``beta`` is a float, "theory" or "order"."""

    num_outcomes: int
    dim: int
    S: float
    horizon: int
    l: Any
    e: Any
    beta: Any
    rewards: Any
    dtype: Any


class LearnerSpec(NamedTuple):
    """One row of the learner registry.

    Attributes:
      label: short name in tables and JSON (e.g. ``"EOFD"``).
      legend: name in figure legends (e.g. ``"EOFD-MLogB"``).
      factory: ``(K, d, m, **opts) -> MLogBLearner`` (``m``: sketch size, ignored by learners
        without a sketch).
      hparams: ``Recipe -> hyperparameters`` for the learner's ``init``.
      sketched: whether ``m`` applies (shown in the ``m`` column).
      kind: for a tuned learner, its :data:`bandits_jax.mlogb.recipes.TUNED` entry: ``reproduce``
        runs it at that tuned point instead of ``--l/--e/--beta`` (``sweep`` uses its grid).
      program: :func:`bandits_jax.mlogb.recipes.program_kind` of its kind: learners with the same
        program share one compiled chunk on a setting (they differ in their initial state).
    """

    label: str
    legend: str
    factory: Callable[..., Any]
    hparams: Callable[[Recipe], Any]
    sketched: bool = False
    kind: str | None = None
    program: str = ""

    @property
    def color(self) -> str:
        """Its colour in every figure (:func:`bandits_jax.plotting.learner_color`)."""
        from bandits_jax.plotting import learner_color

        return learner_color(self.legend)


def sketch_size(K: int, d: int) -> int:
    """Section 4's ``m = floor(K d / 10)`` (at least 1), the default ``--sketch``."""
    from bandits_jax.mlogb.recipes import sketch_size as section4_m

    return section4_m(K, d)


def _spec(kind: str, label: str, legend: str, sketched: bool, tuned: bool = True) -> LearnerSpec:
    """A registry row for a kind of :mod:`bandits_jax.mlogb.recipes` (``tuned``: ``reproduce``
    runs it at its tuned point, else at ``--l/--e/--beta``)."""

    def factory(K: int, d: int, m: int, **opts: Any) -> Any:
        from bandits_jax.mlogb import recipes

        return recipes.make_learner(kind, num_outcomes=K, dim=d, sketch_size=m)

    def hparams(r: Recipe) -> Any:
        from bandits_jax.mlogb import recipes

        return recipes.hparams_for(kind, **r._asdict())

    from bandits_jax.mlogb.recipes import program_kind

    program = program_kind(kind)
    return LearnerSpec(label, legend, factory, hparams, sketched, kind if tuned else None, program)


LEARNERS: dict[str, LearnerSpec] = {
    "eofd": _spec("eofd", "EOFD", "EOFD-MLogB", True, tuned=False),
    "oful": _spec("oful", "OFUL", "OFUL-MLogB", False, tuned=False),
    "eofd-tuned": _spec("eofd", "EOFD tuned", "EOFD-MLogB (tuned)", True),
    "eofd-robust": _spec("eofd-robust", "EOFD robust", "EOFD-MLogB robust (tuned)", True),
    "eofd-adaptive": _spec("eofd-adaptive", "EOFD adaptive", "EOFD-MLogB adaptive (tuned)", True),
    "oful-tuned": _spec("oful", "OFUL tuned", "OFUL-MLogB (tuned)", False),
    "greedy": _spec("greedy", "greedy", "greedy (robust EOFD estimate)", True),
    "linucb": _spec("linucb", "LinUCB", "LinUCB (tuned)", False),
    "ecolog": _spec("ecolog", "ECOLog", "ada-OFU-ECOLog (tuned)", False),
    "uniform": _spec("uniform", "random", "uniform random", False),
}
DEFAULT_LEARNERS = ("eofd-robust", "eofd-tuned", "oful-tuned", "ecolog", "linucb", "uniform")
RATIO_PAIRS: tuple[tuple[str, str], ...] = (
    ("eofd", "oful"),
    ("eofd-tuned", "oful-tuned"),
    ("eofd-robust", "oful-tuned"),
    ("eofd-adaptive", "oful-tuned"),
    ("eofd-robust", "linucb"),
)


def tuned_point(spec: LearnerSpec, recipe: Recipe) -> Recipe:
    """The recipe a learner runs with in ``reproduce``: its tuned point (for the known bound
    ``recipe.S``, or with no known bound when it is ``None``), else ``--l/--e/--beta``."""
    if spec.kind is None:
        return recipe
    from bandits_jax.mlogb import recipes

    ex, _ = recipes.tuned_point(spec.kind, recipe.S)
    return recipe._replace(l=ex.l, e=ex.e, beta=ex.beta)


def supports(spec: LearnerSpec, num_outcomes: int) -> bool:
    """Whether a registry learner runs with K outcomes (ECOLog: K = 1 only)."""
    from bandits_jax.mlogb.recipes import K1_ONLY

    return num_outcomes == 1 or spec.kind not in K1_ONLY


def learner_bound(args: argparse.Namespace, setting: Setting) -> float | None:
    """The ``S`` the learners are given: ``--S``, else the setting's known bound (``None`` on
    classification data: each recipe chooses)."""
    return args.S if args.S is not None else setting.S


KEPT = ("regret", "bonus_spread", "estimate_spread", "explored", "status", "select_status")


def keep_mlogb(metrics: Any) -> dict[str, Any]:
    """The per-round metrics ``reproduce`` keeps on the host (:data:`KEPT`)."""
    return {k: getattr(metrics, k) for k in KEPT}


# ----------------------------------------------------------------------------- options


def add_arguments(r: argparse.ArgumentParser) -> None:
    """Adds ``reproduce``'s own options to its subparser."""
    r.add_argument("--quick", action="store_true", help="reduced run (T=200, 4 trials)")
    r.add_argument("--rounds", type=int, default=None, help="T (default 2000; quick 200)")
    r.add_argument("--trials", type=int, default=None, help="trials (default 10; quick 4)")
    r.add_argument(
        "--settings",
        default=None,
        help=f"comma list of {opt.SETTINGS_HELP} (default {', '.join(opt.DEFAULT_SETTINGS)}, "
        "+ mnist if found)",
    )
    r.add_argument(
        "--learners",
        default=None,
        help=f"comma list of {', '.join(LEARNERS)} (default {','.join(DEFAULT_LEARNERS)})",
    )
    r.add_argument("--l", type=float, default=0.75, help="lambda exponent l (0.75)")
    r.add_argument("--e", type=float, default=0.75, help="eta exponent e (0.75)")
    r.add_argument(
        "--beta",
        default="theory",
        help="confidence radius beta_t: theory = Theorem 1's radius (eq. 36, all its constants), "
        "order = eq. 27's order-form radius (its O(.) terms, constants dropped), or a fixed "
        "number >= 0 (default theory)",
    )


def validate(args: argparse.Namespace) -> None:
    """Checks every option and resolves defaults into ``args.plan``; raises ``UsageError``."""
    errors: list[str] = []
    opt.check_common(args, errors)  # --rounds and --trials too
    opt.check_float(errors, args.l, "--l")
    opt.check_float(errors, args.e, "--e")
    opt.check_beta(errors, args.beta, "--beta")
    learners = opt.split_list(args.learners) if args.learners is not None else None
    if learners is not None and not learners:
        errors.append("--learners: expected a non-empty comma list")
    for name in learners or []:
        if name not in LEARNERS:
            errors.append(f"--learners: unknown learner {name!r}, expected one of {list(LEARNERS)}")
    settings = opt.split_list(args.settings) if args.settings is not None else None
    if settings is not None and not settings:
        errors.append("--settings: expected a non-empty comma list")
    for name in settings or []:
        if (err := opt.check_setting(name)) is not None:
            errors.append(err)
    names = settings or list(opt.DEFAULT_SETTINGS)
    notes: list[str] = []
    if not errors:
        if "mnist" in names or args.mnist is not None:
            opt.check_mnist(errors, args.mnist)
            if "mnist" not in names:
                names.append("mnist")  # an explicit --mnist adds it to the default settings
        elif settings is None:
            if opt.cached_mnist_usable():
                names.append("mnist")
            else:
                from bandits_jax.envs.mnist import default_cache_dir

                notes.append(
                    f"MNIST skipped: no usable files in {default_cache_dir()} (put "
                    "train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz], or mnist.npz,"
                    " there or pass --mnist PATH)."
                )
    opt.finish(errors, args)
    T = args.rounds or (200 if args.quick else 2000)
    args.plan = {
        "T": T,
        "trials": args.trials or (4 if args.quick else 10),
        "chunk": opt.chunk_size(T, args.chunk),
        "settings": names,
        "learners": learners or list(DEFAULT_LEARNERS),
        "notes": notes,
    }


# ----------------------------------------------------------------------------- run


class _Played(NamedTuple):
    """One learner's trials on one setting."""

    point: Recipe  # the recipe it ran with (its tuned point, or --l/--e/--beta)
    S: float | None  # the bound its hyperparameters use (None: LinUCB, uniform)
    stats: dict[str, Any]  # tables.learner_stats
    regrets: np.ndarray  # (trials, T) per-round regret
    per_round: list[float]  # seconds per round of each trial (compile excluded)


class _SettingRuns(NamedTuple):
    """What every learner of a setting shares: its environment's compiled program
    (:class:`~bandits_jax.sim.chunks.DrawFn`), a :class:`~bandits_jax.sim.chunks.ChunkFn` per
    :attr:`LearnerSpec.program` (filled as learners need them) and each trial's start
    ``(env_state, run_key)`` (trial ``i``: seed ``args.seed + i``)."""

    draws: Any
    chunks: dict[str, Any]
    starts: list[tuple[Any, Any]]


def _setting_runs(args: argparse.Namespace, setting: Setting) -> _SettingRuns:
    """The setting's :class:`_SettingRuns`, with no learner program compiled yet."""
    from bandits_jax import mlogb
    from bandits_jax.sim import sweep
    from bandits_jax.sim.chunks import DrawFn

    starts = []
    for i in range(args.plan["trials"]):
        env_keys, run_keys = sweep.seed_keys([args.seed + i])
        if setting.init_env_trial is None:
            env_state = setting.env.init(env_keys[0])
        else:  # the environment depends on the trial (e.g. its target class)
            env_state = setting.init_env_trial(env_keys[0], i)
        starts.append((env_state, run_keys[0]))
    return _SettingRuns(DrawFn(mlogb.draw_round(setting.env)), {}, starts)


def _chunk_fn(runs: _SettingRuns, spec: LearnerSpec, learner: Any, env: Any) -> Any:
    """The learner's chunk program: the one of its :attr:`LearnerSpec.program` on this setting,
    built on first use (its compile time is then counted in this learner's)."""
    from bandits_jax import mlogb
    from bandits_jax.sim.chunks import ChunkFn

    if spec.program not in runs.chunks:
        respond = mlogb.respond_round(learner, env)
        runs.chunks[spec.program] = ChunkFn(respond, draws=runs.draws)
    return runs.chunks[spec.program]


class _Ready(NamedTuple):
    """A learner ready to play a setting: its point (tuned, or --l/--e/--beta), hyperparameters,
    initial state and chunk program, compiled for the plan's chunks in ``compile_seconds``."""

    point: Recipe
    hp: Any
    state: Any
    chunk_fn: Any
    compile_seconds: float


class _Prepared(NamedTuple):
    """A setting made ready for its learners: its environment and each trial's start
    (:class:`_SettingRuns`), the recipe, sketch size and the learners of the plan it supports."""

    setting: Setting
    recipe: Recipe
    m: int
    playing: list[str]
    runs: _SettingRuns


def _prepare(args: argparse.Namespace, name: str, dtype: Any) -> _Prepared:
    """Builds setting ``name`` for the plan. Learners defined for K = 1 only are skipped on
    K >= 2 settings with a note."""
    plan = args.plan
    setting = make_setting(name, S=args.S, dtype=dtype, mnist_path=args.mnist)
    K, d = setting.num_outcomes, setting.dim
    recipe = Recipe(K, d, learner_bound(args, setting), plan["T"], args.l, args.e,
                    opt.beta_arg(args.beta), env_rewards(setting), dtype)  # fmt: skip
    playing = [n for n in plan["learners"] if supports(LEARNERS[n], K)]
    for n in plan["learners"]:
        if n not in playing:
            plan["notes"].append(f"{LEARNERS[n].label} skipped on {name}: defined for K = 1 only.")
    m = args.sketch or sketch_size(K, d)
    return _Prepared(setting, recipe, m, playing, _setting_runs(args, setting))


def _ready(
    args: argparse.Namespace, setting: Setting, lname: str, recipe: Recipe, m: int,
    runs: _SettingRuns,
) -> _Ready:  # fmt: skip
    """Builds learner ``lname`` for ``setting`` and compiles its chunks on trial 0's start
    (with ``--resume`` they compile when a trial needs them: it may have nothing left to play)."""
    from bandits_jax.sim.chunks import compile_for
    from bandits_jax.sim.runner import init_run

    spec = LEARNERS[lname]
    learner = spec.factory(setting.num_outcomes, setting.dim, m)
    point = tuned_point(spec, recipe)
    hp = spec.hparams(point)
    state = compile_for(learner.init, hp)(hp)  # one program, not one per operation
    chunk_fn = _chunk_fn(runs, spec, learner, setting.env)
    before = chunk_fn.compile_seconds  # this job's: a program's learners share one job
    if not args.resume:
        chunk_fn.compile_run(init_run(state, *runs.starts[0]), args.plan["T"], args.plan["chunk"])
    return _Ready(point, hp, state, chunk_fn, chunk_fn.compile_seconds - before)


def _ready_all(
    args: argparse.Namespace, prepared: list[_Prepared]
) -> tuple[dict[tuple[str, str], _Ready], float, int]:
    """Every learner of every prepared setting made :func:`_ready` on the idle cores at once
    (:func:`bandits_jax.sim.chunks.compile_ahead`), before any trial: one job per setting and
    :attr:`LearnerSpec.program` (its learners after the first find it compiled), in learner-major
    order (a learner on every setting, then the next: the default plan lists the heavier
    programs first, so the threads finish together). Returns the learners by ``(setting,
    learner)``, the wall seconds of them all and the threads used."""
    from bandits_jax import threads
    from bandits_jax.sim.chunks import compile_ahead

    groups: dict[tuple[str, str], tuple[_Prepared, list[str]]] = {}
    for lname in args.plan["learners"]:
        for p in prepared:
            if lname in p.playing:
                key = (p.setting.name, LEARNERS[lname].program)
                groups.setdefault(key, (p, []))[1].append(lname)

    def job(p: _Prepared, names: list[str]) -> list[_Ready]:
        return [_ready(args, p.setting, n, p.recipe, p.m, p.runs) for n in names]

    jobs = [functools.partial(job, p, names) for p, names in groups.values()]
    cores = threads.compile_cores()
    done, wall, workers = compile_ahead(
        jobs, workers=len(cores), cores=cores, what=f"{len(jobs)} learners' programs"
    )
    ready = {(p.setting.name, n): r for (p, names), rs in zip(groups.values(), done, strict=True)
             for n, r in zip(names, rs, strict=True)}  # fmt: skip
    return ready, wall, workers


def _play_learner(
    args: argparse.Namespace,
    setting: Setting,
    lname: str,
    recipe: Recipe,
    m: int,
    ready: _Ready,
    bar: Any,
    runs: _SettingRuns,
) -> _Played:
    """Plays ``args.plan``'s trials of learner ``lname``, made :func:`_ready`, on ``setting``
    from ``runs.starts``, one chunked run per trial (its checkpoints under ``--out``)."""
    from bandits_jax.sim.chunks import run_chunked
    from bandits_jax.sim.runner import init_run

    plan, (point, hp, learner_state, chunk_fn, compile_s) = args.plan, ready
    config = {
        "setting": setting.name,
        "learner": lname,
        "l": point.l,
        "e": point.e,
        "beta": point.beta,
        "S": recipe.S,
        "m": m,
        "dtype": np.dtype(recipe.dtype).name,
    }
    results = [
        run_chunked(
            chunk_fn,
            init_run(learner_state, env_state, run_key),
            plan["T"],
            chunk_size=plan["chunk"],
            checkpoint_dir=pathlib.Path(
                args.out, "checkpoints", setting.name, lname, f"trial_{i:03d}"
            ),
            resume=args.resume,
            config={**config, "seed": args.seed + i},
            progress=bar,
            keep=keep_mlogb,
        )
        for i, (env_state, run_key) in enumerate(runs.starts)
    ]
    per_round = [r.stats.total_run_seconds / plan["T"] for r in results]
    kept = {k: np.stack([np.asarray(r.metrics[k]) for r in results]) for k in KEPT}
    regrets = kept["regret"].astype(np.float64)
    stats = tables.learner_stats(
        regrets,
        per_round,
        bonus=kept["bonus_spread"],
        estimate=kept["estimate_spread"],
        explored=kept["explored"],
        status=kept["status"],
        select_status=kept["select_status"],
        compile_seconds=compile_s + sum(r.stats.compile_seconds for r in results),
    )
    S_used = float(hp.S) if hasattr(hp, "S") else None
    return _Played(point, S_used, stats, regrets, per_round)


def _row(setting: Setting, lname: str, m: int, played: _Played, plan: dict) -> dict[str, Any]:
    """One learner's line of ``reproduce.csv``."""
    spec, st, p = LEARNERS[lname], played.stats, played.point
    return {
        "setting": setting.name,
        "learner": spec.label,
        "d": setting.dim,
        "K": setting.num_outcomes,
        "m": m if spec.sketched else "",
        "l": p.l,
        "e": p.e,
        "beta": p.beta,
        "S": "" if played.S is None else played.S,
        "trials": plan["trials"],
        "rounds": plan["T"],
        "final_regret_mean": st["final_regret_mean"],
        "final_regret_std": st["final_regret_std"],
        "ms_per_round_mean": 1e3 * st["seconds_per_round_mean"],
        "ms_per_round_std": 1e3 * st["seconds_per_round_std"],
        "compile_s": st["compile_seconds"],
        "bonus_ratio": st["bonus_ratio_median"],
        "explore_rate": st["explore_rate"],
        "rejected_updates": st["rejected_updates"],
        "max_steps": st["max_steps"],
        "flagged_selections": st["flagged_selections"],
    }


def _play_setting(
    args: argparse.Namespace, p: _Prepared, ready: dict[tuple[str, str], _Ready], bar: Any
) -> tuple[dict, dict, list]:
    """Every learner of the plan on prepared setting ``p``, made :func:`_ready`: its report
    entry, the played learners (legend -> :class:`_Played`) and its CSV rows."""
    setting, plan = p.setting, args.plan
    entry: dict[str, Any] = {
        "title": setting.title, "d": setting.dim, "K": setting.num_outcomes, "m": p.m,
        "learners": {},
    }  # fmt: skip
    played, rows, by_key = {}, [], {}
    bar.describe(setting.name)
    for lname in p.playing:
        spec = LEARNERS[lname]
        r = ready[setting.name, lname]
        pl = _play_learner(args, setting, lname, p.recipe, p.m, r, bar, p.runs)
        entry["learners"][spec.label] = {
            **pl.stats, "l": pl.point.l, "e": pl.point.e, "beta": pl.point.beta, "S": pl.S
        }  # fmt: skip
        by_key[lname], played[spec.legend] = pl.stats, pl
        rows.append(_row(setting, lname, p.m, pl, plan))
    entry["ratios"] = tables.pair_ratios(by_key, RATIO_PAIRS)
    entry.update(entry["ratios"])  # "eofd_over_oful": {...} at the top level, as before
    return entry, played, rows


def run(args: argparse.Namespace) -> int:
    """Runs ``reproduce``: every setting and learner of the plan, the figures, the tables and the
    summary; returns the exit status."""
    import jax

    from bandits_jax import plotting
    from bandits_jax.sim import sweep
    from bandits_jax.sim.chunks import Progress

    from . import compile_cache_report, compile_cache_text, dtype_of, say, write_outputs

    t0 = time.perf_counter()
    plan = args.plan
    out = pathlib.Path(args.out)
    T, trials, chunk = plan["T"], plan["trials"], plan["chunk"]
    dtype = dtype_of(args)
    dtype_name = jax.numpy.dtype(dtype).name
    say(
        args,
        f"reproduce: settings {plan['settings']}, learners {plan['learners']}, T = {T}, "
        f"{trials} trials, chunks of {chunk} rounds, {dtype_name}, (l, e) = ({args.l}, "
        f"{args.e}), beta = {args.beta}",
    )
    report: dict[str, Any] = {
        "command": " ".join(["bandits-jax", *sys.argv[1:]]) if args.argv is None else args.argv,
        "rounds": T,
        "trials": trials,
        "chunk": chunk,
        "dtype": dtype_name,
        "l": args.l,
        "e": args.e,
        "beta": args.beta,
        "S": args.S,
        "backend": jax.default_backend(),
        "settings": {},
    }
    regret_panels, time_panels, rows = [], [], []
    prepared = [_prepare(args, name, dtype) for name in plan["settings"]]
    total = sum(len(p.playing) for p in prepared) * trials * T  # trial-rounds
    with Progress(total, "reproduce", enabled=not args.quiet) as bar:
        # every learner compiles before any trial is timed, all settings' at once
        ready, report["compile_wall_seconds"], report["compile_threads"] = _ready_all(
            args, prepared
        )
        for p in prepared:
            entry, played, setting_rows = _play_setting(args, p, ready, bar)
            report["settings"][p.setting.name] = entry
            rows += setting_rows
            regret_panels.append((entry["title"], {k: v.regrets for k, v in played.items()}))
            time_panels.append((entry["title"], {k: v.per_round for k, v in played.items()}))

    written = []
    if args.plots:
        plotting.regret_figure(regret_panels, out / "reproduce_regret.png")
        plotting.time_figure(time_panels, out / "reproduce_time.png")
        written += [out / "reproduce_regret.png", out / "reproduce_time.png"]
    report["compile_cache"] = compile_cache_report(args)
    report["wall_seconds"] = time.perf_counter() - t0
    sweep.write_json(out / "reproduce.json", report)
    sweep.write_csv(out / "reproduce.csv", rows)
    labels = {k: v.label for k, v in LEARNERS.items()}
    summary = tables.reproduce_summary(report, rows, plan["notes"], labels)
    summary += compile_cache_text(report["compile_cache"])
    (out / "reproduce_summary.txt").write_text(summary)
    written += [out / "reproduce.json", out / "reproduce.csv", out / "reproduce_summary.txt"]
    print("\n" + summary)
    write_outputs(out, written)
    return 0
