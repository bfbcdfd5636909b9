"""Sweeps: learners x hyperparameter grid x trials x environments in one compiled call.

An :class:`Experiment` is one (learner, environment) pair with a batch of ``G`` hyperparameter
settings (numeric hyperparameters live in the learner state, so a grid is a batch of states).
For ``N`` seeds its ``G * N`` runs are flattened into one run axis, grid-major (run
``g * N + n`` is grid point ``g`` on seed ``n``); seed ``n`` gives the same environment draw and
the same round keys to every grid point and every learner (common random numbers), so
differences between settings are not sampling noise. All experiments of a sweep are played by
one :class:`bandits_jax.sim.chunks.ChunkFn` (a tuple of step functions, each ``vmap``-ed over its
runs), optionally sharded over a device mesh (:mod:`.sharding`) and chunked with progress and
checkpoints.

Honest tuning (:func:`tune_and_evaluate`): the best grid point of each experiment is chosen by
mean final regret on *tuning* seeds, and the number reported is its regret on disjoint
*evaluation* seeds, never the minimum over the grid on the seeds it was chosen on.

Exploration diagnostic: step functions that report ``bonus_spread`` and ``estimate_spread`` per
round (the spread over the action set of the optimistic bonus and of the estimated reward, as
``bandits_jax.mlogb.interact`` does) get ``bonus_ratio`` = median over rounds and trials of
``bonus_spread / estimate_spread`` in the table. A ratio far below 1 (e.g. 1e-4 with the
section-4 recipe (l, e) = (0.75, 0.75) on the K = 1 synthetic stream) means the bonus cannot
change which action wins: the learner is effectively greedy and beta does not matter.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.checks import stack_trees
from bandits_jax.protocols import REJECTED_CODES, Status
from bandits_jax.sim import sharding as sh
from bandits_jax.sim.chunks import ChunkFn, Progress, run_chunked
from bandits_jax.sim.runner import RunState, StepFn

__all__ = [
    "Experiment",
    "ExperimentResult",
    "SweepResult",
    "grid_product",
    "stack_trees",
    "seed_keys",
    "build_runs",
    "run_sweep",
    "select_grid",
    "table",
    "tune_and_evaluate",
    "format_table",
    "write_csv",
    "write_json",
    "get_metric",
    "GREEDY_RATIO",
    "bonus_ratio",
    "STATUS_NAMES",
    "REJECTED_STATUSES",
    "status_counts",
    "rejected_count",
]

PyTree = Any
DEFAULT_FIELDS = ("regret", "bonus_spread", "estimate_spread", "explored", "status")
GREEDY_RATIO = 1e-2  # below this bonus/estimate spread ratio the table flags "greedy"

# Per-round status codes of the learners' updates (:class:`bandits_jax.protocols.Status`), by
# name. INACTIVE (no projection needed) and CONVERGED are healthy; MAX_STEPS keeps a step that hit
# its iteration cap; INEXACT was put back in the ball; REJECTED_STATUSES mark rejected updates
# (the state kept its last good value). A new code is one name in ``protocols``.
STATUS_NAMES: dict[int, str] = {int(s): s.name.lower() for s in Status}
REJECTED_STATUSES: frozenset[int] = REJECTED_CODES


class Experiment(NamedTuple):
    """One learner on one environment over a batch of hyperparameter settings.

    Attributes:
      learner: label of the learner (e.g. ``"EOFD"``).
      env: label of the environment (e.g. ``"synthetic d=100 K=4"``).
      step: ``step(learner_state, env_state, key)`` (e.g. ``mlogb.interact(learner, env)``).
      init_learner: ``hparams -> learner_state`` (e.g. ``learner.init``).
      hparams: hyperparameters with a leading grid axis of length ``G`` on every leaf.
      grid: labels of the grid points, ``name -> (G,)`` values (e.g. ``{"l": ..., "e": ...}``).
      init_env: ``key -> env_state``.
      regret: optional ``metrics -> per-round regret`` (traced, per round) for step functions
        whose metrics have no ``regret`` field; e.g. for ``bandits_jax.bco.interact`` the
        dynamic regret ``lambda m: m["loss"] - m["comparator_loss"]``.
    """

    learner: str
    env: str
    step: StepFn
    init_learner: Callable[[PyTree], PyTree]
    hparams: PyTree
    grid: Mapping[str, Any]
    init_env: Callable[[jax.Array], PyTree]
    regret: Callable[[Any], Any] | None = None

    @property
    def grid_size(self) -> int:
        return sh.num_runs(self.hparams)


class ExperimentResult(NamedTuple):
    """Metrics of one experiment as host arrays of shape ``(G, N, T, ...)``."""

    learner: str
    env: str
    grid: dict[str, np.ndarray]
    seeds: np.ndarray
    metrics: dict[str, np.ndarray]


class SweepResult(NamedTuple):
    """All experiments of a sweep, with timings (``run_seconds`` excludes compilation)."""

    experiments: tuple[ExperimentResult, ...]
    num_rounds: int
    run_seconds: float
    compile_seconds: float
    devices: int


def grid_product(**axes: Sequence[Any]) -> dict[str, np.ndarray]:
    """The Cartesian product of axes, flattened: ``grid_product(l=[0, 1], e=[2, 3])`` gives
    ``{"l": [0, 0, 1, 1], "e": [2, 3, 2, 3]}`` (last axis fastest)."""
    names = list(axes)
    rows = list(itertools.product(*(list(axes[n]) for n in names)))
    return {n: np.asarray([r[i] for r in rows]) for i, n in enumerate(names)}


def seed_keys(seeds: Sequence[int]) -> tuple[jax.Array, jax.Array]:
    """``(env_keys, run_keys)`` for each seed: the environment draw and the rounds' keys."""
    keys = jnp.stack([jax.random.key(int(s)) for s in seeds])
    both = jax.vmap(lambda k: jax.random.split(k, 2))(keys)
    return both[:, 0], both[:, 1]


