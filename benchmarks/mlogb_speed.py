"""Per-round wall time of EOFD-MLogB (JAX) vs its numpy reference and vs OFUL-MLogB (JAX).

Run as ``python -m benchmarks.mlogb_speed`` (``--quick`` for a run of under a minute,
``--json PATH`` to write the figures). float64 by default (``--float32`` for the JAX side).
``--spare-columns N`` sets EOFD's deferred basis rotation at every size (``0``: V formed every
round; the default is the library's, which defers from K d = 1000 on).

Method: each case replays one recorded stream (action sets of 10-30 unit vectors padded to 30,
outcome uniforms, ``W*`` with ``||W*||_F = S``) so that JAX and numpy do the same work: select by
the optimistic rule, then update. JAX times exclude compilation (one warm-up call) and are the
median over repeats of a whole ``lax.scan`` divided by the number of rounds; numpy times are the
median per-round time of a Python loop over rounds (``references.mlogb_numpy``, which
follows the paper: a full SVD per sketch update), measured in a separate process so that XLA's
spinning worker threads do not slow numpy's BLAS. Vmapped throughput compares 64 trials in one
call with one trial, in learner-rounds per second, twice: through the library's runner on the
synthetic environment (whose per-trial Gaussian action draws, 30 x d normals a round, are part of
the cost), and for the learner alone (select and update on one recorded stream of action sets
shared by the trials, each trial with its own ``W*`` and outcomes). With ``--host-devices N`` the
64 trials are sharded over N host devices (one thread each; the one-trial figure stays on one).
The same for OFUL through the runner (``--oful-trials``, few rounds: its dense Kd x Kd
eigendecomposition per update is the paper's baseline). Every time is the median over repeats
with its ``[min, max]`` spread in the JSON; the run ends by printing each target of the speed
issue as met or MISSED, and the 1-minute load average before and after (the machine may be
shared).
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bandits_jax import envs, mlogb  # noqa: E402
from bandits_jax.envs.replay import replay_mlogb, replay_state  # noqa: E402
from bandits_jax.mlogb import model  # noqa: E402
from bandits_jax.sim import make_rollout  # noqa: E402
from bandits_jax.sim import sharding as sh  # noqa: E402
from bandits_jax.sim.runner import init_run, play  # noqa: E402
from benchmarks._device import select_device  # noqa: E402
from benchmarks._options import parser, positive_int  # noqa: E402
from benchmarks._report import finish  # noqa: E402
from references import mlogb_numpy as ref  # noqa: E402

FULL_CASES = [(100, 4, 40), (400, 1, 40), (785, 1, 78), (10000, 1, 100)]
OFUL_MAX_D = 1600  # K d beyond which the dense Kd x Kd baseline is not run


def _stream(K, d, T, seed=0, S=1.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(T, 30, d))
    X /= np.linalg.norm(X, axis=2, keepdims=True)
    mask = np.arange(30)[None, :] < rng.integers(10, 31, size=(T, 1))
    W = rng.normal(size=(K, d))
    return X, mask, rng.uniform(size=T), W * (S / np.linalg.norm(W))


def _time(fn, repeats):
    """Median wall time of ``fn()`` over ``repeats`` calls; all times are kept in ``_SPREAD``."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    _SPREAD.append(times)
    return statistics.median(times)


_SPREAD: list[list[float]] = []  # the repeats of the last _time calls (spread in the JSON)


def _spread(scale=1.0):
    """``[min, max]`` of the last timed repeats, times ``scale``."""
    times = _SPREAD[-1]
    return [scale * min(times), scale * max(times)]


def replay_round(learner, hp, stream, dtype):
    """The jitted run of ``learner`` over the recorded ``stream`` (select, then update, each
    round) and its start state: ``(run, s0)``."""
    X, mask, U, W = stream
    T, N, d = X.shape
    K = W.shape[0]
    rewards = np.asarray(hp.rewards)
    env = replay_mlogb(num_outcomes=K, dim=d, max_actions=N)
    es = replay_state(
        jnp.asarray(X, dtype), mask, jnp.asarray(U, dtype), jnp.asarray(W, dtype), rewards
    )
    s0 = init_run(learner.init(hp), es, jax.random.PRNGKey(0))
    return jax.jit(lambda s: play(mlogb.interact(learner, env), s, T)), s0


