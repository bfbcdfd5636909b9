"""``bandits-jax reproduce``: the EOFD-MLogB paper's Figures 1 and 2 (section 4) for the kinds of
the registry (:data:`bandits_jax.mlogb.recipes.REGISTRY`: a new row there joins ``--learners``,
the figures, tables and summary) on settings named by :func:`bandits_jax.envs.make`."""

from __future__ import annotations

import argparse
import pathlib
import time
from typing import Any, NamedTuple

import jax
import numpy as np

from bandits_jax import checks, envs, mlogb
from bandits_jax.cli import options as opt
from bandits_jax.cli import output, plotting, process, tables
from bandits_jax.mlogb import cost, recipes
from bandits_jax.sim import checkpoint, chunks, runner, sweep

LEARNERS = recipes.KINDS
DEFAULT_LEARNERS = ("eofd-robust", "eofd", "oful", "ecolog", "linucb", "uniform")
# A high-kappa synthetic stream, a low-rank one (Frequent Directions' premise) and digits over
# all ten target classes on the half of the examples the recipes were not tuned on, where the
# learners' curves separate; MNIST joins them where its files are found.
DEFAULT_SETTINGS = ("synth-20-1-S8", "lowrank-100-1-5-S8", "digits-all-h1")
FULL = {"rounds": 2000, "trials": 10, "learners": ",".join(DEFAULT_LEARNERS)}
QUICK = {"rounds": 200, "trials": 4, "learners": ",".join(DEFAULT_LEARNERS)}
OPTION_HELP = {"--settings": f"{opt.help_of('--settings')} (default "
               f"{','.join(DEFAULT_SETTINGS)}, + mnist if found)"}  # fmt: skip
RATIO_PAIRS = (("eofd-paper", "oful-paper"), ("eofd", "oful"), ("eofd-robust", "oful"),
               ("eofd-adaptive", "oful"), ("eofd-robust", "linucb"))  # fmt: skip
AUTO_BATCH = 16  # CPU throughput levels off here (docs/bench/batched_throughput_cpu.json)
KEPT = ("regret", "bonus_spread", "estimate_spread", "explored", "status", "select_status")
TIMED_REPEATS = 2  # the timed pass: the first chunk of the first batch, this many times


class Recipe(NamedTuple):
    """What a hyperparameter builder sees. ``l`` and ``e`` are floats in ``reproduce`` and
    arrays (one entry per grid point) in ``sweep``; ``beta`` is a float, "theory" or "order"."""

    num_outcomes: int
    dim: int
    S: float | None
    horizon: int
    l: Any  # noqa: E741
    e: Any
    beta: Any
    rewards: Any
    dtype: Any


def paper_point() -> recipes.Exponents:
    """Section 4's (l, e, beta), the paper's kinds' point (:data:`recipes.RULES`)."""
    return recipes.tuned_point("eofd-paper", 1.0, num_outcomes=1, dim=1)[0]


def learner_sketch(sketch: int | None, K: int, d: int, kind: str) -> int:
    """``--sketch``, else the kind's own sketch size (:func:`.recipes.sketch_size`)."""
    return sketch or recipes.sketch_size(K, d, kind)


def tuned_point(name: str, recipe: Recipe) -> Recipe:
    """The recipe a learner runs with: the paper's kinds at ``--l/--e/--beta``, every other kind
    at its tuned point (for the known bound ``recipe.S``; ``None``: no known bound)."""
    if recipes.REGISTRY[name].paper:
        return recipe
    ex, _ = recipes.tuned_point(name, recipe.S, num_outcomes=recipe.num_outcomes, dim=recipe.dim)
    return recipe._replace(l=ex.l, e=ex.e, beta=ex.beta)


def supports(name: str, num_outcomes: int) -> bool:
    """Whether a registry kind runs with K outcomes (ECOLog: K = 1 only)."""
    return num_outcomes == 1 or not recipes.REGISTRY[name].k1_only


def env_rewards(setting: envs.Setting) -> Any:
    """The reward of each outcome of the setting's environment (``None``: the learner's default)."""
    r = getattr(setting.env, "rewards", None)
    return None if r is None else np.asarray(r, np.float64).tolist()


def build_setting(args: argparse.Namespace, name: str, dtype: Any) -> envs.Setting:
    """The named setting (:func:`bandits_jax.envs.make`) with ``--S`` and ``--mnist`` where the
    name takes them."""
    takes = envs.parse(name).options
    kw = {"S": args.S, "path": args.mnist}
    return envs.make(name, dtype=dtype, **{k: v for k, v in kw.items() if k in takes})


