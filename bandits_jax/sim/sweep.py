"""Sweeps: learners x hyperparameter grid x trials x environments in one compiled call.

An :class:`Experiment` is one (learner, environment) pair with a batch of ``G`` hyperparameter
settings (numeric hyperparameters live in the learner state, so a grid is a batch of states).
Its ``G * N`` runs on ``N`` seeds are flattened grid-major (run ``g * N + n`` is grid point ``g``
on seed ``n``); seed ``n`` gives every grid point and learner the same environment draw and round
keys (common random numbers). All experiments of a sweep are played by one
:class:`bandits_jax.sim.chunks.ChunkFn`, optionally sharded (:mod:`.sharding`), chunked, and
split into batches that fit a memory budget (``max_bytes``, see ``docs/sweeps.md``).

Honest tuning (:func:`tune_and_evaluate`): the best grid point is chosen by mean final regret on
*tuning* seeds and reported by its regret on disjoint *evaluation* seeds.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import pathlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.checks import check_int, stack_trees
from bandits_jax.sim import checkpoint
from bandits_jax.sim import sharding as sh
from bandits_jax.sim.chunks import ChunkFn, Progress, run_chunked, tree_bytes
from bandits_jax.sim.runner import RunState, StepFn
from bandits_jax.status import count_status, is_rejected

__all__ = [
    "Experiment",
    "ExperimentResult",
    "SweepResult",
    "grid_product",
    "stack_trees",
    "seed_keys",
    "build_runs",
    "run_sweep",
    "BatchPlan",
    "MemoryBudgetError",
    "memory_budget",
    "HOST_MEMORY_FRACTION",
    "MEMORY_COLUMNS",
    "DEVICE_MEMORY_FRACTION",
    "select_grid",
    "table",
    "tune_and_evaluate",
    "choose_across",
]

PyTree = Any
HOST_MEMORY_FRACTION = 0.5  # of physical memory: the "auto" budget on CPU (shared by its devices)
DEVICE_MEMORY_FRACTION = 0.9  # of a device's bytes_limit: the "auto" budget on GPU/TPU
# Table columns of the memory a sweep's compiled call used (present when run_sweep planned it).
MEMORY_COLUMNS = ("batches", "peak_bytes", "bytes_per_run", "state_bytes_per_run")


class Experiment(NamedTuple):
    """One learner on one environment over a batch of hyperparameter settings.

    Attributes:
      learner, env: labels (e.g. ``"EOFD"``, ``"synthetic d=100 K=4"``).
      step: ``step(learner_state, env_state, key)`` (e.g. ``mlogb.interact(learner, env)``).
      init_learner: ``hparams -> learner_state`` (e.g. ``learner.init``).
      hparams: hyperparameters with a leading grid axis of length ``G`` on every leaf.
      grid: labels of the grid points, ``name -> (G,)`` values (e.g. ``{"l": ..., "e": ...}``).
      init_env: ``key -> env_state``.
      regret: optional ``metrics -> per-round regret`` for steps whose metrics have no
        ``regret`` field (e.g. ``lambda m: m.loss - m.comparator_loss`` for ``bco.interact``).
      init_env_trial: optional ``(key, trial_index) -> env_state`` for environments that depend
        on the trial; :func:`build_runs` then passes the seed's position in the seed list.
    """

    learner: str
    env: str
    step: StepFn
    init_learner: Callable[[PyTree], PyTree]
    hparams: PyTree
    grid: Mapping[str, Any]
    init_env: Callable[[jax.Array], PyTree]
    regret: Callable[[Any], Any] | None = None
    init_env_trial: Callable[[jax.Array, jax.Array], PyTree] | None = None

    @property
    def grid_size(self) -> int:
        return sh.num_runs(self.hparams)


class ExperimentResult(NamedTuple):
    """Metrics of one experiment as host arrays of shape ``(G, N, T, ...)``, and ``memory``:
    its runs, batches and bytes (see :func:`run_sweep`; ``None`` where not planned)."""

    learner: str
    env: str
    grid: dict[str, np.ndarray]
    seeds: np.ndarray
    metrics: dict[str, np.ndarray]
    memory: dict | None = None


class SweepResult(NamedTuple):
    """All experiments of a sweep, with timings (``run_seconds`` excludes compilation) and
    ``memory``: the batch plan and memory figures (:func:`run_sweep`; ``None`` where unplanned)."""

    experiments: tuple[ExperimentResult, ...]
    num_rounds: int
    run_seconds: float
    compile_seconds: float
    devices: int
    memory: dict | None = None


class MemoryBudgetError(ValueError):
    """The smallest batch of a sweep does not fit the memory budget (``max_bytes``)."""


def _ceil_div(a: int, b: int) -> int:
    return -(-int(a) // int(b))


class BatchPlan(NamedTuple):
    """How a sweep's runs are split: ``batches`` consecutive calls, batch ``b`` playing runs
    ``b * slots[i]`` onwards of experiment ``i`` (past ``runs[i]``, padding repeats its last)."""

    batches: int
    slots: tuple[int, ...]
    runs: tuple[int, ...]

    @classmethod
    def of(cls, runs: Sequence[int], batches: int, multiple: int = 1) -> BatchPlan:
        """``batches`` batches (fewer if widths rounded to ``multiple`` cover the runs sooner)."""
        slots = tuple(_ceil_div(_ceil_div(r, batches), multiple) * multiple for r in runs)
        return cls.with_slots(runs, slots)

    @classmethod
    def with_slots(cls, runs: Sequence[int], slots: Sequence[int]) -> BatchPlan:
        """The batches of these widths that cover ``runs``."""
        count = max(_ceil_div(r, s) for r, s in zip(runs, slots, strict=True))
        return cls(count, tuple(slots), tuple(int(r) for r in runs))

    def indices(self, b: int) -> list[np.ndarray]:
        """Per experiment, the run indices batch ``b`` plays (padding repeats the last run)."""
        return [
            np.minimum(b * s + np.arange(s), r - 1)
            for s, r in zip(self.slots, self.runs, strict=True)
        ]

    def valid(self, b: int) -> list[int]:
        """Per experiment, how many of batch ``b``'s runs are real (the rest is padding)."""
        return [int(np.clip(r - b * s, 0, s)) for s, r in zip(self.slots, self.runs, strict=True)]


