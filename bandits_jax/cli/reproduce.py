"""``bandits-jax reproduce``: the EOFD-MLogB paper's Figures 1 and 2 (section 4).

The learners are the kinds of the library's registry (:data:`bandits_jax.mlogb.recipes.REGISTRY`):
a new row there adds a learner to ``--learners``, the figures, the CSV/JSON tables and the
summary; :data:`RATIO_PAIRS` lists the (numerator, denominator) pairs whose final-regret and time
ratios the summary reports when both are run.
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
from bandits_jax.cli import output, tables
from bandits_jax.mlogb import recipes

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
    if p.family in ("synthetic", "lowrank", "heavytail"):
        d, K = p.D, p.K
        S_env = p.S if p.S is not None else (1.0 if S is None else S)
        named_S = "" if p.S is None else f", S = {p.S:g}"
        if p.family == "synthetic":
            env = envs.synthetic_mlogb(num_outcomes=K, dim=d, S=S_env, dtype=dtype)
            title = f"synthetic (d, K) = ({d}, {K}){named_S}"
        elif p.family == "heavytail":
            env = envs.heavy_tail_mlogb(num_outcomes=K, dim=d, decay=p.decay, S=S_env, dtype=dtype)
            title = f"heavy-tailed (d, K) = ({d}, {K}), spectrum i^-{p.decay:g}{named_S}"
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


def learner_sketch(sketch: int | None, K: int, d: int, kind: str) -> int:
    """The sketch size a learner runs with: ``--sketch``, else its kind's default
    (:func:`bandits_jax.mlogb.recipes.sketch_size`)."""
    return sketch or recipes.sketch_size(K, d, kind)


def make_learner(kind: str, K: int, d: int, m: int, horizon: int | None = None) -> Any:
    """The registry kind's learner (:func:`bandits_jax.mlogb.recipes.make_learner`)."""
    return recipes.make_learner(kind, num_outcomes=K, dim=d, sketch_size=m, horizon=horizon)


def learner_hparams(kind: str, r: Recipe) -> Any:
    """The registry kind's hyperparameters at ``r`` (:func:`.recipes.hparams_for`)."""
    return recipes.hparams_for(kind, **r._asdict())


def learner_row(name: str) -> recipes.Kind:
    """The registry's row of ``name`` (:data:`bandits_jax.mlogb.recipes.REGISTRY`)."""
    return recipes.REGISTRY[name]


DEFAULT_LEARNERS = ("eofd-robust", "eofd", "oful", "ecolog", "linucb", "uniform")
RATIO_PAIRS: tuple[tuple[str, str], ...] = (
    ("eofd-paper", "oful-paper"),
    ("eofd", "oful"),
    ("eofd-robust", "oful"),
    ("eofd-adaptive", "oful"),
    ("eofd-robust", "linucb"),
)


def tuned_point(name: str, recipe: Recipe) -> Recipe:
    """The recipe a learner runs with in ``reproduce``: its tuned point (for the known bound
    ``recipe.S``, or with no known bound when it is ``None``); the paper's kinds
    ``--l/--e/--beta``."""
    if learner_row(name).paper:
        return recipe
    ex, _ = recipes.tuned_point(name, recipe.S, num_outcomes=recipe.num_outcomes, dim=recipe.dim)
    return recipe._replace(l=ex.l, e=ex.e, beta=ex.beta)


def check_learners(errors: list[str], names: list[str]) -> None:
    """One error line for each name of ``--learners`` that is not a registry kind."""
    for name in names:
        if name not in recipes.KINDS:
            errors.append(
                f"--learners: unknown learner {name!r}, expected one of {list(recipes.KINDS)}"
            )


def supports(name: str, num_outcomes: int) -> bool:
    """Whether a registry kind runs with K outcomes (ECOLog: K = 1 only)."""
    return num_outcomes == 1 or not learner_row(name).k1_only


