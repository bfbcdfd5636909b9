"""Long runs in chunks of rounds: a ``lax.scan`` per chunk, progress, checkpoints, resume.

A run of ``T`` rounds is ``ceil(T / chunk_size)`` calls of one chunk function
(:func:`bandits_jax.sim.runner.play` over ``chunk_size`` rounds), compiled ahead of time so that
``ChunkStats.run_seconds`` excludes compilation. After each chunk the host advances a
:class:`Progress` bar and writes the chunk's metrics (``metrics_00000.npz``, ...), then the run
state (``state.npz``, :mod:`.checkpoint`) as the commit point. A resumed run gives bit-identical
metrics and states to an uninterrupted one. Every file carries the run's identity (a hash of
rounds, chunk size and configuration) and its chunk index; a file of another run is refused.

States may be one run, a batch with a leading run axis (``batched=True``; metrics then have shape
``(runs, rounds, ...)``), sharded over a device mesh (:mod:`.sharding`), or a tuple of batches
played by a tuple of step functions in the same compiled call.
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
from jax.sharding import NamedSharding, PartitionSpec

from bandits_jax.checks import check_int
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
    """A tqdm bar counting trial-rounds (a chunk of ``L`` rounds of ``N`` runs counts ``N * L``).

    One bar may span several runs; :func:`run_chunked` advances it after each chunk and shows
    ``compiling ...`` while a chunk compiles. The counts are kept when nothing is drawn.

    Args:
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
    kinds = ("argument", "output", "temp", "alias")
    fig = {f"{k}_bytes": int(getattr(ma, f"{k}_size_in_bytes")) for k in kinds}
    fig["peak_bytes"] = sum(fig[f"{k}_bytes"] for k in kinds[:3]) - fig["alias_bytes"]
    return fig