def grid_product(**axes: Sequence[Any]) -> dict[str, np.ndarray]:
    """The Cartesian product of axes, flattened: ``grid_product(l=[0, 1], e=[2, 3])`` gives
    ``{"l": [0, 0, 1, 1], "e": [2, 3, 2, 3]}`` (last axis fastest)."""
    rows = list(itertools.product(*axes.values()))
    return {n: np.asarray([r[i] for r in rows]) for i, n in enumerate(axes)}


def seed_keys(seeds: Sequence[int]) -> tuple[jax.Array, jax.Array]:
    """``(env_keys, run_keys)`` for each seed: the environment draw and the rounds' keys."""
    keys = jnp.stack([jax.random.key(int(s)) for s in seeds])
    both = jax.vmap(lambda k: jax.random.split(k, 2))(keys)
    return both[:, 0], both[:, 1]


def build_runs(exp: Experiment, seeds: Sequence[int], indices: Any = None) -> RunState:
    """The ``G * N`` initial run states of ``exp`` on ``seeds``, flattened grid-major (run
    ``g * N + n``); with ``indices``, only those runs (in that order, repeats allowed)."""
    G, N = exp.grid_size, len(seeds)
    idx = np.arange(G * N) if indices is None else np.asarray(indices, dtype=np.int64)
    if idx.ndim != 1 or (idx.size and (idx.min() < 0 or idx.max() >= G * N)):
        raise ValueError(f"indices: expected run indices in [0, {G * N}), got {idx}")
    g_idx, n_idx = idx // N, idx % N
    env_keys, run_keys = seed_keys(seeds)
    if exp.init_env_trial is None:
        env = jax.vmap(exp.init_env)(env_keys)  # (N, ...)
    else:
        env = jax.vmap(exp.init_env_trial)(env_keys, jnp.arange(N, dtype=jnp.int32))
    learner = jax.vmap(exp.init_learner)(exp.hparams)  # (G, ...)
    return RunState(
        learner=jax.tree_util.tree_map(lambda x: x[g_idx], learner),
        env=jax.tree_util.tree_map(lambda x: x[n_idx], env),
        key=run_keys[n_idx],
        t=jnp.zeros((idx.size,), jnp.int32),
    )