def build_runs(exp: Experiment, seeds: Sequence[int]) -> RunState:
    """The ``G * N`` initial run states of ``exp`` on ``seeds``, flattened grid-major."""
    G, N = exp.grid_size, len(seeds)
    env_keys, run_keys = seed_keys(seeds)
    env = jax.vmap(exp.init_env)(env_keys)  # (N, ...)

    def per_grid(x):  # (G, ...) -> (G * N, ...)
        return jnp.repeat(x, N, axis=0)

    def per_seed(x):  # (N, ...) -> (G * N, ...)
        return jnp.concatenate([x] * G, axis=0)

    learner = jax.tree_util.tree_map(per_grid, jax.vmap(exp.init_learner)(exp.hparams))
    return RunState(
        learner=learner,
        env=jax.tree_util.tree_map(per_seed, env),
        key=per_seed(run_keys),
        t=jnp.zeros((G * N,), jnp.int32),
    )


def get_metric(metrics: Any, name: str) -> Any:
    """A field of a metrics dict or NamedTuple, ``None`` if absent."""
    if isinstance(metrics, Mapping):
        return metrics.get(name)
    return getattr(metrics, name, None)


def _keep_fields(fields: Sequence[str], regret: Callable | None) -> Callable[[Any], dict]:
    def keep(metrics):
        kept = {f: v for f in fields if (v := get_metric(metrics, f)) is not None}
        if regret is not None:  # metrics here carry the (runs, rounds) axes: map per round
            kept["regret"] = jax.vmap(jax.vmap(regret))(metrics)
        return kept

    return keep


_CHUNK_FNS: dict[Any, ChunkFn] = {}