def _jax_per_round(learner, hp, stream, dtype, repeats):
    T = stream[0].shape[0]
    run, s0 = replay_round(learner, hp, stream, dtype)
    t0 = time.perf_counter()
    jax.block_until_ready(run(s0))
    compile_s = time.perf_counter() - t0
    return _time(lambda: run(s0), repeats) / T, compile_s, _spread(1.0 / T)


def _numpy_worker(K, d, m, kw, rounds, seed):
    """numpy EOFD per-round time on the same stream, in a fresh process (see _numpy_per_round)."""
    X, mask, U, W = _stream(K, d, rounds, seed=seed)
    learner = ref.NumpyEOFD(K, d, m, **kw)
    times = []
    for t in range(rounds):
        t0 = time.perf_counter()
        i = learner.select(X[t], mask[t])
        x = X[t, i]
        s, s0 = ref.sigma(W @ x)
        learner.update(x, ref.sample_outcome(s, s0, U[t]))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _numpy_per_round(K, d, m, kw, rounds, seed=0):
    """Runs :func:`_numpy_worker` in a spawned process: XLA's CPU worker threads, once started
    in this process, keep spinning and slow OpenBLAS calls made here by large, noisy factors."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(_numpy_worker, (K, d, m, kw, rounds, seed))


def _shard(tree, n):
    """Trials sharded over the host devices (``--host-devices``) when they divide evenly: jit
    then splits the vmapped scan, one slice per device."""
    if n > 1 and jax.device_count() > 1 and n % jax.device_count() == 0:
        return sh.shard_runs(tree, sh.run_mesh())
    return tree


def _rates(call, n, rounds, repeats):
    """Learner-rounds per second of ``call()`` (``n`` trials of ``rounds``), and its spread."""
    rate = n * rounds / _time(call, repeats)
    rates = [n * rounds / t for t in _SPREAD[-1]]
    return rate, [min(rates), max(rates)]


def _vmapped(learner, hp, K, d, rounds, trials, repeats):
    """Learner-rounds per second of one trial and of ``trials`` vmapped trials through the
    library's runner on the synthetic environment (whose Gaussian actions, 30 x d normals a
    round, are drawn per trial), with the spread of each over the repeats."""
    env = envs.synthetic_mlogb(num_outcomes=K, dim=d, S=1.0, dtype=hp.lam.dtype)
    step = mlogb.interact(learner, env)
    out = {}
    for n in (1, trials):
        keys = jax.random.split(jax.random.PRNGKey(1), n)
        es, keys = _shard((jax.vmap(env.init)(keys), keys), n)
        run = make_rollout(step, rounds, trials=True)
        s = learner.init(hp)
        jax.block_until_ready(run(s, es, keys))
        call = lambda s=s, es=es, keys=keys, run=run: run(s, es, keys)  # noqa: E731
        out[n], out[f"spread_{n}"] = _rates(call, n, rounds, repeats)
    return out


def _learner_only(learner, hp, K, d, rounds, trials, repeats):
    """Like :func:`_vmapped` for the learner alone: every trial selects (``learner.select``) and
    updates on one recorded stream of action sets shared by the trials (no environment draws),
    each with its own ``W*`` and outcome uniforms, so the trials' paths differ."""
    X, mask, _, _ = _stream(K, d, rounds, seed=2)
    X = jnp.asarray(X, hp.lam.dtype)
    mask = jnp.asarray(mask)
    out = {}
    for n in (1, trials):
        rng = np.random.default_rng(3)
        W = rng.normal(size=(n, K, d))
        W = jnp.asarray(W / np.linalg.norm(W, axis=(1, 2), keepdims=True), hp.lam.dtype)
        U = jnp.asarray(rng.uniform(size=(rounds, n)), hp.lam.dtype)
        states = jax.vmap(lambda _: learner.init(hp))(jnp.arange(n))
        states, W = _shard((states, W), n)

        def one(s, W_star, Xt, mt, u):
            x = Xt[learner.select(s, Xt, mt)]
            return learner.update(s, x, model.sample_outcome(W_star @ x, u))

        def body(states, xs, W=W):
            Xt, mt, u = xs
            return jax.vmap(one, in_axes=(0, 0, None, None, 0))(states, W, Xt, mt, u), None

        run = jax.jit(lambda s, body=body, U=U: jax.lax.scan(body, s, (X, mask, U))[0])
        jax.block_until_ready(run(states))
        call = lambda run=run, states=states: run(states)  # noqa: E731
        out[n], out[f"spread_{n}"] = _rates(call, n, rounds, repeats)
    return out