def keep_fields(
    fields: Sequence[str] | None, experiments: Sequence[Experiment]
) -> Callable[[tuple], tuple[dict, ...]]:
    """``metrics -> dicts`` (one per experiment) of the fields kept (``None``: all), with each
    experiment's ``regret`` computed per round where it has one."""

    def keep_one(metrics, regret):
        kept = dict(metrics if isinstance(metrics, Mapping) else metrics._asdict())
        if fields is not None:
            kept = {f: kept[f] for f in fields if kept.get(f) is not None}
        if regret is not None:  # metrics here carry the (runs, rounds) axes: map per round
            kept["regret"] = jax.vmap(jax.vmap(regret))(metrics)
        return kept

    return lambda ms: tuple(keep_one(m, e.regret) for e, m in zip(experiments, ms, strict=True))


@functools.lru_cache(maxsize=16)
def _chunk_fn(steps: tuple[StepFn, ...], mesh: Any, microbatch: int | None = None) -> ChunkFn:
    """Shared by sweeps of the same steps (tuning, then evaluation): compiled once."""
    return ChunkFn(steps, batched=True, mesh=mesh, microbatch=microbatch)


def memory_budget(max_bytes: int | str | None = "auto", devices: Sequence[Any] | None = None):
    """The bytes one compiled call may use per device, or ``None`` (no limit).

    Args:
      max_bytes: a positive byte count; ``"auto"``: ``DEVICE_MEMORY_FRACTION`` of the smallest
        ``bytes_limit`` of ``devices`` (GPU, TPU), else ``HOST_MEMORY_FRACTION`` of physical
        memory shared by ``devices`` (CPU); ``None``: no limit (never split).
      devices: the devices a call runs on (default: the first device).
    """
    if max_bytes is None:
        return None
    if isinstance(max_bytes, str) and max_bytes == "auto":
        devices = list(devices) if devices is not None else jax.devices()[:1]
        limits = [v for v in _device_stats(devices, "bytes_limit") if v]
        if limits:
            return int(min(limits) * DEVICE_MEMORY_FRACTION)
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return int(phys * HOST_MEMORY_FRACTION) // max(1, len(devices))
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, (int, np.integer)) or max_bytes < 1:
        raise ValueError(f"max_bytes: expected a positive int, 'auto' or None, got {max_bytes!r}")
    return int(max_bytes)


def _device_stats(devices: Sequence[Any], name: str) -> list[int]:
    """``memory_stats()[name]`` of each device whose backend reports it (GPU, TPU; not CPU)."""
    values = []
    for d in devices:
        try:
            stats = d.memory_stats() or {}
        except Exception:  # noqa: BLE001 - backends without memory statistics
            stats = {}
        if stats.get(name) is not None:
            values.append(int(stats[name]))
    return values


def _is_oom(err: BaseException) -> bool:
    text = str(err)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


_PLAN_STEPS = 8  # compiles spent at most on choosing a batch width
_FALLBACK_FACTOR = 3  # bytes per call ~ this x (state + outputs) where XLA gives no analysis