def _chunk_fn(steps: tuple[StepFn, ...], mesh: Any) -> ChunkFn:
    """One :class:`ChunkFn` per (step functions, mesh), so that repeated sweeps of the same
    experiments (tuning, then evaluation) reuse compiled executables."""
    key = (steps, mesh)
    if key not in _CHUNK_FNS:
        if len(_CHUNK_FNS) >= 16:
            _CHUNK_FNS.pop(next(iter(_CHUNK_FNS)))
        _CHUNK_FNS[key] = ChunkFn(steps, batched=True, mesh=mesh)
    return _CHUNK_FNS[key]


def run_sweep(
    experiments: Sequence[Experiment],
    *,
    num_rounds: int,
    seeds: Sequence[int],
    mesh: Any = None,
    chunk_size: int | None = None,
    fields: Sequence[str] = DEFAULT_FIELDS,
    progress: Progress | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    resume: bool = False,
    config: Any = None,
) -> SweepResult:
    """Plays every experiment's grid on every seed, all in one compiled call per chunk.

    Args:
      experiments: the (learner, environment) pairs with their grids.
      num_rounds: rounds per run.
      seeds: trial seeds (each gives an environment draw and the rounds' keys).
      mesh: a :func:`bandits_jax.sim.sharding.run_mesh` to shard the runs over; ``None``: one
        device.
      chunk_size: rounds per compiled call (default: all rounds in one call).
      fields: metric fields kept per round (absent ones are skipped).
      progress, checkpoint_dir, resume, config: as in :func:`bandits_jax.sim.chunks.run_chunked`
        (the progress bar counts rounds of the whole batch: give it ``num_rounds`` as total).

    Returns:
      :class:`SweepResult` with metrics of shape ``(G, N, T)`` per experiment.
    """
    if not experiments:
        raise ValueError("experiments: expected at least one")
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: expected at least one")
    states = []
    for exp in experiments:
        runs = build_runs(exp, seeds)
        if mesh is not None:
            runs, _ = sh.pad_runs(runs, mesh.size)
            runs = sh.shard_runs(runs, mesh)
        states.append(runs)
    chunk_fn = _chunk_fn(tuple(e.step for e in experiments), mesh)
    config = {
        "user": config,
        "seeds": seeds,
        "experiments": [
            [e.learner, e.env, {k: _py(v) for k, v in e.grid.items()}] for e in experiments
        ],
        "fields": list(fields),
    }
    res = run_chunked(
        chunk_fn,
        tuple(states),
        num_rounds,
        chunk_size=chunk_size or max(num_rounds, 1),
        checkpoint_dir=checkpoint_dir,
        resume=resume,
        config=config,
        progress=progress,
        keep=lambda ms: tuple(
            _keep_fields(fields, e.regret)(m) for e, m in zip(experiments, ms, strict=True)
        ),
    )
    return collect(
        experiments, res.metrics, seeds, num_rounds, res.stats, 1 if mesh is None else mesh.size
    )


def collect(
    experiments: Sequence[Experiment],
    run_metrics: Sequence[Mapping[str, Any]],
    seeds: Sequence[int],
    num_rounds: int,
    stats: Any,
    devices: int,
) -> SweepResult:
    """The :class:`SweepResult` of run-major metrics: each experiment's first ``G * N`` runs
    (padding dropped) reshaped to ``(G, N, ...)``; ``stats`` is the run's ``ChunkStats``."""
    out = []
    for exp, metrics in zip(experiments, run_metrics, strict=True):
        G, N = exp.grid_size, len(seeds)
        shaped = {
            k: np.asarray(v)[: G * N].reshape((G, N) + np.shape(v)[1:]) for k, v in metrics.items()
        }
        grid = {k: np.asarray(v).reshape(G) for k, v in exp.grid.items()}
        out.append(ExperimentResult(exp.learner, exp.env, grid, np.asarray(seeds), shaped))
    return SweepResult(tuple(out), num_rounds, stats.run_seconds, stats.compile_seconds, devices)


