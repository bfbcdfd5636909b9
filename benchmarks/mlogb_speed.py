"""Every MLogB kind's round as a library user runs it, against its floor (issue 55).

Run as ``python -m benchmarks.mlogb_speed`` (``--quick``: a reduced run, ``--kinds``/``--sizes``
to choose, ``--no-busy``, ``--json PATH``). A kind runs as ``mlogb.tuned(kind, num_outcomes=K,
dim=d, S=4, horizon=1000)``'s ``init``/``act``/``update`` in one ``jax.jit(lax.scan(...))`` over a
recorded stream (20 unit actions a round; the outcome from ``W*``, ``||W*||_F = 4``, and a recorded
uniform), one trial, float64, at XLA's defaults: the script sets no XLA option, thread count or
affinity for it (the JSON records the environment it found). Sizes: d in {20, 65, 400, 1600} x K
in {1, 4} (K = 1 for ECOLog) and (4096, 1) for the kinds of :data:`WIDE_KINDS`; a case whose
call, its round predicted from the kind's smaller sizes as growing like (K d)^3, exceeds the
plan's cap is skipped (listed, with the reason). Rounds: a call of about ``call_s`` at that
prediction; ``exact`` (O(t) a round) always ``exact_rounds``: its figure is the mean over rounds
1..that, at a horizon (buffer) of 1000.

Each case: ms a round (a call / rounds; compile excluded; median and [min, max] over repeats);
its floor, the faster of the kind written plainly in JAX (``benchmarks/_plain.py``) and its numpy
reference (``references``, in a process of its own with one BLAS thread, on the same stream's
first rounds), and kind / floor; the same ms with a second process spinning (started before,
stopped after), and busy / quiet. At (100, 4) and (400, 1): 64 vmapped trials' cost per trial
over one trial's, and the 64 trials sharded over 2 host devices (a process of its own whose one
setting is ``--xla_force_host_platform_device_count=2``) against one device here: the speed-up.
Then EOFD-MLogB (Section 4's hyperparameters, 10-30 of 30 actions) against its numpy reference
(a full SVD per sketch update) and OFUL-MLogB at the paper's sizes (``--eofd-cases``). The run
ends with issue 55's targets, met or MISSED, per kind and size, and the 1-minute load average.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from typing import Any, NamedTuple

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402

from bandits_jax import mlogb  # noqa: E402
from bandits_jax.envs.replay import replay_mlogb, replay_state  # noqa: E402
from bandits_jax.mlogb import model, recipes  # noqa: E402
from bandits_jax.sim import sharding as sh  # noqa: E402
from bandits_jax.sim.runner import init_run, play  # noqa: E402
from benchmarks import _plain  # noqa: E402
from benchmarks._options import names, parser, positive_int  # noqa: E402
from benchmarks._report import finish  # noqa: E402

ACTIONS = 20
SIZES = tuple((d, K) for d in (20, 65, 400, 1600) for K in (1, 4))
WIDE = (4096, 1)  # for the kinds whose round is linear or quadratic in d
WIDE_KINDS = ("linucb", "lin-ts", "soful", "eofd-paper", "eofd", "eofd-robust", "eofd-adaptive",
              "eofd-buffered", "greedy", "uniform")  # fmt: skip
BATCH_SIZES = ((100, 4), (400, 1))
EOFD_CASES = ((100, 4, 40), (400, 1, 40), (785, 1, 78), (10000, 1, 100))
OFUL_MAX_D = 1600  # K d beyond which the dense Kd x Kd OFUL of --eofd-cases is not run
TARGETS = {  # issue 55: name -> (what, key, op, bound)
    "floor": ("within 2x of floor (kind / floor)", "over_floor", "<=", 2.0),
    "busy": ("busy core <= 1.5x quiet (busy / quiet)", "busy_over_quiet", "<=", 1.5),
    "vmapped": ("vmapped <= 1.1x per trial (per trial / one trial)", "vmapped_over_one", "<=", 1.1),
    "sharded": ("sharded over 2 >= 1.7x (1 device / 2 devices)", "sharded_speedup", ">=", 1.7),
}  # fmt: skip
MIN_ROUNDS = 2
SPIN = "while True: pass"


class Plan(NamedTuple):
    """How much work a run does (seconds are targets, not limits, except the timeouts)."""

    call_s: float  # one timed call of the kind's scan
    max_rounds: int
    exact_rounds: int  # exact's fixed horizon
    call_cap_s: float  # a case whose predicted call (rounds x round) exceeds this is skipped
    numpy_s: float  # one pass of the numpy reference
    numpy_cap_s: float  # a numpy round predicted over this is not run
    numpy_timeout_s: float
    batch_call_s: float  # one call of the vmapped trials
    batch_cap_s: float  # a vmapped call predicted over this is not run
    sharded_timeout_s: float


FULL = Plan(0.1, 400, 8, 4.0, 1.0, 3.0, 120.0, 0.3, 10.0, 300.0)
QUICK = Plan(0.03, 100, 4, 0.6, 0.2, 0.5, 30.0, 0.1, 2.0, 120.0)


# --- the programs --------------------------------------------------------------------------------


def program(act, update):
    """The user's scan: each round ``act(state, X_t) -> (index, handle)``, the chosen action's
    outcome from ``W*`` and the round's uniform, ``update(state, handle, y)``; returns the final
    state and every round's ``(index, y)``."""

    def run(state, X, U, W):
        def step(s, xu):
            Xt, u = xu
            i, handle = act(s, Xt)
            y = model.sample_outcome(W @ Xt[i], u)
            return update(s, handle, y), (i, y)

        return lax.scan(step, state, (X, U))

    return run