def run_sweep(
    experiments: Sequence[Experiment],
    *,
    num_rounds: int,
    seeds: Sequence[int],
    mesh: Any = None,
    chunk_size: int | None = None,
    fields: Sequence[str] | None = None,
    progress: Progress | None = None,
    checkpoint_dir: str | os.PathLike | None = None,
    resume: bool = False,
    config: Any = None,
    max_bytes: int | str | None = "auto",
    max_retries: int = 3,
    microbatch: int | None = None,
) -> SweepResult:
    """Plays every experiment's grid on every seed, all in one compiled call per chunk.

    A resume plays the batch plan its checkpoint recorded, refused if it exceeds ``max_bytes``.

    Args:
      seeds: trial seeds (each gives an environment draw and the rounds' keys).
      mesh: a :func:`bandits_jax.sim.sharding.run_mesh` to shard the runs over; ``None``: one
        device.
      chunk_size: rounds per compiled call (default: all rounds in one call).
      fields: metric fields kept per round (absent ones skipped; ``None``: all), e.g.
        :data:`bandits_jax.mlogb.exploration.SWEEP_FIELDS`.
      progress, checkpoint_dir, resume, config: as in :func:`bandits_jax.sim.chunks.run_chunked`
        (the bar also counts padding runs and the rounds an out-of-memory retry replays).
      max_bytes: memory budget per device of one compiled call (:func:`memory_budget`); runs
        that do not fit are played in batches.
      max_retries: out-of-memory errors at run time answered by halving the batch.
      microbatch: play each device's runs as slices of this many (``ChunkFn``'s ``microbatch``;
        widths are padded to a multiple), so a split sweep equals the one-call sweep bit for bit.

    Returns:
      :class:`SweepResult` with metrics of shape ``(G, N, T)`` per experiment and ``memory``.
    """
    seeds = checked_seeds(experiments, seeds)
    check_int("max_retries", max_retries, 0)
    devices = jax.devices()[:1] if mesh is None else list(np.asarray(mesh.devices).flat)
    budget = memory_budget(max_bytes, devices)
    labels = [[e.learner, e.env, {k: _py(v) for k, v in e.grid.items()}] for e in experiments]
    job = _Job(
        experiments=experiments,
        seeds=seeds,
        num_rounds=num_rounds,
        chunk=chunk_size or max(num_rounds, 1),
        chunk_fn=_chunk_fn(tuple(e.step for e in experiments), mesh, microbatch),
        keep=keep_fields(fields, experiments),
        config={
            "user": config,
            "seeds": seeds,
            "experiments": labels,
            "fields": None if fields is None else list(fields),
        },
        ckdir=pathlib.Path(checkpoint_dir) if checkpoint_dir is not None else None,
        progress=progress,
        runs=tuple(e.grid_size * len(seeds) for e in experiments),
        multiple=(1 if mesh is None else mesh.size) * (microbatch or 1),
    )
    compile_before = job.chunk_fn.compile_seconds
    plan, mem, retries = _initial_plan(job, budget, resume)
    played = _play_with_retries(job, plan, mem, retries, resume, max_retries)
    memory, per_exp = _memory_report(job, played, budget, devices)
    exps = collect(experiments, played.metrics, seeds, per_exp)
    compile_seconds = job.chunk_fn.compile_seconds - compile_before
    devs = 1 if mesh is None else mesh.size
    return SweepResult(exps, num_rounds, played.run_seconds, compile_seconds, devs, memory)


def checked_seeds(experiments: Sequence[Experiment], seeds: Sequence[int]) -> list[int]:
    """The seeds as ints, after checking that there are experiments and seeds."""
    if not experiments:
        raise ValueError("experiments: expected at least one")
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: expected at least one")
    return seeds


class _Job(NamedTuple):
    """What every batch and every try of one :func:`run_sweep` shares."""

    experiments: Sequence[Experiment]
    seeds: list[int]
    num_rounds: int
    chunk: int  # rounds per compiled call
    chunk_fn: ChunkFn
    keep: Callable[[Any], tuple]  # per experiment, the metrics kept (keep_fields)
    config: dict  # the checkpoints' identity
    ckdir: pathlib.Path | None
    progress: Progress | None
    runs: tuple[int, ...]  # per experiment: grid points x seeds
    multiple: int  # batch widths are multiples of this: devices x microbatch


def _figures(job: _Job, plan: BatchPlan) -> dict:
    """The memory figures of the chunk compiled for one batch of ``plan`` (an estimate where
    XLA has no analysis), with the bytes of each experiment's batch of states."""
    state = tuple(
        jax.eval_shape(lambda e=e, i=i: build_runs(e, job.seeds, i))
        for e, i in zip(job.experiments, plan.indices(0), strict=True)
    )
    length = min(job.chunk, job.num_rounds)
    mem = job.chunk_fn.memory(state, length)
    if mem is None:  # no static analysis on this backend: state size times a factor
        out = jax.eval_shape(job.keep, job.chunk_fn.eval_shape(state, length)[1])
        est = _FALLBACK_FACTOR * (tree_bytes(state) + tree_bytes(out))
        mem = {"peak_bytes": est, "estimated": True}
    return {**mem, "state_bytes": [tree_bytes(x) for x in state]}


def _initial_plan(job: _Job, budget: int | None, resume: bool) -> tuple[BatchPlan, dict, int]:
    """The plan to play, its figures and its retries so far: on a resume the plan recorded
    (refused if over ``budget``), otherwise the fewest batches that fit."""
    recorded = None
    if job.ckdir is not None and resume:
        recorded = _read_plan(job.ckdir, job.runs, job.multiple)
    if recorded is None:
        plan, mem = _choose_plan(job.runs, job.multiple, budget, lambda p: _figures(job, p))
        return plan, mem, 0
    plan, retries = recorded
    mem = _figures(job, plan)
    if budget is not None and mem["peak_bytes"] > budget:
        raise checkpoint.CheckpointError(
            f"{job.ckdir}: the checkpoint plays {plan.batches} batch(es) of {sum(plan.slots)} runs,"
            f" {mem['peak_bytes']} bytes per call, over the memory budget of {budget} bytes; "
            "resume with a larger max_bytes (--max-memory) or start without --resume"
        )
    return plan, mem, retries


