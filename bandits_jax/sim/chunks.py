"""Long runs in chunks of rounds: a ``lax.scan`` per chunk, progress, checkpoints, resume.

A run of ``T`` rounds is played as ``ceil(T / chunk_size)`` calls of one compiled chunk function
(``bandits_jax.sim.runner.play`` over ``chunk_size`` rounds, plus one more compiled length for a
shorter last chunk). Between chunks the host

* reports progress on stderr (a :class:`Progress` bar: trial-rounds done, their rate, time
  left, and what is compiling),
* writes the chunk's metrics (``metrics_00000.npz``, ...) and then the run state
  (``state.npz``: learner, environment and PRNG key as arrays, see :mod:`.checkpoint`), the state
  being written last so that it is the commit point.

Resuming loads ``state.npz`` and the metric files and plays the remaining chunks with the same
compiled function, so an interrupted run and an uninterrupted one give bit-identical metrics and
states (the chunk size must be the same; it is recorded and checked, as is a user configuration).
Every file carries the run's identity (a hash of rounds, chunk size and configuration, so of the
trial's seed too), its chunk index and a checksum: a metrics file of another run or trial, a
state with NaN, a truncated file or a chunk count past the end is refused with a
:class:`~bandits_jax.sim.checkpoint.CheckpointError`. The directory holds a lock file while a run
writes it (:class:`~bandits_jax.sim.checkpoint.DirectoryLock`).

The chunk function is compiled ahead of time (``jit(...).lower(...).compile()``), so compile time
is reported separately from run time: ``ChunkStats.run_seconds`` is the wall time of the chunks
alone, which is what per-round timings should use.

States may be a single run (``batched=False``), a batch of runs with a leading run axis on every
leaf (``batched=True``; metrics then have shape ``(runs, rounds, ...)``), sharded over a device
mesh (see :mod:`.sharding`), or a tuple of such batches played by a tuple of step functions in the
same compiled call (several learners in one sweep).

"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import pathlib
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TextIO

import jax
import jax.numpy as jnp
import numpy as np
import tqdm

from bandits_jax.sim import checkpoint
from bandits_jax.sim.runner import StepFn, play

__all__ = [
    "ChunkFn",
    "ChunkStats",
    "ChunkedResult",
    "Progress",
    "run_chunked",
    "memory_figures",
    "tree_bytes",
]

PyTree = Any


class Progress:
    """A progress bar (tqdm) counting trial-rounds: one round of one run, so a chunk of ``L``
    rounds played by ``N`` runs together counts ``N * L``. Every command counts this unit.

    One bar may span several runs (the trials and learners of one setting, a sweep's batches):
    :func:`run_chunked` calls :meth:`advance` after each chunk. The time left is tqdm's smoothed
    rate over wall time, compiling included; while a chunk function compiles the bar says
    ``compiling ...`` (:meth:`compiling`, called by :meth:`ChunkFn.compiled` when it is given the
    bar, as :func:`run_chunked` does). The counts are kept when nothing is
    drawn.

    Args:
      total: trial-rounds in all.
      label: shown before the bar.
      stream: where to draw (default ``sys.stderr``).
      enabled: ``False`` draws nothing (``--quiet``).
      min_interval: on a stream that is not a terminal (a log), seconds between redraws.
    """

    unit = "trial-rounds"

    def __init__(
        self,
        total: int,
        label: str = "",
        *,
        stream: TextIO | None = None,
        enabled: bool = True,
        min_interval: float = 5.0,
    ):
        stream = sys.stderr if stream is None else stream
        tty = bool(getattr(stream, "isatty", lambda: False)())
        self.done = 0
        self._total = int(total)
        self._bar = tqdm.tqdm(
            total=self._total,
            desc=label or None,
            unit=f" {self.unit}",
            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt}{unit} "
            "[{elapsed}<{remaining}, {rate_fmt}{postfix}]",
            file=stream,
            disable=not enabled,
            mininterval=0.1 if tty else min_interval,
            dynamic_ncols=tty,
        )

    @property
    def total(self) -> int:
        """Trial-rounds in all (a caller may correct it once it knows, e.g. a sweep's batches)."""
        return self._total

    @total.setter
    def total(self, value: int) -> None:
        self._total = int(value)
        self._bar.total = self._total
        self._bar.refresh()

    def advance(self, trial_rounds: int) -> None:
        """Counts ``trial_rounds`` just played."""
        self.done += int(trial_rounds)
        self._bar.update(int(trial_rounds))

    def skip(self, trial_rounds: int) -> None:
        """Counts trial-rounds done earlier (restored from a checkpoint): not part of the rate."""
        self.done += int(trial_rounds)
        bar = self._bar
        if not bar.disable:  # counted as if the bar had started there
            bar.n += int(trial_rounds)
            bar.last_print_n += int(trial_rounds)
            bar.initial += int(trial_rounds)
            bar.refresh()

    def describe(self, label: str) -> None:
        """Shows ``label`` before the bar from now on (e.g. the setting being played)."""
        self._bar.set_description(label or None)

    @contextlib.contextmanager
    def compiling(self, what: str):
        """Shows ``compiling <what>`` after the bar while the block runs."""
        self._bar.set_postfix_str(f"compiling {what}")
        try:
            yield
        finally:
            self._bar.set_postfix_str("", refresh=False)

    def close(self) -> None:
        """Draws the final state and ends the bar's line."""
        self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tree_bytes(tree: PyTree) -> int:
    """Bytes of a pytree's leaves (arrays or ``ShapeDtypeStruct``; PRNG keys count their data)."""
    total = 0
    for x in jax.tree_util.tree_leaves(tree):
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            x = jax.eval_shape(jax.random.key_data, x)  # (..., key words) of uint32
        total += math.prod(x.shape) * np.dtype(x.dtype).itemsize
    return int(total)


def memory_figures(compiled: Any) -> dict[str, int] | None:
    """XLA's static memory figures of a compiled executable, per device, in bytes.

    ``peak_bytes`` = argument + output + temp - alias: what one call holds at once (a donated
    input aliased to an output counts once). ``None`` where the backend has no analysis.
    """
    try:
        ma = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - some backends do not implement it
        return None
    if ma is None:
        return None
    arg = int(ma.argument_size_in_bytes)
    out = int(ma.output_size_in_bytes)
    temp = int(ma.temp_size_in_bytes)
    alias = int(ma.alias_size_in_bytes)
    return {
        "argument_bytes": arg,
        "output_bytes": out,
        "temp_bytes": temp,
        "alias_bytes": alias,
        "peak_bytes": arg + out + temp - alias,
    }


def _signature(tree: PyTree, length: int) -> tuple:
    """What a compiled chunk depends on: length, tree structure, shapes and dtypes."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return (length, treedef, tuple((np.shape(x), str(x.dtype)) for x in leaves))


class ChunkFn:
    """``chunk(state, length) -> (state, metrics)``, compiled once per length (ahead of time).

    The input ``state`` is donated: its buffers are reused for the output state and deleted, so a
    long run holds one copy of its carry. Pass a copy (``jax.tree.map(jnp.copy, state)``) to keep
    the input; :func:`run_chunked` does so for the caller's initial state.

    Args:
      step: a step function, or a tuple of them (then states are tuples, one batch each).
      batched: states carry a leading run axis on every leaf (played with ``vmap``).
      mesh: a 1-D ``jax.sharding.Mesh`` (axis ``"runs"``) to shard the run axis over (requires
        ``batched``; the run count must be a multiple of the mesh size, see
        :func:`bandits_jax.sim.sharding.pad_runs`).
      microbatch: play the runs (per device) as ``lax.map`` over ``vmap``-ed slices of this many
        runs (the run count per device must be a multiple): a run's numbers then do not depend
        on how many runs share the call (XLA's CPU kernels block sums by the batch width), and
        temporaries shrink to one slice's; ``None``: one ``vmap`` over all runs.
    """

    def __init__(
        self,
        step: StepFn | Sequence[StepFn],
        *,
        batched: bool = False,
        mesh: Any = None,
        microbatch: int | None = None,
    ):
        self.multi = isinstance(step, (tuple, list))
        self.steps = tuple(step) if self.multi else (step,)
        self.batched = batched
        self.mesh = mesh
        if microbatch is not None:
            if isinstance(microbatch, bool) or not isinstance(microbatch, int) or microbatch < 1:
                raise ValueError(f"microbatch: expected an int >= 1 or None, got {microbatch!r}")
            if not batched:
                raise ValueError("microbatch: needs batched=True (a leading run axis)")
        self.microbatch = microbatch
        if mesh is not None and not batched:
            raise ValueError("mesh: sharding needs batched=True (a leading run axis)")
        self.round_axis = 1 if batched else 0
        self.compile_seconds = 0.0
        self._compiled: dict[Any, Any] = {}

    def _play_all(self, states, length: int):
        outs = []
        for step, s in zip(self.steps, states, strict=True):
            fn = functools.partial(play, step, num_rounds=length)
            if not self.batched:
                outs.append(fn(s))
            elif self.microbatch is None:
                outs.append(jax.vmap(fn)(s))
            else:  # vmapped over microbatch-wide slices, one slice after another
                outs.append(_map_metrics_last(fn, s, self.microbatch))
        new_states = tuple(o[0] for o in outs)
        metrics = tuple(o[1] for o in outs)
        return new_states, metrics

    def _function(self, length: int) -> Callable:
        def fn(state):
            states = state if self.multi else (state,)
            new_states, metrics = self._play_all(states, length)
            if self.multi:
                return new_states, metrics
            return new_states[0], metrics[0]

        if self.mesh is None:
            return jax.jit(fn, donate_argnums=0)
        from jax.sharding import NamedSharding, PartitionSpec

        spec = PartitionSpec(self.mesh.axis_names[0])
        # Runs are independent (no collectives), so the per-device body is the unsharded vmapped
        # scan on a slice; check_vma=False because learner code (while_loop carries built from
        # constants) need not annotate which values vary across devices.
        sharded = jax.shard_map(
            fn, mesh=self.mesh, in_specs=(spec,), out_specs=spec, check_vma=False
        )
        sharding = NamedSharding(self.mesh, spec)
        return jax.jit(sharded, in_shardings=(sharding,), out_shardings=sharding, donate_argnums=0)

    def place(self, state: PyTree) -> PyTree:
        """Puts ``state`` where the compiled function wants it (sharded over the mesh).

        Abstract leaves (``jax.ShapeDtypeStruct``, e.g. from ``jax.eval_shape``) get the sharding
        attached, so a chunk can be compiled (and its memory analysed) before any run exists.
        """
        if self.mesh is None:
            return state
        from jax.sharding import NamedSharding, PartitionSpec

        sharding = NamedSharding(self.mesh, PartitionSpec(self.mesh.axis_names[0]))
        leaves = jax.tree_util.tree_leaves(state)
        if leaves and all(isinstance(x, jax.ShapeDtypeStruct) for x in leaves):
            return jax.tree.map(
                lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), state
            )
        return jax.device_put(state, sharding)

    def runs(self, state: PyTree) -> int:
        """Runs a chunk of ``state`` plays together (its trial-rounds per round)."""
        states = state if self.multi else (state,)
        if not self.batched:
            return len(states)
        return sum(int(jax.tree_util.tree_leaves(s)[0].shape[0]) for s in states)

    def compiled(self, state: PyTree, length: int, progress: Progress | None = None):
        """The executable for ``length`` rounds (compiled on first use; time recorded;
        ``progress``, a :class:`Progress`, says so meanwhile)."""
        sig = _signature(state, length)
        if sig not in self._compiled:
            what = f"a {length}-round chunk of {self.runs(state)} run(s)"
            with contextlib.nullcontext() if progress is None else progress.compiling(what):
                t0 = time.perf_counter()
                lowered = self._function(length).lower(self.place(state))
                self._compiled[sig] = lowered.compile()
                self.compile_seconds += time.perf_counter() - t0
        return self._compiled[sig]

    def compile_run(
        self, state: PyTree, num_rounds: int, chunk_size: int, progress: Progress | None = None
    ) -> None:
        """Compiles every chunk length that :func:`run_chunked` plays for ``num_rounds`` rounds
        in chunks of ``chunk_size`` from ``state`` (ahead of time, before any chunk is timed)."""
        for length in sorted(set(_chunk_lengths(num_rounds, chunk_size))):
            self.compiled(state, length, progress)

    def memory(self, state: PyTree, length: int) -> dict[str, int] | None:
        """:func:`memory_figures` of the chunk for ``state`` (arrays or ``ShapeDtypeStruct``s)
        and ``length`` rounds, per device; compiles it if needed (the executable is kept)."""
        return memory_figures(self.compiled(state, length))

    def eval_shape(self, state: PyTree, length: int) -> PyTree:
        """Abstract ``(state, metrics)`` of a chunk (shapes and dtypes, no computation)."""
        return jax.eval_shape(self._function(length), state)

    def __call__(self, state: PyTree, length: int) -> tuple[PyTree, PyTree]:
        return self.compiled(state, length)(self.place(state))


def _map_metrics_last(fn: Callable, states: PyTree, width: int):
    """``jax.vmap(fn)(states)`` computed as ``lax.map`` over slices of ``width`` runs (the run
    count must be a multiple of ``width``): every run is computed by the same ``width``-wide
    code however many runs there are, and temporaries are those of one slice."""
    n = jax.tree_util.tree_leaves(states)[0].shape[0]
    if n % width:
        raise ValueError(f"microbatch: {n} runs is not a multiple of the width {width}")
    return jax.lax.map(fn, states, batch_size=width)


class ChunkStats(NamedTuple):
    """Timings of a chunked run.

    Attributes:
      rounds_done: rounds played in all (restored ones included).
      rounds_timed: rounds played in this call.
      run_seconds: wall time of the chunks played in this call, compile excluded.
      total_run_seconds: the same over all rounds done, restored chunks included (their times
        are recorded in the checkpoint).
      compile_seconds: compile time spent in this call.
      chunk_seconds: wall time of each chunk played in this call.
      resumed_from: rounds restored from a checkpoint (0 if none).
      finished: whether all rounds are done (False when stopped by ``stop_after_chunks``).
    """

    rounds_done: int
    rounds_timed: int
    run_seconds: float
    total_run_seconds: float
    compile_seconds: float
    chunk_seconds: tuple[float, ...]
    resumed_from: int
    finished: bool


class ChunkedResult(NamedTuple):
    """``state`` after the last chunk played, host (numpy) ``metrics`` of all rounds done,
    and :class:`ChunkStats`."""

    state: PyTree
    metrics: PyTree
    stats: ChunkStats


def _chunk_lengths(num_rounds: int, chunk_size: int) -> list[int]:
    full, rest = divmod(num_rounds, chunk_size)
    return [chunk_size] * full + ([rest] if rest else [])


def _config_json(config: Any) -> str:
    return json.dumps(config, sort_keys=True, default=str)


def run_id(meta_base: dict) -> str:
    """The identity of a run: a hash of its rounds, chunk size and configuration."""
    return hashlib.sha256(json.dumps(meta_base, sort_keys=True).encode()).hexdigest()[:16]


def run_chunked(
    chunk_fn: ChunkFn,
    state: PyTree,
    num_rounds: int,
    *,
    chunk_size: int,
    checkpoint_dir: str | os.PathLike | None = None,
    resume: bool = False,
    config: Any = None,
    progress: Progress | None = None,
    keep: Callable[[PyTree], PyTree] | None = None,
    stop_after_chunks: int | None = None,
    donate_initial: bool = False,
) -> ChunkedResult:
    """Plays ``num_rounds`` rounds in chunks, with progress and optional checkpoints.

    Args:
      chunk_fn: a :class:`ChunkFn` for the run's step function(s).
      state: the initial run state (``init_run(...)``, batched or a tuple as ``chunk_fn`` says).
        When resuming it is the template the checkpoint is checked against.
      num_rounds: rounds in all.
      chunk_size: rounds per compiled call (a checkpoint after each).
      checkpoint_dir: where ``state.npz`` and ``metrics_*.npz`` go; ``None`` for no checkpoints.
      resume: continue from ``checkpoint_dir`` if it holds a checkpoint of this run (same
        ``num_rounds``, ``chunk_size`` and ``config``); otherwise start afresh and overwrite.
      config: JSON-serialisable description of the run, stored and compared on resume.
      progress: a :class:`Progress` to advance by the trial-rounds played (``N * L`` for a
        chunk of ``L`` rounds of ``N`` runs; restored ones skipped) and to show compiles on
        (``None``: silent).
      keep: applied to each chunk's metrics before they leave the device (e.g. select fields).
        Must keep the round axis.
      stop_after_chunks: play at most this many chunks in this call (as if interrupted), for
        tests and for time-boxed jobs; the checkpoint lets a later call finish the run.
      donate_initial: let the first chunk donate ``state`` itself (its buffers are deleted)
        instead of a copy, so the run never holds two copies of its carry.

    Returns:
      :class:`ChunkedResult`; ``metrics`` leaves have the rounds done along
      ``chunk_fn.round_axis``.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size: expected >= 1, got {chunk_size}")
    if num_rounds < 0:
        raise ValueError(f"num_rounds: expected >= 0, got {num_rounds}")
    keep = keep or (lambda m: m)
    lengths = _chunk_lengths(num_rounds, chunk_size)
    ckdir = pathlib.Path(checkpoint_dir) if checkpoint_dir is not None else None
    meta_base = {
        "num_rounds": int(num_rounds),
        "chunk_size": int(chunk_size),
        "config": _config_json(config),
    }
    ident = run_id(meta_base)
    lock = checkpoint.DirectoryLock(ckdir) if ckdir is not None else contextlib.nullcontext()
    with lock:
        return _run_locked(
            chunk_fn,
            state,
            num_rounds,
            chunk_size=chunk_size,
            lengths=lengths,
            ckdir=ckdir,
            meta_base=meta_base,
            ident=ident,
            resume=resume,
            progress=progress,
            keep=keep,
            stop_after_chunks=stop_after_chunks,
            donate_initial=donate_initial,
        )


def _run_locked(
    chunk_fn: ChunkFn,
    state: PyTree,
    num_rounds: int,
    *,
    chunk_size: int,
    lengths: list[int],
    ckdir: pathlib.Path | None,
    meta_base: dict,
    ident: str,
    resume: bool,
    progress: Progress | None,
    keep: Callable[[PyTree], PyTree],
    stop_after_chunks: int | None,
    donate_initial: bool = False,
) -> ChunkedResult:
    """:func:`run_chunked`'s body, run while holding the checkpoint directory's lock: restore
    or clear the checkpoint, play the remaining chunks, gather their metrics and timings."""
    start = _Start([], 0, 0, 0.0)
    if ckdir is not None and resume and (ckdir / "state.npz").is_file():
        state, start = _restore(chunk_fn, state, ckdir, meta_base, ident, lengths, chunk_size, keep)
        if progress is not None and start.rounds_done:
            progress.skip(start.rounds_done * chunk_fn.runs(state))
    elif ckdir is not None:
        _clear(ckdir)

    compile_before = chunk_fn.compile_seconds
    # The chunks donate their input state; the caller's initial state is not theirs to delete
    # (unless the caller gives it up: donate_initial).
    if not donate_initial:
        state = jax.tree.map(jnp.copy, state)
    state, pieces, chunk_seconds = _play_chunks(
        chunk_fn, state, lengths, start, ckdir, meta_base, ident, progress, keep,
        stop_after_chunks,
    )  # fmt: skip
    timed = sum(lengths[start.chunk : start.chunk + len(chunk_seconds)])
    rounds_done = start.rounds_done + timed
    run_seconds = float(sum(chunk_seconds))
    stats = ChunkStats(
        rounds_done=rounds_done,
        rounds_timed=timed,
        run_seconds=run_seconds,
        total_run_seconds=start.seconds + run_seconds,
        compile_seconds=chunk_fn.compile_seconds - compile_before,
        chunk_seconds=tuple(chunk_seconds),
        resumed_from=sum(lengths[: start.chunk]),
        finished=rounds_done >= num_rounds,
    )
    return ChunkedResult(state, _gather(chunk_fn, state, pieces, keep), stats)


class _Start(NamedTuple):
    """Where a run starts: the restored chunks' host metrics, the chunks and rounds they
    cover and their recorded run seconds (all empty or 0 for a fresh run)."""

    pieces: list[PyTree]
    chunk: int
    rounds_done: int
    seconds: float


def _restore(
    chunk_fn: ChunkFn,
    template: PyTree,
    ckdir: pathlib.Path,
    meta_base: dict,
    ident: str,
    lengths: list[int],
    chunk_size: int,
    keep: Callable[[PyTree], PyTree],
) -> tuple[PyTree, _Start]:
    """The checkpoint's state (checked against ``template``) and :class:`_Start`; refuses a
    checkpoint of other settings or another run, and a metrics file of another run, trial or
    chunk."""
    meta = checkpoint.read_meta(ckdir / "state.npz")
    for k, v in meta_base.items():
        if meta.get(k) != v:
            raise checkpoint.CheckpointError(
                f"{ckdir}: checkpoint has {k}={meta.get(k)!r}, this run has {v!r}; "
                "resume with the same settings or start without --resume"
            )
    if meta.get("run_id", ident) != ident:
        raise checkpoint.CheckpointError(f"{ckdir}: state.npz belongs to another run")
    start_chunk, rounds_done = meta.get("chunks_done"), meta.get("rounds_done")
    if (
        not isinstance(start_chunk, int)
        or not 0 <= start_chunk <= len(lengths)
        or rounds_done != sum(lengths[:start_chunk])
    ):
        raise checkpoint.CheckpointError(
            f"{ckdir}: state.npz says {start_chunk!r} chunks ({rounds_done!r} rounds) done, "
            f"but this run has {len(lengths)} chunks of {chunk_size} rounds"
        )
    state, _ = checkpoint.restore(ckdir / "state.npz", template, require_finite=True)
    pieces = []
    for k in range(start_chunk):
        like = jax.eval_shape(keep, chunk_fn.eval_shape(state, lengths[k])[1])
        mpath = ckdir / f"metrics_{k:05d}.npz"
        piece, mmeta = checkpoint.restore(mpath, like)
        if mmeta.get("run_id") != ident or mmeta.get("chunk") != k:
            raise checkpoint.CheckpointError(
                f"{mpath}: metrics of another run, trial or chunk (run {mmeta.get('run_id')},"
                f" chunk {mmeta.get('chunk')}; expected run {ident}, chunk {k})"
            )
        pieces.append(jax.device_get(piece))
    seconds = float(meta.get("run_seconds", 0.0))
    return state, _Start(pieces, start_chunk, rounds_done, seconds)


def _clear(ckdir: pathlib.Path) -> None:
    """A fresh run: the directory exists and holds no metrics or state of an earlier run."""
    ckdir.mkdir(parents=True, exist_ok=True)
    for old in ckdir.glob("metrics_*.npz"):
        old.unlink()
    stale = ckdir / "state.npz"
    if stale.exists():
        stale.unlink()


def _play_chunks(
    chunk_fn, state, lengths, start, ckdir, meta_base, ident, progress, keep, stop_after_chunks
):  # fmt: skip
    """Plays the chunks from ``start.chunk`` on (at most ``stop_after_chunks`` of them), each
    compiled outside its timed region, its metrics then the state checkpointed after it and the
    bar advanced; returns the last state, the metrics of every chunk done (restored ones first)
    and the seconds of each chunk played."""
    pieces = list(start.pieces)
    chunk_seconds: list[float] = []
    rounds_done = start.rounds_done
    runs = chunk_fn.runs(state)
    for k in range(start.chunk, len(lengths)):
        if stop_after_chunks is not None and len(chunk_seconds) >= stop_after_chunks:
            break
        length = lengths[k]
        exe = chunk_fn.compiled(state, length, progress)  # compile outside the timed region
        t0 = time.perf_counter()
        state, metrics = exe(chunk_fn.place(state))
        metrics = jax.device_get(keep(metrics))
        jax.block_until_ready(state)
        chunk_seconds.append(time.perf_counter() - t0)
        pieces.append(metrics)
        rounds_done += length
        if ckdir is not None:
            checkpoint.save(ckdir / f"metrics_{k:05d}.npz", metrics, {"run_id": ident, "chunk": k})
            checkpoint.save(
                ckdir / "state.npz",
                state,
                {
                    **meta_base,
                    "run_id": ident,
                    "chunks_done": k + 1,
                    "rounds_done": rounds_done,
                    "run_seconds": start.seconds + sum(chunk_seconds),
                },
            )
        if progress is not None:
            progress.advance(length * runs)
    return state, pieces, chunk_seconds


def _gather(
    chunk_fn: ChunkFn, state: PyTree, pieces: list[PyTree], keep: Callable[[PyTree], PyTree]
) -> PyTree:
    """The chunks' host metrics concatenated along the round axis (no chunk: empty arrays of
    the kept metrics' shapes with zero rounds)."""
    if pieces:
        return jax.tree_util.tree_map(
            lambda *xs: np.concatenate([np.asarray(x) for x in xs], axis=chunk_fn.round_axis),
            *pieces,
        )
    empty = jax.eval_shape(keep, chunk_fn.eval_shape(state, 0)[1])
    return jax.tree_util.tree_map(lambda s: np.zeros(s.shape, s.dtype), empty)