def make_setting(name: str, *, S: Any, dtype: Any, mnist_path: Any = None) -> Any:
    """Deprecated (0.2.0): :func:`bandits_jax.envs.make` (``S`` and ``mnist_path`` go where the
    name takes them; the result is an :class:`bandits_jax.envs.Setting`)."""
    import warnings

    warnings.warn("make_setting is deprecated: use bandits_jax.envs.make", DeprecationWarning,
                  stacklevel=2)  # fmt: skip
    return build_setting(argparse.Namespace(S=S, mnist=mnist_path), name, dtype)


def add_arguments(r: argparse.ArgumentParser) -> None:
    """Adds ``reproduce``'s own options to its subparser."""
    p = paper_point()
    batch = f"N or auto (default: all trials, at most {AUTO_BATCH} a call)"
    r.add_argument("--batch", default="auto", help=f"trials per vmapped compiled call: {batch}")
    where = "of the paper's kinds (eofd-paper, oful-paper; the others run at their tuned points)"
    r.add_argument("--l", type=float, help=f"lambda exponent l {where} (default {p.l})")
    r.add_argument("--e", type=float, help=f"eta exponent e {where} (default {p.e})")
    r.add_argument("--beta", help=f"confidence radius beta_t {where}: {opt.BETA_HELP} "
                   f"(default {p.beta})")  # fmt: skip


def validate(args: argparse.Namespace) -> None:
    """Checks every option and resolves defaults into ``args.plan``; raises ``UsageError``."""
    errors: list[str] = []
    opt.fill_defaults(args, FULL, QUICK)
    opt.check_common(args, errors)
    learners = opt.check_learners(errors, args.learners, LEARNERS)
    paper = [n for n in learners if n in LEARNERS and recipes.REGISTRY[n].paper]
    sketched = [n for n in learners if n in LEARNERS and recipes.REGISTRY[n].sketched]
    why = "acts on the paper's kinds only (eofd-paper, oful-paper), none in --learners"
    opt.refuse_unused(errors, args, {"l": why, "e": why, "beta": why} if not paper else {})
    if not sketched:
        opt.refuse_unused(errors, args, {"sketch": "no sketched learner in --learners"})
    point = paper_point()
    for key in ("l", "e", "beta"):  # the paper's point unless given
        if getattr(args, key) is None:
            setattr(args, key, getattr(point, key))
    opt.check_float(errors, args.l, "--l")
    opt.check_float(errors, args.e, "--e")
    opt.check_beta(errors, args.beta, "--beta")
    batch = None if args.batch == "auto" else (int(args.batch) if args.batch.isdigit() else 0)
    if batch is not None and batch < 1:
        errors.append(f"--batch: expected an integer >= 1 or auto, got {args.batch!r}")
    given = "settings" in args.given
    names = opt.check_settings(errors, args.settings, bco=False) if given else []
    names = names or list(DEFAULT_SETTINGS)
    notes: list[str] = []
    if not errors and ("mnist" in names or args.mnist is not None):
        opt.check_mnist(errors, args.mnist)
        names += [] if "mnist" in names else ["mnist"]  # --mnist adds it to the settings
    elif not errors and not given:
        if opt.cached_mnist_usable():
            names.append("mnist")
        else:
            from bandits_jax.envs.mnist import default_cache_dir

            notes.append(f"MNIST skipped: no usable files in {default_cache_dir()} (put "
                         "train-images-idx3-ubyte[.gz] and train-labels-idx1-ubyte[.gz], or "
                         "mnist.npz, there or pass --mnist PATH).")  # fmt: skip
    opt.finish(errors, args)
    args.plan = {"T": args.rounds, "trials": args.trials, "batch": min(batch or AUTO_BATCH,
                 args.trials), "chunk": opt.chunk_size(args.rounds, args.chunk), "settings": names,
                 "learners": learners, "paper": bool(paper), "notes": notes}  # fmt: skip


class _Played(NamedTuple):
    """One learner's trials on a setting: its recipe, the bound its hyperparameters use, its
    statistics, regrets ``(trials, T)``, seconds per trial-round per timed repeat, sketch size."""

    point: Recipe
    S: float | None
    stats: dict[str, Any]
    regrets: np.ndarray
    per_round: list[float]
    m: int


class _Prepared(NamedTuple):
    """A setting made ready: its recipe, Section 4's sketch size, the learners of the plan it
    supports, each trial's environment state and run key (trial ``i``: seed ``--seed + i``)."""

    setting: envs.Setting
    recipe: Recipe
    m: int
    playing: list[str]
    envs: Any
    keys: Any


