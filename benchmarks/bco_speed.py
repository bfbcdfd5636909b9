"""Learner-rounds per second of Algorithm 1, Algorithm 4 and the universal ensemble (Algorithm 6):
JAX (one trial, and 256 vmapped trials) vs the per-round numpy references.

Run as ``python -m benchmarks.bco_speed`` (``--quick``: under a minute; ``--json PATH``), float64.

Method. Every case plays a closed-form loss sequence evaluated the same way on both sides, so the
figures measure the learners, not an environment: a drifting quadratic
``f_t(x) = 1/2 ||x - c_t||^2`` with ``c_t = 2 u cos(omega t) + 2 v sin(omega t)`` on the unit ball
(Algorithm 1, universal ensemble), and linear losses ``<l_t, x>`` with
``l_t = u cos(omega t) + v sin(omega t)`` on ``[-1, 1]^d`` (Algorithm 4). JAX rounds run inside
``bandits_jax.sim.runner.make_rollout`` (``lax.scan``; trials by ``vmap``); compile time is
excluded (a warm-up call, reported separately) and the time is the median over repeats of a whole
call. numpy times are one per-round Python loop (``references.bco_numpy.algorithm1``,
``references.bco_box_numpy.BoxFTRLNumpy``), best of the repeats (none for the ensemble).

Throughput line (issue 10's target: Algorithm 1 at d = 10 with vmapped trials >= 10^7
learner-rounds/s on the 2-core CPU): the same quadratic game at ``d = 10`` for batches of
``THROUGHPUT_BATCHES`` trials, float32 and float64, reporting learner-rounds/s per batch and the
best. When the target is missed it prints what sets the ceiling: the wall time of one round of the
whole batch (flat per learner-round once the batch is large: the work, not dispatch, dominates),
the bytes of carry per learner, the kernels (fusions and other ops) in the compiled round, the
learner-round cost in units of one streamed float64 element of a plain ``x * a + b`` pass over
memory (the machine's memory-bound floor, measured in the same run), and the cost of the random
draws alone (the runner's key split and the coordinate draw, threefry in ``lax.scan``). With
``--host-devices N`` the CPU is split into N host devices, one thread each, and the trials are
sharded over them (``bandits_jax.sim.sharding``; jit splits the vmapped scan).

Settings: Algorithm 1 with the ``"variance"`` schedule ``R / sqrt(d^2 + Vbar)``; Algorithm 4 with
``eta = 0.01 / d``; the universal ensemble with ``preset="practical"`` and horizon ``10^4``
(``N = 15 + 2`` base learners), fixed-point hints.
"""

from __future__ import annotations

import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bandits_jax.bco import domains as dom  # noqa: E402
from bandits_jax.bco import ensembles as ens  # noqa: E402
from bandits_jax.bco import one_point as op  # noqa: E402
from bandits_jax.bco import two_point as tp  # noqa: E402
from bandits_jax.sim import sharding as sh  # noqa: E402
from bandits_jax.sim.runner import make_rollout  # noqa: E402
from benchmarks._device import select_device  # noqa: E402
from benchmarks._options import parser, positive_int  # noqa: E402
from benchmarks._report import finish  # noqa: E402
from references import bco_numpy  # noqa: E402
from references.bco_box_numpy import BoxFTRLNumpy  # noqa: E402

DIMS = (10, 100, 1000)
TRIALS = 256
OMEGA = 0.01
HORIZON = 10_000  # enters delta, the schedules and the universal pool


def _directions(d, seed):
    rng = np.random.default_rng(seed)
    u = rng.normal(size=d)
    u /= np.linalg.norm(u)
    v = rng.normal(size=d)
    v -= (v @ u) * u
    v /= np.linalg.norm(v)
    return u, v


def _quadratic_step(learner):
    """Round function on the drifting quadratic; env state ``(t, u, v)``."""

    def step(ls, es, key):
        t, u, v = es
        ang = OMEGA * t.astype(u.dtype)
        c = 2.0 * (jnp.cos(ang) * u + jnp.sin(ang) * v)
        points, aux = query = learner.act(ls, None, key)
        values = 0.5 * jnp.sum((points - c) ** 2, axis=-1)
        return learner.update(ls, query, values), (t + 1, u, v), jnp.mean(values)

    return step


def _linear_step(learner):
    """Round function on the rotating linear losses; env state ``(t, u, v)``."""

    def step(ls, es, key):
        t, u, v = es
        ang = OMEGA * t.astype(u.dtype)
        ell = jnp.cos(ang) * u + jnp.sin(ang) * v
        points, aux = query = learner.act(ls, None, key)
        values = points @ ell
        return learner.update(ls, query, values), (t + 1, u, v), values[0]

    return step