def library_parts(learner):
    """``(act, update)`` of a library learner for :func:`program` (all actions valid)."""

    def act(s, Xt):
        c = learner.act(s, (Xt, jnp.ones(Xt.shape[0], bool)), jax.random.key(0))
        return c.index, c

    return act, learner.update


def plain_parts(p: _plain.Plain):
    """``(act, update)`` of a plain learner for :func:`program`."""

    def act(s, Xt):
        i = p.act(s, Xt)
        return i, Xt[i]

    return act, p.update


def batched(act, update):
    """:func:`program` vmapped over trials: states, ``U`` (T, n) and ``W`` (n, K, d) per trial,
    the action sets shared."""
    return jax.vmap(program(act, update), in_axes=(0, None, 1, 0))


def _compile(fn, *args):
    """``(compiled jit of fn at args, seconds to trace and compile)``."""
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - t0


def _calls(call, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(call())
        out.append(time.perf_counter() - t0)
    return out


def _summary(times: list[float], scale: float) -> tuple[float, list[float]]:
    """``(median, [min, max])`` of ``times`` times ``scale``."""
    return scale * statistics.median(times), [scale * min(times), scale * max(times)]


def _timed(call, repeats: int) -> list[float]:
    """One warm-up call, then ``repeats`` timed calls (3 at most where a call takes over 1 s)."""
    warm = _calls(call, 1)[0]
    return _calls(call, repeats if warm < 1.0 else min(repeats, 3))


@contextlib.contextmanager
def busy_core():
    """A second process spinning on a core for the duration (started and stopped here)."""
    proc = subprocess.Popen([sys.executable, "-c", SPIN])
    try:
        time.sleep(0.3)  # running
        yield
    finally:
        proc.kill()
        proc.wait()


class Workers:
    """The processes of a run: numpy references (one BLAS thread) and the sharded trials (two
    host devices), each a spawned process kept for the run; a call past its timeout ends its
    process (a new one serves the next call)."""

    def __init__(self):
        self._pools: dict[str, Any] = {}

    def _pool(self, name: str):
        if name not in self._pools:
            ctx = multiprocessing.get_context("spawn")
            saved = os.environ.get("XLA_FLAGS")
            if name == "sharded":  # the child reads it when its backend starts
                flag = "--xla_force_host_platform_device_count=2"
                os.environ["XLA_FLAGS"] = f"{saved or ''} {flag}".strip()
            try:
                self._pools[name] = ctx.Pool(1)
            finally:
                if saved is None:
                    os.environ.pop("XLA_FLAGS", None)
                else:
                    os.environ["XLA_FLAGS"] = saved
        return self._pools[name]

    def call(self, name: str, fn, args: tuple, timeout: float):
        """``fn(*args)`` in the ``name`` process, or ``None`` past ``timeout`` seconds."""
        try:
            return self._pool(name).apply_async(fn, args).get(timeout)
        except multiprocessing.TimeoutError:
            self._pools.pop(name).terminate()
            return None

    def close(self):
        for pool in self._pools.values():
            pool.terminate()
        self._pools.clear()


# --- the table: each kind at each size -----------------------------------------------------------


def kind_sizes(kind: str, sizes) -> list[tuple[int, int]]:
    """The sizes ``kind`` runs at, by increasing ``K d`` (K = 1 only for the K = 1 kinds)."""
    out = [(d, K) for d, K in sizes if K == 1 or kind not in recipes.K1_ONLY]
    return sorted(out, key=lambda s: (s[0] * s[1], s[1]))


def _predict(measured: dict[tuple[int, int], float], d: int, K: int) -> float | None:
    """A round's seconds at ``(d, K)`` from the kind's ``measured`` smaller sizes, growing like
    (K d)^3 from K d = 100 on (below, a round's fixed costs dominate): from the largest ``d`` at
    the same ``K`` where there is one, else the most of those from every smaller size."""
    grow = lambda dk: (max(d * K, 100) / max(dk[0] * dk[1], 100)) ** 3  # noqa: E731
    same = [dk for dk in measured if dk[1] == K and dk[0] <= d]
    if same:
        dk = max(same)
        return measured[dk] * grow(dk)
    smaller = [measured[dk] * grow(dk) for dk in measured if dk[0] * dk[1] <= d * K]
    return max(smaller, default=None)


def _rounds(kind: str, D: int, predicted: float | None, plan: Plan) -> int:
    """A case's rounds: a call of about ``plan.call_s`` at the predicted round, and fewer as
    ``K d`` grows past 100 (a guard where the prediction is low); ``exact``'s fixed horizon."""
    if kind == "exact":
        return plan.exact_rounds
    T = plan.max_rounds * min(1.0, (100 / D) ** 1.5)
    if predicted is not None:
        T = min(T, plan.call_s / predicted)
    return int(np.clip(T, MIN_ROUNDS, plan.max_rounds))


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{1e3 * s:.3f}"


def table_case(kind, d, K, T, dtype, repeats, busy, workers, plan, numpy_measured):
    """One row of the table (the module docstring); ``numpy_measured``: the numpy reference's
    seconds a round at the kind's smaller sizes (this size's are added)."""
    tu = mlogb.tuned(kind, num_outcomes=K, dim=d, S=_plain.S, horizon=_plain.HORIZON,
                     dtype=dtype)  # fmt: skip
    learner, hp = tu.learner, tu.hparams
    X, U, W = (jnp.asarray(a, dtype) for a in _plain.stream(K, d, T, ACTIONS))
    s0 = learner.init(hp)
    run, compile_s = _compile(program(*library_parts(learner)), s0, X, U, W)
    times = _timed(lambda: run(s0, X, U, W), repeats)
    row: dict[str, Any] = {"learner": kind, "d": d, "K": K, "rounds": T, "repeats": len(times),
                           "compile_s": compile_s}  # fmt: skip
    row["jax_s"], row["jax_spread_s"] = _summary(times, 1.0 / T)
    if kind == "exact":
        row["note"] = f"O(t) a round: the mean over rounds 1..{T} (buffer of {_plain.HORIZON})"
    floors = {}
    p = _plain.plain(kind, K, d, hp)
    if p is not None:
        q0 = p.init()
        prun, _ = _compile(program(*plain_parts(p)), q0, X, U, W)
        ptimes = _timed(lambda: prun(q0, X, U, W), repeats)
        row["plain_s"], row["plain_spread_s"] = _summary(ptimes, 1.0 / T)
        floors["plain"] = row["plain_s"]
    if _plain.reference(kind, K, d, _plain.hparams_dict(hp)) is not None:
        pred = _predict(numpy_measured, d, K)  # exact (O(t)) plays the same rounds
        T_np = T if kind == "exact" or pred is None else int(
            np.clip(plan.numpy_s / pred, MIN_ROUNDS, T))  # fmt: skip
        if pred is not None and (pred > plan.numpy_cap_s or pred * T_np > plan.numpy_timeout_s / 2):
            row["numpy_skipped"] = f"predicted {pred:.2f} s a round, {T_np} rounds"
        else:
            args = (kind, K, d, _plain.hparams_dict(hp), T_np, ACTIONS, 0, repeats,
                    plan.numpy_s)  # fmt: skip
            got = workers.call("numpy", _plain.numpy_seconds, args, plan.numpy_timeout_s)
            if got is None:
                row["numpy_skipped"] = f"timed out after {plan.numpy_timeout_s:.0f} s"
            else:
                row["numpy_s"], row["numpy_spread_s"] = _summary(got, 1.0)
                row["numpy_rounds"] = T_np
                floors["numpy"] = numpy_measured[(d, K)] = row["numpy_s"]
    if floors:
        row["floor"] = min(floors, key=floors.get)
        row["floor_s"] = floors[row["floor"]]
        row["over_floor"] = row["jax_s"] / row["floor_s"]
    if busy:
        with busy_core():
            btimes = _calls(lambda: run(s0, X, U, W), len(times))
        row["busy_s"], row["busy_spread_s"] = _summary(btimes, 1.0 / T)
        row["busy_over_quiet"] = row["busy_s"] / row["jax_s"]
    return row


def table(kinds, sizes, dtype, repeats, busy, workers, plan, wide_only=True):
    """Every kind at every size (``wide_only``: (4096, 1) only for :data:`WIDE_KINDS`):
    ``(rows, skipped)``."""
    rows, skipped = [], []
    for kind in kinds:
        measured: dict[tuple[int, int], float] = {}
        numpy_measured: dict[tuple[int, int], float] = {}
        for d, K in kind_sizes(kind, sizes):
            if wide_only and (d, K) == WIDE and kind not in WIDE_KINDS:
                continue
            pred = _predict(measured, d, K)
            T = _rounds(kind, d * K, pred, plan)
            if pred is not None and pred * T > plan.call_cap_s:
                reason = (
                    f"predicted {pred:.2f} s a round, {T} rounds a call (cap {plan.call_cap_s} s)"
                )
                skipped.append({"learner": kind, "d": d, "K": K, "reason": reason})
                print(f"{kind:>14} {d:>5} {K:>2}  skipped: {reason}", flush=True)
                continue
            row = table_case(kind, d, K, T, dtype, repeats, busy, workers, plan, numpy_measured)
            rows.append(row)
            print_row(row)
            measured[(d, K)] = row["jax_s"]
    return rows, skipped


_HEADER = []


def print_row(r: dict) -> None:
    if not _HEADER:
        print(f"{'kind':>14} {'d':>5} {'K':>2} {'T':>4} | {'ms a round [min, max]':>28} | "
              f"{'floor ms':>9} {'which':>5} {'/floor':>7} | {'busy ms':>9} {'busy/q':>6} | "
              f"{'plain ms':>9} {'numpy ms':>9} | compile s")  # fmt: skip
        _HEADER.append(True)
    lo, hi = r["jax_spread_s"]
    spread = f"{_ms(r['jax_s'])} [{_ms(lo)}, {_ms(hi)}]"
    ratio = functools.partial(_ratio, r)
    print(f"{r['learner']:>14} {r['d']:>5} {r['K']:>2} {r['rounds']:>4} | {spread:>28} | "
          f"{_ms(r.get('floor_s')):>9} {r.get('floor', '-'):>5} {ratio('over_floor'):>7} | "
          f"{_ms(r.get('busy_s')):>9} {ratio('busy_over_quiet'):>6} | "
          f"{_ms(r.get('plain_s')):>9} {_ms(r.get('numpy_s')):>9} | {r['compile_s']:.1f}"
          + "".join(f"  ({r[k]})" for k in ("note", "numpy_skipped") if k in r),
          flush=True)  # fmt: skip


# --- batching: 64 vmapped trials, and sharded over 2 host devices --------------------------------


def trials_stream(K, d, T, n, dtype, seed=0):
    """``n`` trials on one recorded stream of action sets: ``(X (T, N, d), U (T, n), W (n, K,
    d))``, trial 0's ``W*`` and uniforms those of :func:`_plain.stream`."""
    X, U0, W0 = _plain.stream(K, d, T, ACTIONS, seed)
    rng = np.random.default_rng(seed + 1)
    W = rng.normal(size=(n, K, d))
    W *= _plain.S / np.linalg.norm(W, axis=(1, 2), keepdims=True)
    W[0] = W0
    U = rng.uniform(size=(T, n))
    U[:, 0] = U0
    return tuple(jnp.asarray(a, dtype) for a in (X, U, W))


def _trial_states(learner, hp, n):
    return jax.vmap(lambda _: learner.init(hp))(jnp.arange(n))


def sharded_seconds(kind, d, K, T, n, repeats, dtype_name):
    """In a process with 2 host devices: ``(compile seconds, call seconds)`` of ``n`` trials of
    ``kind`` sharded over the devices (``jax.shard_map`` of the vmapped scan, no communication),
    or ``None`` without 2 devices."""
    if jax.device_count() != 2:
        return None
    dtype = jnp.dtype(dtype_name)
    tu = mlogb.tuned(kind, num_outcomes=K, dim=d, S=_plain.S, horizon=_plain.HORIZON,
                     dtype=dtype)  # fmt: skip
    mesh = sh.run_mesh()
    runs, shared = PartitionSpec(sh.AXIS), PartitionSpec()
    fn = jax.shard_map(batched(*library_parts(tu.learner)), mesh=mesh,
                       in_specs=(runs, shared, PartitionSpec(None, sh.AXIS), runs),
                       out_specs=runs, check_vma=False)  # fmt: skip
    X, U, W = trials_stream(K, d, T, n, dtype)
    states, W = sh.shard_runs((_trial_states(tu.learner, tu.hparams, n), W), mesh)
    X = jax.device_put(X, NamedSharding(mesh, shared))
    U = jax.device_put(U, NamedSharding(mesh, PartitionSpec(None, sh.AXIS)))
    run, compile_s = _compile(fn, states, X, U, W)
    return compile_s, _timed(lambda: run(states, X, U, W), repeats)


def batch_case(kind, d, K, known, n, dtype, repeats, workers, plan) -> dict:
    """Item 4 of issue 55 for one kind and size (``known``: its table row, if any): one trial,
    ``n`` vmapped trials and ``n`` sharded over 2 host devices, per trial-round."""
    tu = mlogb.tuned(kind, num_outcomes=K, dim=d, S=_plain.S, horizon=_plain.HORIZON,
                     dtype=dtype)  # fmt: skip
    learner, hp = tu.learner, tu.hparams
    row: dict[str, Any] = {"learner": kind, "d": d, "K": K, "trials": n}
    if known is not None:
        row["one_trial_s"], row["one_trial_spread_s"] = known["jax_s"], known["jax_spread_s"]
    else:
        T = _rounds(kind, K * d, None, plan)
        X, U, W = (jnp.asarray(a, dtype) for a in _plain.stream(K, d, T, ACTIONS))
        s0 = learner.init(hp)
        run, _ = _compile(program(*library_parts(learner)), s0, X, U, W)
        times = _timed(lambda: run(s0, X, U, W), repeats)
        row["one_trial_s"], row["one_trial_spread_s"] = _summary(times, 1.0 / T)
    per_call = n * row["one_trial_s"]
    if kind == "exact":
        T = plan.exact_rounds
    else:
        T = int(np.clip(plan.batch_call_s / per_call, MIN_ROUNDS, plan.max_rounds))
    if per_call * T > plan.batch_cap_s:
        row["skipped"] = f"{n} trials: predicted {per_call * T:.1f} s a call"
        return row
    row["rounds"] = T
    X, U, W = trials_stream(K, d, T, n, dtype)
    states = _trial_states(learner, hp, n)
    vrun, row["vmapped_compile_s"] = _compile(batched(*library_parts(learner)), states, X, U, W)
    times = _timed(lambda: vrun(states, X, U, W), repeats)
    row["vmapped_s"], row["vmapped_spread_s"] = _summary(times, 1.0 / (n * T))
    row["vmapped_over_one"] = row["vmapped_s"] / row["one_trial_s"]
    if n % 2:
        row["sharded_skipped"] = f"{n} trials do not split over 2 devices"
        return row
    args = (kind, d, K, T, n, repeats, jnp.dtype(dtype).name)
    got = workers.call("sharded", sharded_seconds, args, plan.sharded_timeout_s)
    if got is None:
        row["sharded_skipped"] = "no 2 host devices, or timed out"
    else:
        row["sharded_compile_s"] = got[0]
        row["sharded_s"], row["sharded_spread_s"] = _summary(got[1], 1.0 / (n * T))
        row["sharded_speedup"] = row["vmapped_s"] / row["sharded_s"]
    return row


def batching(kinds, sizes, table_rows, n, dtype, repeats, workers, plan) -> list[dict]:
    """:func:`batch_case` for every kind at each of ``sizes``."""
    known = {(r["learner"], r["d"], r["K"]): r for r in table_rows}
    rows = []
    for kind in kinds:
        for d, K in kind_sizes(kind, sizes):
            row = batch_case(kind, d, K, known.get((kind, d, K)), n, dtype, repeats, workers,
                             plan)  # fmt: skip
            rows.append(row)
            print_batch_row(row)
    return rows


def _ratio(r: dict, key: str, width: int = 0, digits: int = 2) -> str:
    return f"{r[key]:{width}.{digits}f}" if key in r else f"{'-':>{width}}"


def print_batch_row(r: dict) -> None:
    if "skipped" in r:
        print(f"{r['learner']:>14} {r['d']:>5} {r['K']:>2}  batching skipped: {r['skipped']}")
        return
    ratio = functools.partial(_ratio, r)
    print(f"{r['learner']:>14} {r['d']:>5} {r['K']:>2}  one trial {_ms(r['one_trial_s'])} ms, "
          f"x{r['trials']} vmapped {_ms(r.get('vmapped_s'))} ms a trial-round "
          f"({ratio('vmapped_over_one')} of one), sharded over 2: {_ms(r.get('sharded_s'))} ms "
          f"(speed-up {ratio('sharded_speedup')})", flush=True)  # fmt: skip


# --- EOFD against its numpy reference at the paper's sizes ---------------------------------------


def replay_round(learner, hp, stream, dtype):
    """The jitted run of ``learner`` over the recorded ``stream`` (select, then update, each
    round) through the library's runner and its start state: ``(run, s0)``."""
    X, mask, U, W = stream
    T, N, d = X.shape
    env = replay_mlogb(num_outcomes=W.shape[0], dim=d, max_actions=N)
    es = replay_state(jnp.asarray(X, dtype), mask, jnp.asarray(U, dtype), jnp.asarray(W, dtype),
                      np.asarray(hp.rewards))  # fmt: skip
    s0 = init_run(learner.init(hp), es, jax.random.PRNGKey(0))
    return jax.jit(lambda s: play(mlogb.interact(learner, env), s, T)), s0


def _replay_per_round(learner, hp, stream, dtype, repeats):
    T = stream[0].shape[0]
    run, s0 = replay_round(learner, hp, stream, dtype)
    t0 = time.perf_counter()
    jax.block_until_ready(run(s0))
    compile_s = time.perf_counter() - t0
    return (*_summary(_calls(lambda: run(s0), repeats), 1.0 / T), compile_s)


def eofd_numpy(cases, dtype, rounds, repeats, spare_columns, workers, plan):
    """JAX EOFD-MLogB against ``mlogb_numpy.NumpyEOFD`` and JAX OFUL-MLogB (Section 4's
    hyperparameters, ``S = 1``, the theory radius) at ``cases`` ``(d, K, m)``."""
    rows = []
    for d, K, m in cases:
        stream = _plain.paper_stream(K, d, rounds)
        hp = mlogb.section4(num_outcomes=K, dim=d, S=1.0, horizon=10_000, dtype=dtype).hparams
        row: dict[str, Any] = {"d": d, "K": K, "m": m}
        eofd = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m, spare_columns=spare_columns)
        row["jax_eofd_s"], row["jax_eofd_spread_s"], row["jax_eofd_compile_s"] = (
            _replay_per_round(eofd, hp, stream, dtype, repeats))  # fmt: skip
        kw = dict(lam=float(hp.lam), eta=float(hp.eta), S=1.0, rewards=np.asarray(hp.rewards),
                  beta="theory", delta=float(hp.delta))  # fmt: skip
        args = (K, d, m, kw, 6 if rounds < 40 else 20)
        got = workers.call("numpy", _plain.numpy_eofd_seconds, args, plan.numpy_timeout_s)
        if got is not None:
            row["numpy_eofd_s"] = got
            row["numpy_over_jax"] = got / row["jax_eofd_s"]
        if K * d <= OFUL_MAX_D:
            oful = mlogb.oful(num_outcomes=K, dim=d)
            short = tuple(a[: max(4, rounds // 4)] for a in stream[:3]) + (stream[3],)
            row["jax_oful_s"], row["jax_oful_spread_s"], _ = _replay_per_round(
                oful, hp, short, dtype, repeats)  # fmt: skip
            row["eofd_over_oful"] = row["jax_eofd_s"] / row["jax_oful_s"]
        rows.append(row)
        ratio = functools.partial(_ratio, row)
        print(f"EOFD ({d}, {K}, {m}): JAX {_ms(row['jax_eofd_s'])} ms, numpy "
              f"{_ms(row.get('numpy_eofd_s'))} ms, numpy/JAX {ratio('numpy_over_jax')}; "
              f"JAX OFUL {_ms(row.get('jax_oful_s'))} ms, "
              f"EOFD/OFUL {ratio('eofd_over_oful', digits=3)}", flush=True)  # fmt: skip
    return rows


# --- the targets ---------------------------------------------------------------------------------


def goals(table_rows, batch_rows, eofd_rows) -> list[dict]:
    """Issue 55's targets per kind and size (met or MISSED), and the EOFD-against-numpy ones."""
    out = []
    for name, (what, key, op, bound) in TARGETS.items():
        rows = batch_rows if name in ("vmapped", "sharded") else table_rows
        for r in rows:
            if key in r:
                value = r[key]
                met = value <= bound if op == "<=" else value >= bound
                out.append(
                    {
                        "goal": what,
                        "target": f"{op} {bound}",
                        "value": value,
                        "met": bool(met),
                        **{k: r[k] for k in ("learner", "d", "K")},
                    }
                )
    for r in eofd_rows:
        case = f"({r['d']}, {r['K']}, {r['m']})"
        checks = [("numpy/jax EOFD " + case, "numpy_over_jax", ">=", 10.0)]
        if (r["d"], r["K"], r["m"]) == (785, 1, 78):
            checks.append(("EOFD/OFUL per round " + case, "eofd_over_oful", "<=", 0.05))
        for goal, key, op, bound in checks:
            if key in r:
                met = r[key] >= bound if op == ">=" else r[key] <= bound
                out.append({"goal": goal, "target": f"{op} {bound}", "value": r[key],
                            "met": bool(met)})  # fmt: skip
    return out


def print_goals(out: list[dict]) -> None:
    """One line per target and kind: each size's value, met or MISSED."""
    print("\nIssue 55's targets (per kind and size, d x K):")
    for what, _, op, bound in TARGETS.values():
        got = [g for g in out if g["goal"] == what]
        if not got:
            continue
        met = sum(g["met"] for g in got)
        print(f"{what}, target {op} {bound}: met at {met} of {len(got)}")
        for kind in dict.fromkeys(g["learner"] for g in got):
            cells = [f"{g['d']}x{g['K']} {g['value']:.2f} {'met' if g['met'] else 'MISSED'}"
                     for g in got if g["learner"] == kind]  # fmt: skip
            print(f"  {kind:>14}: " + ", ".join(cells))
    for g in out:
        if "learner" not in g:
            print(
                f"goal {g['goal']}: {g['value']:.3f} (target {g['target']}) "
                f"{'met' if g['met'] else 'MISSED'}"
            )


# --- options -------------------------------------------------------------------------------------


def _ints(text: str, parts: int, what: str) -> list[tuple[int, ...]]:
    if text.strip().lower() == "none":
        return []
    out = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        try:
            values = tuple(int(v) for v in item.lower().split("x"))
        except ValueError:
            values = ()
        if len(values) != parts or min(values) < 1:
            raise argparse.ArgumentTypeError(f"expected {what}, got {item!r}")
        out.append(values)
    if not out:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return out


def sizes_type(text: str) -> list[tuple[int, int]]:
    """``DxK,...`` (``none``: no size)."""
    return _ints(text, 2, "a comma list of DxK (e.g. 20x1,400x4) or none")


def eofd_cases_type(text: str) -> list[tuple[int, int, int]]:
    """``DxKxM,...`` (``none``: no case)."""
    return _ints(text, 3, "a comma list of DxKxM (e.g. 100x4x40) or none")


def main(argv=None) -> dict:
    quick = "a reduced run (under 2 minutes): 4 kinds at 20x1 and 20x4, fewer rounds"
    p = parser(__file__, __doc__, quick=quick, repeats="5, 3 with --quick")
    p.add_argument("--kinds", type=names(recipes.KINDS), default=None, metavar="LIST",
                   help="comma list of registry kinds (default: all)")  # fmt: skip
    p.add_argument("--sizes", type=sizes_type, default=None, metavar="DxK,...",
                   help="the table's sizes (default: d 20, 65, 400, 1600 x K 1, 4, and 4096x1 "
                        "for the kinds linear or quadratic in d)")  # fmt: skip
    p.add_argument("--no-busy", action="store_true", help="no busy-core figures")
    p.add_argument("--trials", type=positive_int, default=64, help="vmapped trials")
    p.add_argument(
        "--batch-sizes",
        type=sizes_type,
        default=None,
        metavar="DxK,...",
        help="sizes of the batching figures (default 100x4,400x1; none: skip)",
    )
    p.add_argument("--eofd-cases", type=eofd_cases_type, default=None, metavar="DxKxM,...",
                   help="EOFD against numpy at (d, K, m) (default 100x4x40,400x1x40,785x1x78,"
                        "10000x1x100; 100x4x40 with --quick; none: skip)")  # fmt: skip
    p.add_argument(
        "--spare-columns",
        type=int,
        default=None,
        help="EOFD's spare_columns in --eofd-cases (default: the library's)",
    )
    p.add_argument("--float32", action="store_true", help="the JAX sides in float32")
    args = p.parse_args(argv)
    load_before = os.getloadavg()[0]
    environment = {
        k: os.environ.get(k)
        for k in ("XLA_FLAGS", "PJRT_NPROC", "NPROC", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")
    }
    environment["affinity"] = sorted(os.sched_getaffinity(0))
    plan = QUICK if args.quick else FULL
    dtype = jnp.float32 if args.float32 else jnp.float64
    repeats = args.repeats or (3 if args.quick else 5)
    quick_kinds = ["linucb", "lin-ts", "eofd-robust", "uniform"]
    kinds = args.kinds or (quick_kinds if args.quick else list(recipes.KINDS))
    sizes = args.sizes if args.sizes is not None else (
        [(20, 1), (20, 4)] if args.quick else [*SIZES, WIDE])  # fmt: skip
    batch_sizes = args.batch_sizes if args.batch_sizes is not None else (
        [(20, 4)] if args.quick else list(BATCH_SIZES))  # fmt: skip
    eofd_cases = args.eofd_cases if args.eofd_cases is not None else (
        [EOFD_CASES[0]] if args.quick else list(EOFD_CASES))  # fmt: skip
    t_start = time.perf_counter()
    workers = Workers()
    try:
        rows, skipped = table(kinds, sizes, dtype, repeats, not args.no_busy, workers, plan,
                              wide_only=args.sizes is None)  # fmt: skip
        batch = batching(kinds, batch_sizes, rows, args.trials, dtype, repeats, workers, plan)
        eofd = eofd_numpy(eofd_cases, dtype, 10 if args.quick else 40, repeats,
                          args.spare_columns, workers, plan)  # fmt: skip
    finally:
        workers.close()
    out = goals(rows, batch, eofd)
    print_goals(out)
    wall = time.perf_counter() - t_start
    load = [load_before, os.getloadavg()[0]]
    print(f"\n{wall:.0f} s; 1-minute load average {load[0]:.2f} before, {load[1]:.2f} after")
    return finish(
        {
            "dtype": jnp.dtype(dtype).name,
            "actions": ACTIONS,
            "S": _plain.S,
            "horizon": _plain.HORIZON,
            "repeats": repeats,
            "trials": args.trials,
            "plan": plan._asdict(),
            "environment": environment,
            "spare_columns": args.spare_columns,
            "wall_s": wall,
            "loadavg_1min": load,
            "cases": rows,
            "skipped": skipped,
            "batching": batch,
            "eofd_numpy": eofd,
            "goals": out,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
