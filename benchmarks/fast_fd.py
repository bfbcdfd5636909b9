"""Fast FD (2m buffer, one shrink every m rounds) vs per-round FD at very large D.

Run as ``python -m benchmarks.fast_fd`` (``--dim``, ``--sketch-size``, ``--rounds``,
``--fd-rounds``, ``--float32``, ``--json PATH``; default ``docs/bench/fast_fd.json``).

Both rules absorb one column per round (k = 1) of a synthetic stream with a decaying spectrum,
inside one ``lax.scan`` each (compile excluded):

* ``linalg.fast_fd.update`` over ``--rounds`` rounds (a multiple of m, so the shrinks are
  included at their real frequency), per-round time = total / rounds;
* ``linalg.sketch.update`` (per-round FD, the EOFD rule) over ``--fd-rounds`` rounds from an
  empty sketch (it does the same work every round, full or not).

It prints both per-round times and their ratio, and each rule's spectral-norm covariance error
``||M - sketch||_2`` at the end of its own run next to its ``rho`` (the FD guarantee is
``error <= rho``), estimated by power iteration (D is too large for a dense eigensolver); the
two runs differ in length, so the errors are not comparable with each other (the tests compare
the two rules on one stream). The machine may be shared: numbers are from one run
and can be noisy.
"""

from __future__ import annotations

import argparse
import os
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bandits_jax.linalg import fast_fd, sketch  # noqa: E402
from benchmarks._report import finish  # noqa: E402


def _stream(key, D, T, dtype):
    decay = 1.0 / jnp.sqrt(1.0 + jnp.arange(D, dtype=dtype))
    return jax.random.normal(key, (T, D, 1), dtype) * decay[None, :, None]


def _time_scan(step, state, blocks):
    def run(state, blocks):
        return jax.lax.scan(lambda s, b: (step(s, b), None), state, blocks)[0]

    fn = jax.jit(run)
    compiled = fn.lower(state, blocks).compile()
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(state, blocks))
    return time.perf_counter() - t0, out


def _spectral_error(blocks, apply_sketch, D, iters=30):
    """``||M - sketch||_2`` with ``M = sum_t b_t b_t^T``, by power iteration (M - sketch >= 0)."""
    B = blocks[:, :, 0]  # (T, D)

    def matvec(v):
        return B.T @ (B @ v) - apply_sketch(v)

    v = jnp.ones((D,), B.dtype) / np.sqrt(D)
    for _ in range(iters):
        w = matvec(v)
        v = w / jnp.linalg.norm(w)
    return float(v @ matvec(v))


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dim", type=int, default=100_000)
    p.add_argument("--sketch-size", type=int, default=100)
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--fd-rounds", type=int, default=20)
    p.add_argument("--float32", action="store_true")
    p.add_argument("--json", default="docs/bench/fast_fd.json")
    args = p.parse_args(argv)
    dtype = jnp.float32 if args.float32 else jnp.float64
    D, m = args.dim, args.sketch_size
    key = jax.random.key(0)
    warm = _stream(jax.random.fold_in(key, 1), D, m, dtype)  # fills both sketches first
    blocks = _stream(key, D, args.rounds, dtype)

    fast0 = fast_fd.init(D, m, dtype)
    _, fast0 = _time_scan(fast_fd.update, fast0, warm)  # buffer at m columns, as after a shrink
    t_fast, fast = _time_scan(fast_fd.update, fast0, blocks)
    # per-round FD does the same work every round, full or not: timed from empty
    t_fd, fd = _time_scan(
        lambda s, b: sketch.update(s, b)[0], sketch.init(D, m, dtype), blocks[: args.fd_rounds]
    )
    per_fast = t_fast / args.rounds
    per_fd = t_fd / args.fd_rounds
    S = fast.buffer
    err_fast = _spectral_error(jnp.concatenate([warm, blocks]), lambda v: S @ (S.T @ v), D)
    err_fd = _spectral_error(blocks[: args.fd_rounds], lambda v: fd.V @ (fd.mu * (fd.V.T @ v)), D)

    result = {
        "benchmark": "fast_fd",
        "loadavg_1min": os.getloadavg()[0],
        "dtype": jnp.dtype(dtype).name,
        "D": D,
        "m": m,
        "rounds_fast": args.rounds,
        "rounds_per_round_fd": args.fd_rounds,
        "fast_fd_ms_per_round": 1e3 * per_fast,
        "per_round_fd_ms_per_round": 1e3 * per_fd,
        "speedup": per_fd / per_fast,
        "covariance_error_fast": err_fast,
        "covariance_error_per_round": err_fd,
        "rho_fast": float(fast.rho),
        "rho_per_round": float(fd.rho),
    }
    print(
        f"D={D} m={m} {result['dtype']}: fast FD {result['fast_fd_ms_per_round']:.2f} ms/round"
        f" ({args.rounds} rounds), per-round FD {result['per_round_fd_ms_per_round']:.2f}"
        f" ms/round ({args.fd_rounds} rounds): speedup {result['speedup']:.1f}x"
    )
    print(
        f"||M - sketch||_2: fast after {m + args.rounds} rounds {err_fast:.4g}"
        f" (rho {result['rho_fast']:.4g}), per-round after {args.fd_rounds} rounds {err_fd:.4g}"
        f" (rho {result['rho_per_round']:.4g})"
    )
    return finish(result, args.json)


if __name__ == "__main__":
    main()