def _prepare(args: argparse.Namespace, name: str, dtype: Any) -> _Prepared:
    """Builds setting ``name``; a learner for K = 1 only is skipped on K >= 2 (with a note)."""
    plan = args.plan
    setting = build_setting(args, name, dtype)
    K, d = setting.num_outcomes, setting.dim
    S = args.S if args.S is not None else setting.S  # None on classification data
    recipe = Recipe(K, d, S, plan["T"], args.l, args.e, opt.beta_arg(args.beta),
                    env_rewards(setting), dtype)  # fmt: skip
    playing = [n for n in plan["learners"] if supports(n, K)]
    plan["notes"] += [f"{recipes.REGISTRY[n].label} skipped on {name}: defined for K = 1 only."
                      for n in plan["learners"] if n not in playing]  # fmt: skip
    too_big = {n: _over_budget(args, n, K, d, recipe) for n in playing}
    plan["notes"] += [f"{recipes.REGISTRY[n].label} skipped on {name}: {why}"
                      for n, why in too_big.items() if why]  # fmt: skip
    playing = [n for n in playing if not too_big[n]]
    env_keys, run_keys = sweep.seed_keys([args.seed + i for i in range(plan["trials"])])
    if setting.init_env_trial is None:
        states = jax.jit(jax.vmap(setting.env.init))(env_keys)
    else:  # the environment depends on the trial (e.g. its target class, chosen on the host)
        states = checks.stack_trees([setting.init_env_trial(k, i) for i, k in enumerate(env_keys)])
    m = args.sketch or recipes.sketch_size(K, d)
    host = checkpoint.to_host  # batches are assembled on the host: no compiled programs
    return _Prepared(setting, recipe, m, playing, host(states), host(run_keys))


#: What the command plays a learner at: its round (estimated) and one trial's state.
LIMIT = cost.Budget(ms_per_round=1000.0, bytes_per_trial=2**29)


def _over_budget(args: argparse.Namespace, lname: str, K: int, d: int, recipe: Recipe):
    """Why a learner exceeds :data:`LIMIT` on a setting (e.g. OFUL's Hessian at d = 4,096), or
    ``None`` (:func:`.recipes.cost_of`)."""
    m = learner_sketch(args.sketch, K, d, lname)
    learner = recipes.make_learner(lname, num_outcomes=K, dim=d, sketch_size=m,
                                   horizon=args.plan["T"])  # fmt: skip
    hp = recipes.hparams_for(lname, **tuned_point(lname, recipe)._asdict())
    ms, nbytes = recipes.cost_of(lname, learner, hp, num_outcomes=K, dim=d, sketch_size=m)
    if cost.fits(LIMIT, ms, nbytes):
        return None
    return (f"{ms:.3g} ms a round (estimated, mlogb.cost) and {nbytes / 2**20:.3g} MiB a trial; "
            f"the command plays a learner up to {LIMIT.ms_per_round:g} ms a round and "
            f"{LIMIT.bytes_per_trial / 2**20:g} MiB a trial.")  # fmt: skip


def _timed_pass(chunk_fn: Any, host: checkpoint.HostTree, length: int) -> list[float]:
    """Seconds per trial-round of ``length`` rounds of the batch ``host`` (no checkpoint, no
    host copy of metrics, compile excluded), :data:`TIMED_REPEATS` times."""
    state = checkpoint.to_device(host)
    exe = chunk_fn.compiled(state, length)  # compiled already unless resumed past its use
    runs, out = chunk_fn.runs(state), []
    for _ in range(TIMED_REPEATS):
        copy = jax.block_until_ready(checkpoint.to_device(host))
        t0 = time.perf_counter()
        jax.block_until_ready(exe(copy))
        out.append((time.perf_counter() - t0) / (length * runs))
    return out


def _trial_states(learner: Any, hp: Any, state: Any, idx: np.ndarray) -> checkpoint.HostTree:
    """The learner states of trials ``idx``, on the host: ``state`` for each, except that a
    learner with its own randomness (a ``seed`` hyperparameter: uniform, Thompson sampling) is
    seeded by the trial's index, so that trials draw independently (and a batch as it would
    alone)."""
    if "seed" not in getattr(hp, "_fields", ()):
        return checkpoint.to_host(state).map(lambda x: np.repeat(x[None], len(idx), axis=0))
    hps = jax.tree.map(lambda x: np.repeat(np.asarray(x)[None], len(idx), axis=0), hp)
    init = jax.jit(jax.vmap(learner.init))
    return checkpoint.to_host(init(hps._replace(seed=np.asarray(idx, np.uint32))))


