"""EOFD-MLogB in the paper's regime: 64 vmapped trials at K d up to 100,000 on one machine.

Run as ``python -m benchmarks.scale`` (``--quick``: K d up to 25,000, 8 trials). For each size:
ms a round for the whole batch and per trial, and the compiled program's memory (arguments,
outputs and XLA's temporaries, ``Compiled.memory_analysis``) per trial, then the exponent of each
in d (a least-squares line through the log-log points). One round is Algorithm 2's select (20
actions) and update, as a user's ``jit(vmap(scan))`` runs it at XLA's defaults, float64,
``mlogb.eofd(sketch_size=m)`` at Section 4's hyperparameters; the action sets are one recorded
stream shared by the trials, each trial with its own ``W*`` (``||W*||_F = 1``) and outcome
uniforms, so the learner's work is what is timed. Times are medians over ``--repeats`` calls
(spread in the JSON), compile time excluded.
"""

from __future__ import annotations

import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

from bandits_jax import mlogb  # noqa: E402
from bandits_jax.mlogb import model  # noqa: E402
from benchmarks._options import parser, positive_int  # noqa: E402
from benchmarks._report import finish  # noqa: E402

FULL = [(1, 25_000), (1, 50_000), (1, 100_000), (4, 25_000)]
QUICK = [(1, 5_000), (1, 25_000)]
N = 20  # actions a round


def program(K: int, d: int, m: int, rounds: int, trials: int):
    """``(run, args)``: the jitted batch of ``trials`` runs of ``rounds`` rounds."""
    learner = mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m)
    hp = mlogb.section4(num_outcomes=K, dim=d, S=1.0, horizon=1000).hparams
    rng = np.random.default_rng(0)
    X = rng.normal(size=(rounds, N, d)).astype(np.float64)
    X /= np.linalg.norm(X, axis=2, keepdims=True)
    W = rng.normal(size=(trials, K, d))
    W /= np.linalg.norm(W, axis=(1, 2), keepdims=True)
    U = rng.uniform(size=(trials, rounds))
    mask = jnp.ones(N, bool)

    def trial(W_star, u, X):
        def step(state, xu):
            acts, ut = xu
            choice = learner.act(state, (acts, mask))
            y = model.sample_outcome(W_star @ choice.x, ut)
            return learner.update(state, choice, y), choice.index

        return lax.scan(step, learner.init(hp), (X, u))[1]

    run = jax.jit(jax.vmap(trial, in_axes=(0, 0, None)))
    return run, (jnp.asarray(W), jnp.asarray(U), jnp.asarray(X))


def measure(K: int, d: int, m: int, rounds: int, trials: int, repeats: int) -> dict:
    run, args = program(K, d, m, rounds, trials)
    compiled = run.lower(*args).compile()
    mem = compiled.memory_analysis()
    total = mem.argument_size_in_bytes + mem.output_size_in_bytes + mem.temp_size_in_bytes
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append((time.perf_counter() - t0) / rounds)
    med = statistics.median(times)
    return {
        "K": K, "d": d, "m": m, "trials": trials, "rounds": rounds,
        "ms_round_batch": 1e3 * med, "ms_round_batch_spread": [1e3 * min(times), 1e3 * max(times)],
        "ms_round_per_trial": 1e3 * med / trials, "bytes_per_trial": total / trials,
        "bytes_temp": mem.temp_size_in_bytes,
    }  # fmt: skip


def exponent(rows: list[dict], key: str) -> float | None:
    """The slope of ``log(row[key])`` against ``log(K d)`` over the K = 1 rows (None: < 2)."""
    pts = [(np.log(r["K"] * r["d"]), np.log(r[key])) for r in rows if r["K"] == 1]
    if len(pts) < 2:
        return None
    x, y = np.array(pts).T
    return float(np.polyfit(x, y, 1)[0])


def main(argv=None) -> dict:
    p = parser(__file__, __doc__, quick="K d up to 25,000, 8 trials", repeats=3)
    p.add_argument("--trials", type=positive_int, default=None, help="vmapped trials (64)")
    p.add_argument("--sketch", type=positive_int, default=40, help="sketch size m (40)")
    p.add_argument("--rounds", type=positive_int, default=4, help="rounds a call (4)")
    args = p.parse_args(argv)
    trials = args.trials or (8 if args.quick else 64)
    rows = []
    for K, d in QUICK if args.quick else FULL:
        row = measure(K, d, args.sketch, args.rounds, trials, args.repeats)
        rows.append(row)
        print(f"K={K} d={d:>7} m={row['m']} trials={trials}: {row['ms_round_batch']:9.1f} ms a "
              f"round ({row['ms_round_per_trial']:.2f} a trial), "
              f"{row['bytes_per_trial'] / 2**20:.1f} MiB a trial", flush=True)  # fmt: skip
    result = {
        "rows": rows,
        "exponent_time": exponent(rows, "ms_round_batch"),
        "exponent_memory": exponent(rows, "bytes_per_trial"),
    }
    print(f"exponent in K d (K = 1): time {result['exponent_time']}, "
          f"memory {result['exponent_memory']}")  # fmt: skip
    return finish(result, args.json)


if __name__ == "__main__":
    main()