def select_grid(exp: Experiment, indices: Sequence[int]) -> Experiment:
    """The experiment restricted to some grid points."""
    idx = np.asarray(indices, int)
    hp = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[idx], exp.hparams)
    grid = {k: np.asarray(v).reshape(-1)[idx] for k, v in exp.grid.items()}
    return exp._replace(hparams=hp, grid=grid)


def bonus_ratio(metrics: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """Per grid point, the median over trials and rounds of ``bonus_spread / estimate_spread``
    (rounds with no estimate spread, e.g. round 1 where W = 0, are left out); ``None`` if the
    metrics lack the spreads."""
    b, e = metrics.get("bonus_spread"), metrics.get("estimate_spread")
    if b is None or e is None:
        return None
    b, e = np.asarray(b, np.float64), np.asarray(e, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(e > 0, b / e, np.nan)  # round 1: W = 0, no estimate spread
    flat = ratio.reshape(ratio.shape[0], -1)  # (G, trials * rounds)
    out = np.full(flat.shape[0], np.nan)
    for g in range(flat.shape[0]):
        vals = flat[g][np.isfinite(flat[g])]
        if vals.size:
            out[g] = np.median(vals)
    return out


def status_counts(status: Any) -> dict[str, int]:
    """Counts of each status code in an array of per-round codes, by name
    (:data:`STATUS_NAMES`); codes outside that table are counted under ``"other"``."""
    codes, counts = np.unique(np.asarray(status).reshape(-1), return_counts=True)
    out = {name: 0 for name in STATUS_NAMES.values()}
    for c, n in zip(codes.tolist(), counts.tolist(), strict=True):
        name = STATUS_NAMES.get(int(c), "other")
        out[name] = out.get(name, 0) + int(n)
    return out


def rejected_count(status: Any) -> int:
    """Rounds whose update was rejected (a code in :data:`REJECTED_STATUSES`)."""
    s = np.asarray(status)
    return int(sum(int(np.sum(s == code)) for code in REJECTED_STATUSES))


def table(result: SweepResult | Sequence[ExperimentResult], *, split: str = "") -> list[dict]:
    """Tidy rows, one per (learner, environment, grid point): mean and sample std over trials of
    the final cumulative regret, regret per round, the exploration diagnostic, and (when the
    metrics carry ``status``) the rejected updates and a ``status_<name>`` count per status code
    over all trials and rounds."""
    exps = result.experiments if isinstance(result, SweepResult) else result
    rows = []
    for r in exps:
        regret = np.asarray(r.metrics["regret"], np.float64)  # (G, N, T)
        final = regret.sum(axis=-1)
        N, T = final.shape[1], regret.shape[-1]
        ratio = bonus_ratio(r.metrics)
        for g in range(final.shape[0]):
            row: dict[str, Any] = {"learner": r.learner, "env": r.env}
            if split:
                row["split"] = split
            row.update({k: _py(v[g]) for k, v in r.grid.items()})
            row.update(
                trials=N,
                rounds=T,
                final_regret_mean=float(final[g].mean()),
                final_regret_std=float(final[g].std(ddof=1)) if N > 1 else 0.0,
                regret_per_round=float(final[g].mean() / max(T, 1)),
            )
            if "explored" in r.metrics:
                row["explore_rate"] = float(np.asarray(r.metrics["explored"][g]).mean())
            if "status" in r.metrics:
                st = np.asarray(r.metrics["status"][g])
                row["rejected"] = rejected_count(st)
                row.update({f"status_{k}": v for k, v in status_counts(st).items()})
            if ratio is not None:
                row["bonus_ratio"] = float(ratio[g])
                row["greedy"] = bool(ratio[g] < GREEDY_RATIO) if np.isfinite(ratio[g]) else None
            rows.append(row)
    return rows


def _py(x: Any) -> Any:
    x = np.asarray(x)
    return x.item() if x.ndim == 0 else x.tolist()


class TuneResult(NamedTuple):
    """Tuning rows (every grid point on tuning seeds), evaluation rows (the chosen point of each
    experiment on evaluation seeds), the chosen grid index per experiment, and both sweeps."""

    tuning: list[dict]
    evaluation: list[dict]
    chosen: tuple[int, ...]
    tuning_sweep: SweepResult
    evaluation_sweep: SweepResult


def tune_and_evaluate(
    experiments: Sequence[Experiment],
    *,
    num_rounds: int,
    tuning_seeds: Sequence[int],
    eval_seeds: Sequence[int],
    **kwargs: Any,
) -> TuneResult:
    """Chooses each experiment's best grid point on tuning seeds, reports it on eval seeds.

    Args:
      experiments, num_rounds: as in :func:`run_sweep`.
      tuning_seeds: seeds the choice is made on (lowest mean final regret).
      eval_seeds: disjoint seeds the chosen configuration is reported on.
      **kwargs: passed to both :func:`run_sweep` calls (``mesh``, ``chunk_size``, ...);
        ``checkpoint_dir`` gets ``/tuning`` and ``/evaluation`` appended.
    """
    overlap = set(map(int, tuning_seeds)) & set(map(int, eval_seeds))
    if overlap:
        raise ValueError(
            f"eval_seeds: must be disjoint from tuning_seeds, shared {sorted(overlap)}"
        )
    ck = kwargs.pop("checkpoint_dir", None)
    tune = run_sweep(
        experiments,
        num_rounds=num_rounds,
        seeds=tuning_seeds,
        checkpoint_dir=None if ck is None else os.path.join(ck, "tuning"),
        **kwargs,
    )
    chosen = []
    for r in tune.experiments:
        final = np.asarray(r.metrics["regret"], np.float64).sum(-1).mean(-1)
        chosen.append(int(np.nanargmin(final)))
    picked = [select_grid(e, [g]) for e, g in zip(experiments, chosen, strict=True)]
    ev = run_sweep(
        picked,
        num_rounds=num_rounds,
        seeds=eval_seeds,
        checkpoint_dir=None if ck is None else os.path.join(ck, "evaluation"),
        **kwargs,
    )
    return TuneResult(
        table(tune, split="tuning"), table(ev, split="evaluation"), tuple(chosen), tune, ev
    )


def _fmt(v: Any) -> str:
    """A table cell; a missing value (``None`` or NaN) is ``-``, never ``nan``."""
    if v is None:
        return "-"
    if isinstance(v, float):
        if v != v:
            return "-"
        return f"{v:.4g}"
    return str(v)


def format_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A plain-text table of rows (columns default to the union of keys, in order)."""
    if not rows:
        return "(no rows)"
    if columns is None:
        columns = list(dict.fromkeys(k for r in rows for k in r))
    cells = [[_fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))
    body = ["  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join([line, "-" * len(line), *body])


def write_csv(path: str | os.PathLike, rows: Sequence[Mapping[str, Any]]) -> None:
    """Writes rows as CSV (columns: union of keys in order; missing, ``None`` and NaN cells are
    empty)."""
    columns = list(dict.fromkeys(k for r in rows for k in r))

    def cell(v: Any) -> Any:
        if v is None or (isinstance(v, float) and v != v):
            return ""
        return v

    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        for r in rows:
            w.writerow({k: cell(r.get(k)) for k in columns})


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Writes ``obj`` as JSON (numpy scalars/arrays converted, NaN as null)."""

    def clean(x):
        if isinstance(x, Mapping):
            return {str(k): clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        if isinstance(x, np.ndarray):
            return clean(x.tolist())
        if isinstance(x, np.generic):
            return clean(x.item())
        if isinstance(x, float) and not math.isfinite(x):
            return None
        return x

    with open(path, "w") as f:
        json.dump(clean(obj), f, indent=2)
        f.write("\n")
