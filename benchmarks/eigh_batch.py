"""The FD core's eigendecomposition under ``vmap``: LAPACK ``eigh`` vs the secular solver.

Run as ``python -m benchmarks.eigh_batch`` (``--json PATH``, default
``docs/bench/eigh_batch.json``; ``--batch``, ``--repeats``, ``--float32``).

For each core size (n = m + K, K) it times, in one run and on the same inputs (an FD-like core
``diag([mu, 0]) + A M A^T`` with a fifth of the weights zero):

* ``jnp.linalg.eigh`` of the dense core, one instance and ``vmap`` over ``batch`` instances;
* :func:`bandits_jax.linalg.secular.eigh_diag_plus_lowrank`, the same two ways;

and prints per-instance times, the batch gain (``batch * t_one / t_batch``: how much a vmapped
batch beats a loop of single calls) and the secular/eigh ratio. Compile time is excluded. The
machine may be shared: numbers are from one run and can be noisy.
"""

from __future__ import annotations

import argparse
import os
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bandits_jax.linalg.secular import eigh_diag_plus_lowrank  # noqa: E402
from benchmarks._device import add_device_option, select_device  # noqa: E402
from benchmarks._report import finish  # noqa: E402

SIZES = ((41, 1), (44, 4), (79, 1), (101, 1))  # (m + K, K) of the paper's sizes


def _time(fn, args, repeats: int) -> float:
    jax.block_until_ready(fn(*args))
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t0)
    return best


def _cores(n: int, k: int, batch: int, dtype, seed: int = 0):
    rng = np.random.default_rng(seed)
    m = n - k
    mu = np.sort(rng.exponential(size=(batch, m)), axis=1)[:, ::-1]
    mu[:, int(0.8 * m) :] = 0.0  # trailing zero weights, as in FD's first rounds
    d = np.concatenate([mu, np.zeros((batch, k))], axis=1)
    A = rng.normal(size=(batch, n, k))
    G = rng.normal(size=(batch, k, k))
    M = G @ np.swapaxes(G, 1, 2)
    return tuple(jnp.asarray(x, dtype) for x in (d, A, M))


def _dense_eigh(d, A, M):
    return jnp.linalg.eigh(jnp.diag(d) + A @ M @ A.T)


def _secular(d, A, M):
    r = eigh_diag_plus_lowrank(d, A, M)
    return r.evals, r.evecs


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--float32", action="store_true")
    p.add_argument("--json", default="docs/bench/eigh_batch.json")
    add_device_option(p)
    args = p.parse_args(argv)
    select_device(args)
    dtype = jnp.float32 if args.float32 else jnp.float64
    rows = []
    for n, k in SIZES:
        d, A, M = _cores(n, k, args.batch, dtype)
        one = (d[0], A[0], M[0])
        row = {"n": n, "K": k, "batch": args.batch}
        for name, fn in (("eigh", _dense_eigh), ("secular", _secular)):
            t1 = _time(jax.jit(fn), one, args.repeats * 4)
            tb = _time(jax.jit(jax.vmap(fn)), (d, A, M), args.repeats)
            row[f"{name}_one_ms"] = 1e3 * t1
            row[f"{name}_batch_ms"] = 1e3 * tb
            row[f"{name}_batch_gain"] = args.batch * t1 / tb
        row["secular_over_eigh_one"] = row["secular_one_ms"] / row["eigh_one_ms"]
        row["secular_over_eigh_batch"] = row["secular_batch_ms"] / row["eigh_batch_ms"]
        # agreement on the benchmark inputs themselves
        ev_ref = jax.vmap(_dense_eigh)(d, A, M)[0]
        ev = jax.jit(jax.vmap(_secular))(d, A, M)[0]
        row["max_rel_eval_err"] = float(jnp.max(jnp.abs(ev - ev_ref)) / jnp.max(jnp.abs(ev_ref)))
        rows.append(row)
        print(
            f"n={n:4d} K={k}: eigh one {row['eigh_one_ms']:.3f} ms,"
            f" batch {row['eigh_batch_ms']:.2f}"
            f" ms (gain {row['eigh_batch_gain']:.1f}x) | secular one {row['secular_one_ms']:.3f}"
            f" ms, batch {row['secular_batch_ms']:.2f} ms (gain {row['secular_batch_gain']:.1f}x)"
            f" | secular/eigh: one {row['secular_over_eigh_one']:.2f}, batch"
            f" {row['secular_over_eigh_batch']:.2f} | eval err {row['max_rel_eval_err']:.1e}",
            flush=True,
        )
    return finish(
        {
            "benchmark": "eigh_batch",
            "loadavg_1min": os.getloadavg()[0],
            "dtype": jnp.dtype(dtype).name,
            "rows": rows,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