class _Played(NamedTuple):
    """A played sweep: the plan that succeeded, its figures, retries, notes on them, the
    run-major metrics of each experiment and the run seconds."""

    plan: BatchPlan
    mem: dict
    retries: int
    notes: list[str]
    metrics: list[dict]
    run_seconds: float


def _play_with_retries(
    job: _Job, plan: BatchPlan, mem: dict, retries: int, resume: bool, max_retries: int
) -> _Played:
    """Plays ``plan`` (recorded in the checkpoint directory first); an out-of-memory error
    halves the batch and plays the sweep again afresh, up to ``max_retries`` retries in all."""
    announced = None if job.progress is None else (job.progress.done, job.progress.total)
    notes: list[str] = []
    while True:
        if job.ckdir is not None:
            _write_plan(job.ckdir, plan, retries)
        if announced is not None:  # plus padding runs and what an out-of-memory retry replays
            padding = job.num_rounds * (plan.batches * sum(plan.slots) - sum(job.runs))
            job.progress.total = announced[1] + job.progress.done - announced[0] + padding
        try:
            metrics, run_seconds = _play_batches(job, plan, resume)
            return _Played(plan, mem, retries, notes, metrics, run_seconds)
        except jax.errors.JaxRuntimeError as err:  # only out-of-memory errors are retried
            if not _is_oom(err) or retries >= max_retries or max(plan.slots) <= job.multiple:
                raise
            old, plan = plan, _halved(plan, job.runs, job.multiple)
            retries += 1
            resume = False  # the new plan's batches start afresh
            notes.append(
                f"out of memory with {sum(old.slots)} runs per batch; retried in {plan.batches} "
                f"batches of {sum(plan.slots)} runs"
            )
            mem = _figures(job, plan)


def _halved(old: BatchPlan, runs: tuple[int, ...], multiple: int) -> BatchPlan:
    """The plan after an out-of-memory error: twice the batches, or where rounding kept the
    width, every width halved directly."""
    plan = BatchPlan.of(runs, 2 * old.batches, multiple)
    if plan.slots != old.slots:
        return plan
    return BatchPlan.with_slots(
        runs, [max(multiple, _ceil_div(s, 2 * multiple) * multiple) for s in old.slots]
    )


def _memory_report(
    job: _Job, played: _Played, budget: int | None, devices: Sequence[Any]
) -> tuple[dict, list[dict]]:
    """``SweepResult.memory`` (budget, plan, figures, retries, notes, the measured peak) and
    each experiment's ``memory`` (its runs, batch width and carry)."""
    plan, mem, runs, notes = played.plan, played.mem, job.runs, list(played.notes)
    microbatch = job.chunk_fn.microbatch
    narrow = microbatch is None and any(
        s <= job.multiple < r for s, r in zip(plan.slots, runs, strict=True)
    )
    if plan.batches > 1 and narrow:
        notes.append(
            "batches of one run per device: XLA simplifies a batch of one, so float diagnostics "
            "may differ from a wider batch's in the last bits"
        )
    per_call = sum(plan.slots)
    memory = {
        "budget_bytes": budget,
        "batches": plan.batches,
        "runs": sum(runs),
        "runs_per_batch": per_call,
        "bytes_per_run": mem["peak_bytes"] / per_call,
        "retries": played.retries,
        "notes": notes,
        "measured_peak_bytes": max(_device_stats(devices, "peak_bytes_in_use"), default=None),
        "estimated": bool(mem.get("estimated", False)),
        "microbatch": microbatch,
        **{k: v for k, v in mem.items() if k.endswith("_bytes") and k != "state_bytes"},
    }
    per_exp = [
        {
            "batches": plan.batches,
            "runs": r,
            "runs_per_batch": s,
            "state_bytes_per_run": sb // s,
            "state_bytes": sb // s * r,
            "peak_bytes": mem["peak_bytes"],
            "bytes_per_run": mem["peak_bytes"] / per_call,
        }
        for r, s, sb in zip(runs, plan.slots, mem["state_bytes"], strict=True)
    ]
    return memory, per_exp