def main(argv=None) -> dict:
    p = parser(__file__, __doc__, quick="reduced run (< 1 minute)",
               repeats="5, 3 with --quick", device=True)  # fmt: skip
    p.add_argument("--float32", action="store_true", help="JAX side in float32")
    p.add_argument("--rounds", type=positive_int, default=None, help="rounds per timed scan")
    p.add_argument("--trials", type=positive_int, default=64, help="vmapped trials")
    p.add_argument(
        "--oful-trials",
        type=positive_int,
        default=8,
        help="vmapped OFUL trials (dense Kd x Kd eigh each)",
    )
    p.add_argument(
        "--spare-columns",
        type=int,
        default=None,
        help="EOFD's spare_columns at every size (default: the library's, 0 below K d = 1000; "
        "0 forms V every round)",
    )
    args = p.parse_args(argv)
    select_device(args)
    load_before = os.getloadavg()[0]

    dtype = jnp.float32 if args.float32 else jnp.float64
    rounds = args.rounds or (10 if args.quick else 40)
    repeats = args.repeats or (3 if args.quick else 5)
    np_rounds = 6 if args.quick else 20
    vmap_cases = {(100, 4, 40)} if args.quick else {(100, 4, 40), (400, 1, 40), (785, 1, 78)}
    oful_vmap_cases = {(100, 4, 40)} if args.quick else {(100, 4, 40), (400, 1, 40)}
    rows = []
    for d, K, m in FULL_CASES:
        stream = _stream(K, d, rounds)
        rec = mlogb.section4(num_outcomes=K, dim=d, S=1.0, horizon=10_000, dtype=dtype)
        hp = rec.hparams
        row = {"d": d, "K": K, "m": m}
        eofd = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m, spare_columns=args.spare_columns)
        row["jax_eofd_s"], row["jax_eofd_compile_s"], row["jax_eofd_spread_s"] = _jax_per_round(
            eofd, hp, stream, dtype, repeats
        )
        kw = dict(
            lam=float(hp.lam),
            eta=float(hp.eta),
            S=1.0,
            rewards=np.asarray(hp.rewards),
            beta="theory",
            delta=float(hp.delta),
        )
        row["numpy_eofd_s"] = _numpy_per_round(K, d, m, kw, np_rounds)
        if K * d <= OFUL_MAX_D:
            oful = mlogb.oful(num_outcomes=K, dim=d)
            oful_stream = tuple(a[: max(4, rounds // 4)] for a in stream[:3]) + (stream[3],)
            row["jax_oful_s"], _, row["jax_oful_spread_s"] = _jax_per_round(
                oful, hp, oful_stream, dtype, repeats
            )
        if (d, K, m) in vmap_cases:
            n = args.trials
            for prefix, fn in (("", _vmapped), ("learner_", _learner_only)):
                v = fn(eofd, hp, K, d, rounds, n, repeats)
                row[f"{prefix}rounds_per_s_1"], row[f"{prefix}rounds_per_s_{n}"] = v[1], v[n]
                row[f"{prefix}rounds_per_s_1_spread"] = v["spread_1"]
                row[f"{prefix}rounds_per_s_{n}_spread"] = v[f"spread_{n}"]
        if (d, K, m) in oful_vmap_cases and K * d <= OFUL_MAX_D:
            n = args.oful_trials
            v = _vmapped(oful, hp, K, d, max(2, rounds // 8), n, repeats)
            row["oful_rounds_per_s_1"], row[f"oful_rounds_per_s_{n}"] = v[1], v[n]
        rows.append(row)
        _print_row(row, args.trials)

    goals = _goals(rows, args.trials)
    return finish(
        {
            "dtype": "float32" if args.float32 else "float64",
            "rounds": rounds,
            "repeats": repeats,
            "trials": args.trials,
            "spare_columns": args.spare_columns,
            "oful_trials": args.oful_trials,
            "loadavg_1min": [load_before, os.getloadavg()[0]],
            "cases": rows,
            "goals": goals,
        },
        args.json,
    )


def _goals(rows, trials):
    """Prints and returns the issue's targets with the measured ratios (from this run)."""
    goals = []
    for r in rows:
        case = f"({r['d']}, {r['K']}, {r['m']})"
        goals.append(("numpy/jax EOFD " + case, r["numpy_eofd_s"] / r["jax_eofd_s"], ">=", 10.0))
        if f"rounds_per_s_{trials}" in r:
            gain = r[f"rounds_per_s_{trials}"] / r["rounds_per_s_1"]
            goals.append(
                (f"EOFD vmap x{trials} gain (runner, synthetic env) " + case, gain, ">=", 4.0)
            )
            gain = r[f"learner_rounds_per_s_{trials}"] / r["learner_rounds_per_s_1"]
            goals.append((f"EOFD vmap x{trials} gain (learner only) " + case, gain, ">=", 4.0))
        if (r["d"], r["K"], r["m"]) == (785, 1, 78) and "jax_oful_s" in r:
            goals.append(
                ("EOFD/OFUL per round " + case, r["jax_eofd_s"] / r["jax_oful_s"], "<=", 0.05)
            )
    out = []
    for name, val, op, target in goals:
        ok = val >= target if op == ">=" else val <= target
        print(f"goal {name}: {val:.3f} (target {op} {target}) {'met' if ok else 'MISSED'}")
        out.append({"goal": name, "value": val, "target": f"{op} {target}", "met": bool(ok)})
    for r in rows:
        keys = [k for k in r if k.startswith("oful_rounds_per_s_") and k != "oful_rounds_per_s_1"]
        for k in keys:
            n = k.rsplit("_", 1)[1]
            gain = r[k] / r["oful_rounds_per_s_1"]
            print(f"OFUL vmap x{n} gain ({r['d']}, {r['K']}): {gain:.2f}")
            out.append({"goal": f"OFUL vmap x{n} gain ({r['d']}, {r['K']})", "value": gain})
    return out


_HEADER_DONE = []


def _print_row(row, trials):
    if not _HEADER_DONE:
        print(
            f"{'d':>6} {'K':>2} {'m':>4} | {'jax eofd':>10} {'np eofd':>10} {'np/jax':>7} | "
            f"{'jax oful':>10} {'eofd/oful':>9} | {'vmap x' + str(trials) + ' gain':>12} "
            f"{'learner only':>12}"
        )
        _HEADER_DONE.append(True)
    ms = lambda s: f"{1e3 * s:8.3f}ms"  # noqa: E731
    oful = row.get("jax_oful_s")
    vm = row.get(f"rounds_per_s_{trials}")
    lo = row.get(f"learner_rounds_per_s_{trials}")
    print(
        f"{row['d']:>6} {row['K']:>2} {row['m']:>4} | {ms(row['jax_eofd_s'])} "
        f"{ms(row['numpy_eofd_s'])} {row['numpy_eofd_s'] / row['jax_eofd_s']:7.1f} | "
        f"{ms(oful) if oful else '       n/a'} "
        f"{format(row['jax_eofd_s'] / oful, '9.3f') if oful else '-':>9} | "
        f"{format(vm / row['rounds_per_s_1'], '12.2f') if vm else '-':>12} "
        f"{format(lo / row['learner_rounds_per_s_1'], '12.2f') if lo else '-':>12}",
        flush=True,
    )


if __name__ == "__main__":
    main()