def learner_bound(args: argparse.Namespace, setting: Setting) -> float | None:
    """The ``S`` the learners are given: ``--S``, else the setting's known bound (``None`` on
    classification data: each recipe chooses)."""
    return args.S if args.S is not None else setting.S


# CPU throughput levels off here (docs/bench/batched_throughput_cpu.json)
AUTO_BATCH = 16
AUTO_BATCH_HELP = "all trials, at most 16 a call"
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
        help=f"comma list of {', '.join(recipes.KINDS)} (default {','.join(DEFAULT_LEARNERS)})",
    )
    r.add_argument(
        "--batch",
        default="auto",
        help="trials per compiled call, played as one vmapped batch: N or auto (default: "
        + AUTO_BATCH_HELP
        + ")",
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
    batch = None
    if args.batch != "auto":
        try:
            batch = int(args.batch)
        except (TypeError, ValueError):
            batch = 0
        if batch < 1:
            errors.append(f"--batch: expected an integer >= 1 or auto, got {args.batch!r}")
    learners = opt.split_list(args.learners) if args.learners is not None else None
    if learners is not None and not learners:
        errors.append("--learners: expected a non-empty comma list")
    check_learners(errors, learners or [])
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
    trials = args.trials or (4 if args.quick else 10)
    args.plan = {
        "T": T,
        "trials": trials,
        "batch": min(batch or AUTO_BATCH, trials),
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
    per_round: list[float]  # seconds per trial-round of each timed repeat (TIMED_REPEATS)
    m: int  # the sketch size it ran with (learner_sketch)


class _Prepared(NamedTuple):
    """A setting made ready for its learners: the recipe, Section 4's sketch size (the setting's
    ``m``; each learner runs with :func:`learner_sketch`), the learners of the plan
    it supports and each trial's environment state and run key, stacked along a trial axis
    (trial ``i``: seed ``args.seed + i``)."""

    setting: Setting
    recipe: Recipe
    m: int
    playing: list[str]
    envs: Any
    keys: Any


def _prepare(args: argparse.Namespace, name: str, dtype: Any) -> _Prepared:
    """Builds setting ``name`` for the plan. Learners defined for K = 1 only are skipped on
    K >= 2 settings with a note."""
    import jax

    from bandits_jax.checks import stack_trees
    from bandits_jax.sim import sweep

    plan = args.plan
    setting = make_setting(name, S=args.S, dtype=dtype, mnist_path=args.mnist)
    K, d = setting.num_outcomes, setting.dim
    recipe = Recipe(K, d, learner_bound(args, setting), plan["T"], args.l, args.e,
                    opt.beta_arg(args.beta), env_rewards(setting), dtype)  # fmt: skip
    playing = [n for n in plan["learners"] if supports(n, K)]
    for n in plan["learners"]:
        if n not in playing:
            plan["notes"].append(
                f"{learner_row(n).label} skipped on {name}: defined for K = 1 only."
            )
    m = args.sketch or recipes.sketch_size(K, d)
    env_keys, run_keys = sweep.seed_keys([args.seed + i for i in range(plan["trials"])])
    if setting.init_env_trial is None:
        envs = jax.jit(jax.vmap(setting.env.init))(env_keys)
    else:  # the environment depends on the trial (e.g. its target class, chosen on the host)
        envs = stack_trees([setting.init_env_trial(k, i) for i, k in enumerate(env_keys)])
    return _Prepared(setting, recipe, m, playing, envs, run_keys)


TIMED_REPEATS = 2  # the timed pass: the first chunk of the first batch, this many times


def _timed_pass(chunk_fn: Any, state: Any, length: int) -> list[float]:
    """Seconds per trial-round of ``length`` rounds of the batch ``state`` (its own timed pass:
    no checkpoint, no host copy of metrics, compile excluded), :data:`TIMED_REPEATS` times."""
    import jax
    import jax.numpy as jnp

    exe = chunk_fn.compiled(state, length)  # compiled already unless resumed past its use
    runs = chunk_fn.runs(state)
    out = []
    for _ in range(TIMED_REPEATS):
        copy = jax.block_until_ready(jax.tree.map(jnp.copy, state))
        t0 = time.perf_counter()
        jax.block_until_ready(exe(copy))
        out.append((time.perf_counter() - t0) / (length * runs))
    return out


def _trial_states(learner: Any, hp: Any, state: Any, idx: np.ndarray) -> Any:
    """The learner states of trials ``idx``: ``state`` for each, except that a learner with its
    own randomness (a ``seed`` hyperparameter: uniform, Thompson sampling) is seeded by the
    trial's index, so that trials draw independently (and a batch as it would alone)."""
    import jax
    import jax.numpy as jnp

    if "seed" not in getattr(hp, "_fields", ()):
        return jax.tree.map(lambda x: jnp.repeat(x[None], len(idx), axis=0), state)
    hps = jax.tree.map(lambda x: jnp.repeat(jnp.asarray(x)[None], len(idx), axis=0), hp)
    return jax.jit(jax.vmap(learner.init))(hps._replace(seed=jnp.asarray(idx, jnp.uint32)))


def _play_learner(args: argparse.Namespace, p: _Prepared, lname: str, bar: Any) -> _Played:
    """Plays ``args.plan``'s trials of learner ``lname`` on prepared setting ``p``: batches of
    ``plan["batch"]`` trials, each one chunked run of a vmapped batch (its checkpoints under
    ``--out``), then the timed pass on the first batch."""
    import jax
    import jax.numpy as jnp

    from bandits_jax import mlogb
    from bandits_jax.sim.chunks import ChunkFn, run_chunked
    from bandits_jax.sim.runner import RunState

    plan, setting, recipe = args.plan, p.setting, p.recipe
    m = learner_sketch(args.sketch, setting.num_outcomes, setting.dim, lname)
    learner = make_learner(lname, setting.num_outcomes, setting.dim, m, plan["T"])
    point = tuned_point(lname, recipe)
    hp = learner_hparams(lname, point)
    state = jax.jit(learner.init)(hp)
    chunk_fn = ChunkFn(mlogb.interact(learner, setting.env), batched=True)
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
    trials, size = plan["trials"], plan["batch"]
    results, first = [], None
    for b, lo in enumerate(range(0, trials, size)):
        idx = np.arange(lo, min(lo + size, trials))
        n = len(idx)
        start = RunState(
            learner=_trial_states(learner, hp, state, idx),
            env=jax.tree.map(lambda x: x[idx], p.envs),  # noqa: B023
            key=p.keys[idx],
            t=jnp.zeros((n,), jnp.int32),
        )
        if first is None:
            first = start
        if b == 0 and not args.resume:  # every chunk length, before any chunk is timed
            chunk_fn.compile_run(start, plan["T"], plan["chunk"], bar)
        results.append(
            run_chunked(
                chunk_fn,
                start,
                plan["T"],
                chunk_size=plan["chunk"],
                checkpoint_dir=pathlib.Path(
                    args.out, "checkpoints", setting.name, lname, f"trials_{lo:03d}-{idx[-1]:03d}"
                ),
                resume=args.resume,
                config={**config, "seeds": [args.seed + int(i) for i in idx]},
                progress=bar,
                keep=keep_mlogb,
            )
        )
    per_round = _timed_pass(chunk_fn, first, min(plan["chunk"], plan["T"]))
    kept = {k: np.concatenate([np.asarray(r.metrics[k]) for r in results]) for k in KEPT}
    regrets = kept["regret"].astype(np.float64)
    stats = tables.learner_stats(
        regrets,
        per_round,
        bonus=kept["bonus_spread"],
        estimate=kept["estimate_spread"],
        explored=kept["explored"],
        status=kept["status"],
        select_status=kept["select_status"],
        compile_seconds=chunk_fn.compile_seconds,
    )
    S_used = float(hp.S) if hasattr(hp, "S") else None
    return _Played(point, S_used, stats, regrets, per_round, m)


def _row(setting: Setting, lname: str, m: int, played: _Played, plan: dict) -> dict[str, Any]:
    """One learner's line of ``reproduce.csv``."""
    spec, st, p = learner_row(lname), played.stats, played.point
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


def _play_setting(args: argparse.Namespace, p: _Prepared, bar: Any) -> tuple[dict, dict, list]:
    """Every learner of the plan on prepared setting ``p``: its report entry, the played
    learners (legend -> :class:`_Played`) and its CSV rows."""
    setting, plan = p.setting, args.plan
    entry: dict[str, Any] = {
        "title": setting.title, "d": setting.dim, "K": setting.num_outcomes, "m": p.m,
        "learners": {},
    }  # fmt: skip
    played, rows, by_key = {}, [], {}
    bar.describe(setting.name)
    for lname in p.playing:
        spec = learner_row(lname)
        pl = _play_learner(args, p, lname, bar)
        entry["learners"][spec.label] = {
            **pl.stats, "l": pl.point.l, "e": pl.point.e, "beta": pl.point.beta, "S": pl.S,
            **({"m": pl.m} if spec.sketched else {}),
        }  # fmt: skip
        by_key[lname], played[spec.legend] = pl.stats, pl
        rows.append(_row(setting, lname, pl.m, pl, plan))
    entry["ratios"] = tables.pair_ratios(by_key, RATIO_PAIRS)
    entry.update(entry["ratios"])  # "eofd_over_oful": {...} at the top level, as before
    return entry, played, rows


def run(args: argparse.Namespace) -> int:
    """Runs ``reproduce``: every setting and learner of the plan, the figures, the tables and the
    summary; returns the exit status."""
    import jax

    from bandits_jax.cli import plotting
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
        f"{trials} trials in batches of {plan['batch']}, chunks of {chunk} rounds, "
        f"{dtype_name}, (l, e) = ({args.l}, "
        f"{args.e}), beta = {args.beta}",
    )
    report: dict[str, Any] = {
        "command": " ".join(["bandits-jax", *sys.argv[1:]]) if args.argv is None else args.argv,
        "rounds": T,
        "trials": trials,
        "chunk": chunk,
        "batch": plan["batch"],
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
        for p in prepared:
            entry, played, setting_rows = _play_setting(args, p, bar)
            report["settings"][p.setting.name] = entry
            rows += setting_rows
            regret_panels.append((entry["title"], {k: v.regrets for k, v in played.items()}))
            time_panels.append((entry["title"], {k: v.per_round for k, v in played.items()}))
    report["compile_wall_seconds"] = sum(
        st["compile_seconds"] for e in report["settings"].values() for st in e["learners"].values()
    )

    written = []
    if args.plots:
        colors = {learner_row(n).legend: learner_row(n).color for n in plan["learners"]}
        plotting.regret_figure(regret_panels, out / "reproduce_regret.png", colors=colors)
        plotting.time_figure(time_panels, out / "reproduce_time.png", colors=colors)
        written += [out / "reproduce_regret.png", out / "reproduce_time.png"]
    report["compile_cache"] = compile_cache_report(args)
    report["wall_seconds"] = time.perf_counter() - t0
    output.write_json(out / "reproduce.json", report)
    output.write_csv(out / "reproduce.csv", rows)
    labels = {k: learner_row(k).label for k in recipes.KINDS}
    summary = tables.reproduce_summary(report, rows, plan["notes"], labels)
    summary += compile_cache_text(report["compile_cache"])
    (out / "reproduce_summary.txt").write_text(summary)
    written += [out / "reproduce.json", out / "reproduce.csv", out / "reproduce_summary.txt"]
    print("\n" + summary)
    write_outputs(out, written)
    return 0