def _choose_plan(
    runs: tuple[int, ...], multiple: int, budget: int | None, figures: Callable[[BatchPlan], dict]
) -> tuple[BatchPlan, dict]:
    """The fewest batches whose compiled call fits ``budget``: each try compiles a batch width,
    the next from a line ``bytes = a + b * runs`` through the last two tries (or zero)."""
    batches = 1
    points: list[tuple[int, int]] = []
    for _ in range(_PLAN_STEPS):
        plan = BatchPlan.of(runs, batches, multiple)
        mem = figures(plan)
        n = sum(plan.slots)
        if budget is None or mem["peak_bytes"] <= budget:
            return plan, mem
        if max(plan.slots) <= multiple:
            raise MemoryBudgetError(
                f"max_bytes: the smallest batch ({n} runs, one per experiment and device) needs "
                f"{mem['peak_bytes']} bytes per device, over the budget of {budget} bytes"
            )
        points.append((n, mem["peak_bytes"]))
        if len(points) >= 2 and points[-2][0] != n:
            (n1, p1), (n2, p2) = points[-2:]
            slope = max((p1 - p2) / (n1 - n2), 1e-9)
            fixed = max(p2 - slope * n2, 0.0)
        else:
            slope, fixed = mem["peak_bytes"] / n, 0.0
        target = (budget - fixed) / slope
        nxt = batches + 1
        while nxt < max(runs) and sum(BatchPlan.of(runs, nxt, multiple).slots) > target:
            nxt += 1
        batches = nxt
    raise MemoryBudgetError(
        f"max_bytes: no batch width found within {_PLAN_STEPS} compiles for a budget of "
        f"{budget} bytes (last try: {points[-1][0]} runs, {points[-1][1]} bytes)"
    )


def _read_plan(
    ckdir: pathlib.Path, runs: tuple[int, ...], multiple: int
) -> tuple[BatchPlan, int] | None:
    """The batch plan and retries in ``plan.json`` (one batch for a lone ``state.npz``), or
    ``None`` for a fresh directory."""
    path = ckdir / "plan.json"
    if not path.is_file():
        if (ckdir / "state.npz").is_file():
            return BatchPlan.of(runs, 1, multiple), 0
        return None
    try:
        rec = json.loads(path.read_text())
        plan = BatchPlan(
            int(rec["batches"]), tuple(map(int, rec["slots"])), tuple(map(int, rec["runs"]))
        )
        retries = int(rec.get("retries", 0))
    except (ValueError, KeyError, TypeError) as err:
        raise checkpoint.CheckpointError(f"{path}: unreadable batch plan ({err})") from None
    if plan.runs != runs:
        raise checkpoint.CheckpointError(
            f"{path}: the checkpoint has {list(plan.runs)} runs per experiment, this sweep has "
            f"{list(runs)}; resume with the same settings or start without --resume"
        )
    if any(s < 1 or s % multiple for s in plan.slots) or plan != BatchPlan.with_slots(
        runs, plan.slots
    ):
        raise checkpoint.CheckpointError(
            f"{path}: batches of {list(plan.slots)} runs do not suit {multiple} device(s); "
            "resume on the devices it was played on or start without --resume"
        )
    return plan, retries


def _write_plan(ckdir: pathlib.Path, plan: BatchPlan, retries: int) -> None:
    checkpoint.write_json(ckdir / "plan.json", {**plan._asdict(), "retries": retries})