class ChunkFn:
    """``chunk(state, length) -> (state, metrics)``, compiled ahead of time once per length.

    The input ``state`` is donated (its buffers are reused and deleted), so a long run holds one
    copy of its carry; :func:`run_chunked` passes a copy of the caller's.

    Args:
      step: a step function, or a tuple of them (then states are tuples, one batch each).
      batched: states carry a leading run axis on every leaf (played with ``vmap``).
      mesh: a 1-D ``jax.sharding.Mesh`` to shard the run axis over (needs ``batched`` and a
        multiple of the mesh size of runs, :func:`bandits_jax.sim.sharding.pad_runs`).
      microbatch: play each device's runs as ``lax.map`` over ``vmap``-ed slices of this many
        runs, so that a run's numbers do not depend on how many share the call (XLA's CPU
        kernels block sums by the batch width); ``None``: one ``vmap`` over all runs.
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
            check_int("microbatch", microbatch)
            if not batched:
                raise ValueError("microbatch: needs batched=True (a leading run axis)")
        self.microbatch = microbatch
        if mesh is not None and not batched:
            raise ValueError("mesh: sharding needs batched=True (a leading run axis)")
        self._sharding = (
            None if mesh is None else NamedSharding(mesh, PartitionSpec(mesh.axis_names[0]))
        )
        self.round_axis = 1 if batched else 0
        self.compile_seconds = 0.0
        self._compiled: dict[Any, Any] = {}

    def _function(self, length: int) -> Callable:
        def fn(state):
            outs = []
            for step, s in zip(self.steps, state if self.multi else (state,), strict=True):
                run = functools.partial(play, step, num_rounds=length)
                if not self.batched:
                    outs.append(run(s))
                elif self.microbatch is None:
                    outs.append(jax.vmap(run)(s))
                else:  # every run computed by the same microbatch-wide code, slice after slice
                    n = jax.tree_util.tree_leaves(s)[0].shape[0]
                    if n % self.microbatch:
                        raise ValueError(
                            f"microbatch: {n} runs is not a multiple of the width {self.microbatch}"
                        )
                    outs.append(jax.lax.map(run, s, batch_size=self.microbatch))
            states, metrics = zip(*outs, strict=True)
            return (states, metrics) if self.multi else (states[0], metrics[0])

        if self.mesh is None:
            return jax.jit(fn, donate_argnums=0)
        # Runs are independent (no collectives); check_vma=False because learner code (while_loop
        # carries built from constants) need not annotate which values vary across devices.
        sharding = self._sharding
        sharded = jax.shard_map(
            fn, mesh=self.mesh, in_specs=(sharding.spec,), out_specs=sharding.spec, check_vma=False
        )
        return jax.jit(sharded, in_shardings=(sharding,), out_shardings=sharding, donate_argnums=0)

    def place(self, state: PyTree) -> PyTree:
        """Puts ``state`` where the compiled function wants it (sharded over the mesh); abstract
        leaves (``jax.ShapeDtypeStruct``) get the sharding attached, so a chunk can be compiled
        (and its memory analysed) before any run exists."""
        if self.mesh is None:
            return state
        leaves = jax.tree_util.tree_leaves(state)
        if leaves and all(isinstance(x, jax.ShapeDtypeStruct) for x in leaves):
            return jax.tree.map(
                lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=self._sharding), state
            )
        return jax.device_put(state, self._sharding)

    def runs(self, state: PyTree) -> int:
        """Runs a chunk of ``state`` plays together (its trial-rounds per round)."""
        states = state if self.multi else (state,)
        if not self.batched:
            return len(states)
        return sum(int(jax.tree_util.tree_leaves(s)[0].shape[0]) for s in states)

    def compiled(self, state: PyTree, length: int, progress: Progress | None = None):
        """The executable for ``length`` rounds, compiled on first use (time recorded, shown on
        ``progress``)."""
        leaves, treedef = jax.tree_util.tree_flatten(state)
        sig = (length, treedef, tuple((np.shape(x), str(x.dtype)) for x in leaves))
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
        """Compiles every chunk length :func:`run_chunked` plays for ``num_rounds`` rounds."""
        for length in sorted(set(_chunk_lengths(num_rounds, chunk_size))):
            self.compiled(state, length, progress)

    def memory(self, state: PyTree, length: int) -> dict[str, int] | None:
        """:func:`memory_figures` of the chunk for ``state`` (arrays or ``ShapeDtypeStruct``s)
        and ``length`` rounds, per device (compiled if needed, and kept)."""
        return memory_figures(self.compiled(state, length))

    def eval_shape(self, state: PyTree, length: int) -> PyTree:
        """Abstract ``(state, metrics)`` of a chunk (shapes and dtypes, no computation)."""
        return jax.eval_shape(self._function(length), state)

    def __call__(self, state: PyTree, length: int) -> tuple[PyTree, PyTree]:
        return self.compiled(state, length)(self.place(state))


class ChunkStats(NamedTuple):
    """Timings of a chunked run: the rounds done in all and those played (timed) in this call;
    the run seconds of this call's chunks (compile excluded) and of all chunks done (restored ones
    as recorded); this call's compile seconds; each chunk's seconds; the rounds restored from a
    checkpoint; and whether all rounds are done (not when stopped by ``stop_after_chunks``)."""

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
      state: the initial run state (as ``chunk_fn`` plays it); when resuming, the template the
        checkpoint is checked against.
      chunk_size: rounds per compiled call (a checkpoint after each).
      checkpoint_dir: where ``state.npz`` and ``metrics_*.npz`` go; ``None``: no checkpoints.
      resume: continue from ``checkpoint_dir`` if it holds a checkpoint of this run (same
        ``num_rounds``, ``chunk_size`` and ``config``); otherwise start afresh and overwrite.
      config: JSON-serialisable description of the run, stored and compared on resume.
      keep: applied to each chunk's metrics on the device (e.g. select fields; keeps rounds).
      stop_after_chunks: play at most this many chunks in this call (as if interrupted).
      donate_initial: let the first chunk donate ``state`` itself instead of a copy.

    Returns:
      :class:`ChunkedResult`; ``metrics`` have the rounds done along ``chunk_fn.round_axis``.
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
        "config": json.dumps(config, sort_keys=True, default=str),
    }
    ident = hashlib.sha256(json.dumps(meta_base, sort_keys=True).encode()).hexdigest()[:16]
    ck = None if ckdir is None else _Checkpoints(ckdir, meta_base, ident)
    with contextlib.nullcontext() if ckdir is None else checkpoint.DirectoryLock(ckdir):
        start = _Start([], 0, 0, 0.0)
        if ck is not None and resume and (ckdir / "state.npz").is_file():
            state, start = ck.restore(chunk_fn, state, lengths, keep)
            if progress is not None and start.rounds_done:
                progress.skip(start.rounds_done * chunk_fn.runs(state))
        elif ck is not None:
            ck.clear()
        compile_before = chunk_fn.compile_seconds
        if not donate_initial:  # the chunks donate their input: keep the caller's state intact
            state = jax.tree.map(jnp.copy, state)
        pieces = list(start.pieces)  # the metrics of every chunk done, restored ones first
        seconds: list[float] = []  # of each chunk played in this call
        rounds_done = start.rounds_done
        runs = chunk_fn.runs(state)
        for k in range(start.chunk, len(lengths)):
            if stop_after_chunks is not None and len(seconds) >= stop_after_chunks:
                break
            exe = chunk_fn.compiled(state, lengths[k], progress)  # compiled outside the timing
            t0 = time.perf_counter()
            state, metrics = exe(chunk_fn.place(state))
            metrics = jax.device_get(keep(metrics))
            jax.block_until_ready(state)
            seconds.append(time.perf_counter() - t0)
            pieces.append(metrics)
            rounds_done += lengths[k]
            if ck is not None:
                ck.save(k, metrics, state, rounds_done, start.seconds + sum(seconds))
            if progress is not None:
                progress.advance(lengths[k] * runs)
        stats = ChunkStats(
            rounds_done=rounds_done,
            rounds_timed=rounds_done - start.rounds_done,
            run_seconds=float(sum(seconds)),
            total_run_seconds=start.seconds + float(sum(seconds)),
            compile_seconds=chunk_fn.compile_seconds - compile_before,
            chunk_seconds=tuple(seconds),
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


class _Checkpoints(NamedTuple):
    """The checkpoint directory of one run: its identity ``ident`` and the settings
    ``meta_base`` that a resume must match."""

    ckdir: pathlib.Path
    meta_base: dict
    ident: str

    def restore(self, chunk_fn: ChunkFn, template: PyTree, lengths: list[int], keep: Callable):
        """The checkpoint's state (checked against ``template``) and :class:`_Start`; refuses a
        checkpoint of other settings or another run, and a metrics file of another run, trial
        or chunk."""
        ckdir, ident = self.ckdir, self.ident
        meta = checkpoint.read_meta(ckdir / "state.npz")
        for k, v in self.meta_base.items():
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
                f"but this run has {len(lengths)} chunks of {self.meta_base['chunk_size']} rounds"
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

    def clear(self) -> None:
        """A fresh run: the directory exists and holds no metrics or state of an earlier run."""
        self.ckdir.mkdir(parents=True, exist_ok=True)
        for old in self.ckdir.glob("metrics_*.npz"):
            old.unlink()
        (self.ckdir / "state.npz").unlink(missing_ok=True)

    def save(self, k: int, metrics: PyTree, state: PyTree, rounds_done: int, seconds: float):
        """Chunk ``k``'s metrics, then the state after it (the commit point)."""
        meta = {"run_id": self.ident, "chunk": k}
        checkpoint.save(self.ckdir / f"metrics_{k:05d}.npz", metrics, meta)
        meta = {
            **self.meta_base,
            "run_id": self.ident,
            "chunks_done": k + 1,
            "rounds_done": rounds_done,
            "run_seconds": seconds,
        }
        checkpoint.save(self.ckdir / "state.npz", state, meta)


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