def _batch(learner: checkpoint.HostTree, p: _Prepared, idx: np.ndarray) -> checkpoint.HostTree:
    """The host run state of trials ``idx``: their learner states, environments and keys."""
    parts = [learner, p.envs.map(lambda x: x[idx]), p.keys.map(lambda x: x[idx])]
    trees = [jax.tree_util.tree_unflatten(h.treedef, h.leaves) for h in parts]
    leaves, treedef = jax.tree_util.tree_flatten(
        runner.RunState(*trees, np.zeros(len(idx), np.int32)))  # fmt: skip
    return checkpoint.HostTree(treedef, leaves, [i for h in parts for i in h.impls] + [None])


def _kept(step: Any) -> Any:
    """``step`` with the metrics ``reproduce`` keeps (:data:`KEPT`) only: the compiled chunks
    leave the others out."""

    def kept(*args: Any) -> Any:
        *states, metrics = step(*args)
        return (*states, {k: getattr(metrics, k) for k in KEPT})

    return kept


def _play_learner(args: argparse.Namespace, p: _Prepared, lname: str, bar: Any) -> _Played:
    """Plays the plan's trials of learner ``lname`` on ``p``: batches of ``plan["batch"]``
    trials, each a chunked run of a vmapped batch (checkpoints under ``--out``), then the timed
    pass on the first batch."""
    plan, setting, recipe = args.plan, p.setting, p.recipe
    K, d = setting.num_outcomes, setting.dim
    m = learner_sketch(args.sketch, K, d, lname)
    learner = recipes.make_learner(lname, num_outcomes=K, dim=d, sketch_size=m, horizon=plan["T"])
    point = tuned_point(lname, recipe)
    hp = recipes.hparams_for(lname, **point._asdict())
    state = jax.jit(learner.init)(hp)
    chunk_fn = chunks.ChunkFn(_kept(mlogb.interact(learner, setting.env)), batched=True)
    config = {"setting": setting.name, "learner": lname, "l": point.l, "e": point.e,
              "beta": point.beta, "S": recipe.S, "m": m, "dtype": np.dtype(recipe.dtype).name,
              "xla": process.numeric_flags()}  # fmt: skip
    results, first = [], None
    for lo in range(0, plan["trials"], plan["batch"]):
        idx = np.arange(lo, min(lo + plan["batch"], plan["trials"]))
        host = _batch(_trial_states(learner, hp, state, idx), p, idx)
        start = checkpoint.to_device(host)
        if first is None:
            first = host
            if not args.resume:  # every chunk length, before any chunk is timed
                chunk_fn.compile_run(start, plan["T"], plan["chunk"], bar)
        where = f"trials_{lo:03d}-{idx[-1]:03d}"
        results.append(chunks.run_chunked(
            chunk_fn, start, plan["T"], chunk_size=plan["chunk"], resume=args.resume,
            checkpoint_dir=pathlib.Path(args.out, "checkpoints", setting.name, lname, where),
            config={**config, "seeds": [args.seed + int(i) for i in idx]}, progress=bar,
            donate_initial=True,
        ))  # fmt: skip
    per_round = _timed_pass(chunk_fn, first, min(plan["chunk"], plan["T"]))
    kept = {k: np.concatenate([np.asarray(r.metrics[k]) for r in results]) for k in KEPT}
    regrets = kept["regret"].astype(np.float64)
    stats = tables.learner_stats(
        regrets, per_round, bonus=kept["bonus_spread"], estimate=kept["estimate_spread"],
        explored=kept["explored"], status=kept["status"], select_status=kept["select_status"],
        compile_seconds=chunk_fn.compile_seconds,
    )  # fmt: skip
    stats["state_mib"] = chunks.tree_bytes(state) / 2**20  # one trial's learner state
    return _Played(point, float(hp.S) if hasattr(hp, "S") else None, stats, regrets, per_round, m)