def _play_batches(job: _Job, plan: BatchPlan, resume: bool) -> tuple[list[dict], float]:
    """Plays the plan's batches in turn: each experiment's run-major metrics (without padding)
    and the run seconds."""
    pieces: list[list[dict]] = [[] for _ in job.experiments]
    run_seconds = 0.0
    split = plan.batches > 1
    for b in range(plan.batches):
        states = []
        for exp, idx in zip(job.experiments, plan.indices(b), strict=True):
            runs = build_runs(exp, job.seeds, idx)
            mesh = job.chunk_fn.mesh
            states.append(runs if mesh is None else sh.shard_runs(runs, mesh))
        ckdir, config = job.ckdir, job.config
        if split:  # each batch in its own directory, its identity including the plan
            ckdir = None if ckdir is None else ckdir / f"batch_{b:04d}"
            config = {**config, "batch": [b, plan.batches, list(plan.slots)]}
        res = run_chunked(
            job.chunk_fn,
            tuple(states),
            job.num_rounds,
            chunk_size=job.chunk,
            checkpoint_dir=ckdir,
            resume=resume,
            config=config,
            progress=job.progress,
            keep=job.keep,
            donate_initial=True,  # built here for this batch: one copy of the carry, not two
        )
        run_seconds += res.stats.run_seconds
        for i, (m, n) in enumerate(zip(res.metrics, plan.valid(b), strict=True)):
            pieces[i].append({k: np.asarray(v)[:n] for k, v in m.items()})
    metrics = [{k: np.concatenate([p[k] for p in ps], axis=0) for k in ps[0]} for ps in pieces]
    return metrics, run_seconds


def collect(
    experiments: Sequence[Experiment],
    run_metrics: Sequence[Mapping[str, Any]],
    seeds: Sequence[int],
    memories: Sequence[dict | None] | None = None,
) -> tuple[ExperimentResult, ...]:
    """The results of run-major metrics: each experiment's first ``G * N`` runs (padding
    dropped) reshaped to ``(G, N, ...)``, with its ``memories`` entry."""
    out = []
    memories = memories or [None] * len(experiments)
    for exp, metrics, memory in zip(experiments, run_metrics, memories, strict=True):
        G, N = exp.grid_size, len(seeds)
        shaped = {
            k: np.asarray(v)[: G * N].reshape((G, N) + np.shape(v)[1:]) for k, v in metrics.items()
        }
        grid = {k: np.asarray(v).reshape(G) for k, v in exp.grid.items()}
        out.append(ExperimentResult(exp.learner, exp.env, grid, np.asarray(seeds), shaped, memory))
    return tuple(out)


def select_grid(exp: Experiment, indices: Sequence[int]) -> Experiment:
    """The experiment restricted to some grid points."""
    idx = np.asarray(indices, int)
    hp = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[idx], exp.hparams)
    grid = {k: np.asarray(v).reshape(-1)[idx] for k, v in exp.grid.items()}
    return exp._replace(hparams=hp, grid=grid)


def table(
    result: SweepResult | Sequence[ExperimentResult],
    *,
    split: str = "",
    columns: Callable[[Mapping[str, np.ndarray]], Mapping[str, Sequence]] | None = None,
) -> list[dict]:
    """Tidy rows, one per (learner, environment, grid point): mean and sample std over trials of
    the final cumulative regret, regret per round, and (when the metrics carry ``status``) the
    rejected updates and a ``status_<name>`` count per status code; with the experiment's
    ``memory`` (from :func:`run_sweep`), the :data:`MEMORY_COLUMNS` of the compiled call that
    played it. ``columns``: ``metrics -> {column: one value per grid point}``, the caller's own
    columns (e.g. :func:`bandits_jax.mlogb.exploration.exploration_columns`)."""
    exps = result.experiments if isinstance(result, SweepResult) else result
    rows = []
    for r in exps:
        final = _final_regret(r)
        N, T = final.shape[1], np.shape(r.metrics["regret"])[-1]
        extra = {} if columns is None else columns(r.metrics)
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
            if r.memory is not None:
                row.update({k: r.memory[k] for k in MEMORY_COLUMNS})
            if "status" in r.metrics:
                st = np.asarray(r.metrics["status"][g])
                row["rejected"] = int(np.count_nonzero(is_rejected(st)))
                row.update({f"status_{k}": v for k, v in count_status(st).items()})
            row.update({k: v[g] for k, v in extra.items()})
            rows.append(row)
    return rows


def _py(x: Any) -> Any:
    x = np.asarray(x)
    return x.item() if x.ndim == 0 else x.tolist()


class TuneResult(NamedTuple):
    """Table rows of the tuning sweep (every grid point) and of the evaluation sweep (the chosen
    point per experiment; empty, and ``evaluation_sweep`` ``None``, without evaluation seeds)."""

    tuning: list[dict]
    evaluation: list[dict]
    chosen: tuple[int, ...]
    tuning_sweep: SweepResult
    evaluation_sweep: SweepResult | None