def _env_batch(d, n, dtype=jnp.float64):
    if n > 256:  # distinct directions for the first 256 trials, then repeated (cheap set-up)
        t, u, v = _env_batch(d, 256, dtype)
        reps = -(-n // 256)
        return tuple(jnp.tile(a, (reps,) + (1,) * (a.ndim - 1))[:n] for a in (t, u, v))
    us, vs = zip(*[_directions(d, seed) for seed in range(n)], strict=True)
    return (
        jnp.zeros((n,), jnp.int32),
        jnp.asarray(np.stack(us), dtype),
        jnp.asarray(np.stack(vs), dtype),
    )


def _median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _jax_rate(step, learner_state, d, trials, rounds, repeats, dtype=jnp.float64):
    """Learner-rounds per second of ``trials`` vmapped runs of ``rounds`` rounds, and compile s."""
    run = make_rollout(step, rounds, trials=True)
    es = _env_batch(d, trials, dtype)
    keys = jax.random.split(jax.random.key(0), trials)
    if jax.device_count() > 1 and trials % jax.device_count() == 0:
        # Trials sharded over the host devices (--host-devices): jit splits the vmapped scan.
        es, keys = sh.shard_runs((es, keys), sh.run_mesh())
    t0 = time.perf_counter()
    jax.block_until_ready(run(learner_state, es, keys))
    compile_s = time.perf_counter() - t0
    seconds = _median_time(lambda: run(learner_state, es, keys), repeats)
    return trials * rounds / seconds, compile_s


def _numpy_alg1_rate(d, rounds, repeats, hp):
    u, v = _directions(d, 0)

    def loss(t, x):
        ang = OMEGA * t
        c = 2.0 * (np.cos(ang) * u + np.sin(ang) * v)
        return 0.5 * float(np.sum((x - c) ** 2))

    coords = np.random.default_rng(1).integers(0, d, size=rounds)
    params = {"radius": 1.0, "lam": 1.0, "lipschitz": 1.0, "scale": 1.0, "offset": float(d * d)}
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        bco_numpy.algorithm1(
            loss,
            d,
            coords,
            domain=("ball", 1.0),
            delta=float(hp.delta),
            xi=float(hp.xi),
            kind="variance",
            params=params,
        )
        best = min(best, time.perf_counter() - t0)
    return rounds / best


def _numpy_alg4_rate(d, rounds, repeats, eta):
    u, v = _directions(d, 0)
    rng = np.random.default_rng(1)
    coords = rng.integers(0, d, size=rounds)
    signs = rng.choice([-1.0, 1.0], size=rounds)
    best = np.inf
    for _ in range(repeats):
        learner = BoxFTRLNumpy(eta, -np.ones(d), np.ones(d))
        t0 = time.perf_counter()
        for t in range(rounds):
            ang = OMEGA * t
            learner.step(np.cos(ang) * u + np.sin(ang) * v, int(coords[t]), float(signs[t]))
        best = min(best, time.perf_counter() - t0)
    return rounds / best


THROUGHPUT_D = 10
THROUGHPUT_BATCHES = (1024, 2048, 4096, 8192, 16384, 65536)
THROUGHPUT_TARGET = 1e7


def _kernels(step, learner_state, d, trials, rounds):
    """Ops in the compiled program (fusions; all instructions), from XLA's optimised HLO."""
    run = make_rollout(step, rounds, trials=True)
    es = _env_batch(d, trials, learner_state.hparams.delta.dtype)
    keys = jax.random.split(jax.random.key(0), trials)
    text = run.lower(learner_state, es, keys).compile().as_text() or ""
    lines = [ln for ln in text.splitlines() if " = " in ln and not ln.lstrip().startswith("ROOT")]
    return {"fusions": sum("fusion(" in ln for ln in lines), "instructions": len(lines)}


def _stream_rate(repeats, n=1 << 24):
    """Float64 elements per second of ``x * a + b`` over ``n`` elements (read + write: 16 bytes
    each): the memory-bound floor of this machine, measured in the same run."""
    x = jnp.ones((n,), jnp.float64)
    f = jax.jit(lambda x: x * 1.0000001 + 1e-9)
    jax.block_until_ready(f(x))
    return n / _median_time(lambda: f(x), repeats)


def _prng_rate(trials, rounds, repeats, d=THROUGHPUT_D):
    """Learner-rounds/s of the random draws alone: the runner's key split and Algorithm 1's
    coordinate draw per round, vmapped over ``trials`` in a ``lax.scan`` like the real run."""

    def one(key):
        def body(carry, _):
            key, acc = carry
            key, sub = jax.random.split(key)
            return (key, acc + jax.random.randint(sub, (), 0, d, dtype=jnp.int32)), None

        return jax.lax.scan(body, (key, jnp.zeros((), jnp.int32)), None, length=rounds)[0][1]

    f = jax.jit(jax.vmap(one))
    keys = jax.random.split(jax.random.key(0), trials)
    jax.block_until_ready(f(keys))
    return trials * rounds / _median_time(lambda: f(keys), repeats)


def _carry_bytes(learner_state, d, dtype):
    """Bytes of one trial's carry: learner state, env state ``(t, u, v)`` and a PRNG key."""
    learner = sum(np.dtype(a.dtype).itemsize * a.size for a in jax.tree.leaves(learner_state))
    env = 4 + 2 * d * np.dtype(dtype).itemsize
    return int(learner + env + 8)


def throughput(quick: bool, repeats: int, batches=THROUGHPUT_BATCHES) -> dict:
    """Algorithm 1 at d = 10: learner-rounds/s per batch of vmapped trials, float32 and float64,
    and, below the target, the measured ceiling (see the module docstring)."""
    d = THROUGHPUT_D
    rounds = 20 if quick else 100
    if quick:
        batches = tuple(b for b in batches if b <= 16384)
    out = {"d": d, "rounds": rounds, "target": THROUGHPUT_TARGET, "dtypes": {}}
    stream = _stream_rate(repeats)
    out["stream_f64_elements_per_s"] = stream
    for dtype in (jnp.float32, jnp.float64):
        learner = tp.two_point_learner(dim=d, schedule="variance")
        hp = learner.hyperparams(dom.ball(1.0, dtype=dtype), horizon=HORIZON)
        state = learner.init(hp)
        step = _quadratic_step(learner)
        rows = []
        for b in batches:
            rate, compile_s = _jax_rate(step, state, d, b, rounds, repeats, dtype)
            rows.append(
                {
                    "batch": b,
                    "learner_rounds_per_s": rate,
                    "round_us": 1e6 * b / rate,  # one round of the whole batch
                    "ns_per_learner_round": 1e9 / rate,
                    "compile_s": compile_s,
                }
            )
        best = max(rows, key=lambda r: r["learner_rounds_per_s"])
        name = jnp.dtype(dtype).name
        entry = {"batches": rows, "best_batch": best["batch"], "best": best["learner_rounds_per_s"]}
        entry["met"] = best["learner_rounds_per_s"] >= THROUGHPUT_TARGET
        entry["carry_bytes_per_learner"] = _carry_bytes(state, d, dtype)
        entry["kernels"] = _kernels(step, state, d, best["batch"], rounds)
        # A learner-round costs as much as streaming this many float64 elements through memory.
        entry["prng_only_ns_per_learner_round"] = 1e9 / _prng_rate(best["batch"], rounds, repeats)
        entry["stream_elements_per_learner_round"] = stream / best["learner_rounds_per_s"]
        out["dtypes"][name] = entry
        _print_throughput(name, entry)
    return out


def _print_throughput(name, e):
    rates = "  ".join(f"{r['batch']}: {r['learner_rounds_per_s']:.3g}" for r in e["batches"])
    verdict = "met" if e["met"] else "MISSED"
    print(
        f"alg1 d={THROUGHPUT_D} {name}: learner-rounds/s by batch {rates} | best "
        f"{e['best']:.3g} at {e['best_batch']} vs target {THROUGHPUT_TARGET:.0e}: {verdict}",
        flush=True,
    )
    if not e["met"]:
        per_round = "  ".join(f"{r['batch']}: {r['round_us']:.0f}" for r in e["batches"])
        ns = "  ".join(f"{r['ns_per_learner_round']:.0f}" for r in e["batches"])
        print(
            f"  ceiling: us per round of the batch {per_round}; ns per learner-round {ns}; "
            f"carry {e['carry_bytes_per_learner']} B/learner; compiled program "
            f"{e['kernels']['fusions']} fusions, {e['kernels']['instructions']} instructions; "
            f"a learner-round = {e['stream_elements_per_learner_round']:.0f} streamed f64 "
            f"elements; the random draws alone (key split + coordinate) "
            f"{e['prng_only_ns_per_learner_round']:.0f} ns per learner-round",
            flush=True,
        )


def _cases(d):
    """``(name, step, learner_state, numpy_rate_fn or None)`` for dimension ``d``."""
    ball = dom.ball(1.0)
    alg1 = tp.two_point_learner(dim=d, schedule="variance")
    hp1 = alg1.hyperparams(ball, horizon=HORIZON)
    alg4 = op.box_ftrl(dim=d)
    eta4 = 0.01 / d
    hp4 = alg4.hyperparams(eta4, -jnp.ones(d), jnp.ones(d))
    uni = ens.universal_ensemble(dim=d)
    hpu = uni.hyperparams(ball, horizon=HORIZON, lipschitz=3.0, preset="practical")
    return [
        (
            "alg1",
            _quadratic_step(alg1),
            alg1.init(hp1),
            lambda r, k: _numpy_alg1_rate(d, r, k, hp1),
        ),
        (
            "alg4",
            _linear_step(alg4),
            alg4.init(hp4),
            lambda r, k: _numpy_alg4_rate(d, r, k, eta4),
        ),
        ("universal", _quadratic_step(uni), uni.init(hpu), None),
    ]


def main(argv=None) -> dict:
    p = parser(__file__, __doc__, quick="reduced run (< 1 minute)",
               repeats="5, 3 with --quick", device=True)  # fmt: skip
    p.add_argument("--trials", type=positive_int, default=TRIALS, help="vmapped trials")
    p.add_argument(
        "--only-throughput", action="store_true", help="only the Algorithm 1 d = 10 line"
    )
    args = p.parse_args(argv)
    select_device(args)

    repeats = args.repeats or (3 if args.quick else 5)
    rows = []
    line = throughput(args.quick, repeats)
    if args.only_throughput:
        return finish({"quick": args.quick, "throughput": line}, args.json)
    print(
        f"{'learner':>9} {'d':>5} | {'jax 1':>10} {'jax x' + str(args.trials):>10} "
        f"{'numpy':>10} | {'jax1/np':>8} {'jaxV/np':>8} {'V/1':>6} | {'compile s':>9}"
    )
    for d in DIMS:
        # Rounds per timed call: fewer where a round is expensive (keeps --quick under a minute).
        rounds_1 = 200 if args.quick else 1000
        rounds_v = max(10, (20 if args.quick else 100) * 100 // max(d, 100))
        rounds_np = max(20, (200 if args.quick else 1000) * 10 // d)
        for name, step, state, np_rate in _cases(d):
            r1, c1 = _jax_rate(step, state, d, 1, rounds_1, repeats)
            rv, cv = _jax_rate(step, state, d, args.trials, rounds_v, repeats)
            rn = np_rate(rounds_np, repeats) if np_rate is not None else None
            row = {
                "learner": name,
                "d": d,
                "jax_rounds_per_s_1": r1,
                f"jax_rounds_per_s_{args.trials}": rv,
                "numpy_rounds_per_s": rn,
                "jax_1_over_numpy": r1 / rn if rn else None,
                "jax_vmap_over_numpy": rv / rn if rn else None,
                "vmap_over_1": rv / r1,
                "compile_s_1": c1,
                f"compile_s_{args.trials}": cv,
                "rounds_timed": {"jax_1": rounds_1, "jax_vmap": rounds_v, "numpy": rounds_np},
            }
            rows.append(row)
            _print_row(row, args.trials)

    return finish(
        {
            "dtype": "float64",
            "trials": args.trials,
            "quick": args.quick,
            "cases": rows,
            "throughput": line,
        },
        args.json,
    )


def _fmt_rate(x):
    if x is None:
        return f"{'n/a':>10}"
    return f"{x:10.3g}"


def _fmt_ratio(x, width=8):
    return f"{'n/a':>{width}}" if x is None else f"{x:{width}.1f}"


def _print_row(row, trials):
    print(
        f"{row['learner']:>9} {row['d']:>5} | {_fmt_rate(row['jax_rounds_per_s_1'])} "
        f"{_fmt_rate(row[f'jax_rounds_per_s_{trials}'])} {_fmt_rate(row['numpy_rounds_per_s'])} | "
        f"{_fmt_ratio(row['jax_1_over_numpy'])} {_fmt_ratio(row['jax_vmap_over_numpy'])} "
        f"{_fmt_ratio(row['vmap_over_1'], 6)} | "
        f"{row['compile_s_1'] + row[f'compile_s_{trials}']:9.2f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