def _row(setting: envs.Setting, lname: str, played: _Played, plan: dict) -> dict[str, Any]:
    """One learner's line of ``reproduce.csv``."""
    spec, st, p = recipes.REGISTRY[lname], played.stats, played.point
    return {
        "setting": setting.name, "learner": spec.label, "d": setting.dim,
        "K": setting.num_outcomes, "m": played.m if spec.sketched else "", "l": p.l, "e": p.e,
        "beta": p.beta, "S": "" if played.S is None else played.S, "trials": plan["trials"],
        "rounds": plan["T"], **{k: st[k] for k in ("final_regret_mean", "final_regret_std")},
        "ms_per_round_mean": 1e3 * st["seconds_per_round_mean"],
        "ms_per_round_std": 1e3 * st["seconds_per_round_std"], "state_mib": st["state_mib"],
        "compile_s": st["compile_seconds"],
        "bonus_ratio": st["bonus_ratio_median"],
        **{k: st[k] for k in ("explore_rate", "rejected_updates", "max_steps",
                              "flagged_selections")},
    }  # fmt: skip


def _play_setting(args: argparse.Namespace, p: _Prepared, bar: Any) -> tuple[dict, dict, list]:
    """Every learner of the plan on ``p``: its report entry, the played learners (legend ->
    :class:`_Played`) and its CSV rows."""
    setting = p.setting
    entry: dict[str, Any] = {"title": setting.title, "d": setting.dim,
                             "K": setting.num_outcomes, "m": p.m, "learners": {}}  # fmt: skip
    played, rows, by_key = {}, [], {}
    bar.describe(setting.name)
    for lname in p.playing:
        spec = recipes.REGISTRY[lname]
        pl = _play_learner(args, p, lname, bar)
        entry["learners"][spec.label] = {
            **pl.stats, "l": pl.point.l, "e": pl.point.e, "beta": pl.point.beta, "S": pl.S,
            **({"m": pl.m} if spec.sketched else {}),
        }  # fmt: skip
        by_key[lname], played[spec.legend] = pl.stats, pl
        rows.append(_row(setting, lname, pl, args.plan))
    entry["ratios"] = tables.pair_ratios(by_key, RATIO_PAIRS)
    entry.update(entry["ratios"])  # "eofd_over_oful": {...} at the top level, as before
    return entry, played, rows


def run(args: argparse.Namespace) -> int:
    """Runs ``reproduce``: every setting and learner of the plan, the figures, the tables and the
    summary; returns the exit status."""
    t0 = time.perf_counter()
    plan, out, dtype = args.plan, pathlib.Path(args.out), output.dtype_of(args)
    T, trials, chunk = plan["T"], plan["trials"], plan["chunk"]
    dtype_name = jax.numpy.dtype(dtype).name
    point = f", (l, e) = ({args.l}, {args.e}), beta = {args.beta}" if plan["paper"] else ""
    output.say(args, f"reproduce: settings {plan['settings']}, learners {plan['learners']}, "
                     f"T = {T}, {trials} trials in batches of {plan['batch']}, chunks of {chunk} "
                     f"rounds, {dtype_name}{point}")  # fmt: skip
    report: dict[str, Any] = {
        "command": output.command_line(args), "rounds": T, "trials": trials, "chunk": chunk,
        "batch": plan["batch"], "dtype": dtype_name,
        **{k: getattr(args, k) if plan["paper"] else None for k in ("l", "e", "beta")},
        "S": args.S, "backend": jax.default_backend(), "settings": {},
    }  # fmt: skip
    regret_panels, time_panels, rows = [], [], []
    prepared = [_prepare(args, name, dtype) for name in plan["settings"]]
    total = sum(len(p.playing) for p in prepared) * trials * T  # trial-rounds
    with chunks.Progress(total, "reproduce", enabled=not args.quiet) as bar:
        for p in prepared:
            entry, played, setting_rows = _play_setting(args, p, bar)
            report["settings"][p.setting.name] = entry
            rows += setting_rows
            regret_panels.append((entry["title"], {k: v.regrets for k, v in played.items()}))
            time_panels.append((entry["title"], {k: v.per_round for k, v in played.items()}))
    report["compile_wall_seconds"] = sum(
        st["compile_seconds"] for e in report["settings"].values() for st in e["learners"].values()
    )
    figures = []
    if args.plots:
        colors = {recipes.REGISTRY[n].legend: recipes.REGISTRY[n].color for n in plan["learners"]}
        figures = [out / "reproduce_regret.png", out / "reproduce_time.png"]
        plotting.regret_figure(regret_panels, figures[0], colors=colors)
        plotting.time_figure(time_panels, figures[1], colors=colors)
    report["wall_seconds"] = time.perf_counter() - t0
    labels = {k: recipes.REGISTRY[k].label for k in recipes.KINDS}
    summary = tables.reproduce_summary(report, rows, plan["notes"], labels)
    output.finish(args, "reproduce", report, rows, summary, figures)
    return 0