def tune_and_evaluate(
    experiments: Sequence[Experiment],
    *,
    num_rounds: int,
    tuning_seeds: Sequence[int],
    eval_seeds: Sequence[int],
    chooser: Callable[[SweepResult], Sequence[int]] | None = None,
    progress_for: Callable[[str, int], Any] | None = None,
    columns: Callable[[Mapping[str, np.ndarray]], Mapping[str, Sequence]] | None = None,
    **kwargs: Any,
) -> TuneResult:
    """Chooses each experiment's best grid point on tuning seeds, reports it on eval seeds.

    Args:
      tuning_seeds: seeds the choice is made on.
      eval_seeds: disjoint seeds the chosen point is reported on (none: no evaluation sweep).
      chooser: ``tuning sweep -> grid index per experiment`` (default: each experiment's lowest
        mean final regret over the tuning seeds, NaN ignored).
      progress_for: ``(split, runs) -> context manager`` giving the
        :class:`~bandits_jax.sim.chunks.Progress` of one sweep (``split``: ``"tuning"`` or
        ``"evaluation"``; ``runs``: grid points x seeds); default: ``kwargs``' ``progress``.
      columns: the caller's own table columns (:func:`table`).
      **kwargs: passed to both :func:`run_sweep` calls; ``checkpoint_dir`` gets ``/tuning`` and
        ``/evaluation`` appended.
    """
    overlap = set(map(int, tuning_seeds)) & set(map(int, eval_seeds))
    if overlap:
        raise ValueError(
            f"eval_seeds: must be disjoint from tuning_seeds, shared {sorted(overlap)}"
        )
    if progress_for is not None and "progress" in kwargs:
        raise ValueError("progress_for: give progress or progress_for, not both")
    ck = kwargs.pop("checkpoint_dir", None)

    def phase(split: str, exps: Sequence[Experiment], seeds: Sequence[int]) -> SweepResult:
        if progress_for is None:
            bar = contextlib.nullcontext(kwargs.get("progress"))
        else:
            bar = progress_for(split, sum(e.grid_size for e in exps) * len(seeds))
        with bar as progress:
            return run_sweep(
                exps,
                num_rounds=num_rounds,
                seeds=seeds,
                checkpoint_dir=None if ck is None else os.path.join(ck, split),
                **{**kwargs, "progress": progress},
            )

    tune = phase("tuning", experiments, tuning_seeds)
    chosen = tuple(int(g) for g in (chooser or _least_mean_regret)(tune))
    ev = None
    if len(eval_seeds):
        picked = [select_grid(e, [g]) for e, g in zip(experiments, chosen, strict=True)]
        ev = phase("evaluation", picked, eval_seeds)
    evaluation = [] if ev is None else table(ev, split="evaluation", columns=columns)
    return TuneResult(table(tune, split="tuning", columns=columns), evaluation, chosen, tune, ev)


def _final_regret(r: ExperimentResult) -> np.ndarray:
    """``(G, N)`` final cumulative regret of each run."""
    return np.asarray(r.metrics["regret"], np.float64).sum(axis=-1)


def _least_mean_regret(tune: SweepResult) -> list[int]:
    """Per experiment, the grid point of lowest mean final regret (NaN ignored)."""
    return [int(np.nanargmin(_final_regret(r).mean(-1))) for r in tune.experiments]


def choose_across(tune: SweepResult) -> list[int]:
    """A ``chooser`` of :func:`tune_and_evaluate`: one grid point per learner for all its
    experiments (which share a grid), the least mean over them of ``regret / that experiment's
    best regret`` (every setting weighs the same whatever its regret scale); NaN never wins.
    The rule the tuned recipes of :mod:`bandits_jax.mlogb.recipes` were chosen by.

    Raises:
      ValueError: a learner's experiments have different grids.
    """
    finals = [_final_regret(r).mean(-1) for r in tune.experiments]
    learners = [r.learner for r in tune.experiments]
    chosen: dict[str, int] = {}
    for name in dict.fromkeys(learners):
        mine = [f for f, n in zip(finals, learners, strict=True) if n == name]
        if len({f.shape for f in mine}) != 1:
            raise ValueError(f"tune: learner {name!r} has experiments of different grids")
        rel = np.stack([f / np.nanmin(np.where(f > 0, f, np.nan)) for f in mine])
        score = np.where(np.all(np.isfinite(rel), axis=0), rel.mean(axis=0), np.inf)
        chosen[name] = int(np.argmin(score))
    return [chosen[n] for n in learners]
