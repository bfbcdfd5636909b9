"""Where EOFD-MLogB's update time goes at large D (K = 1, fixed m): a profile by scaling.

Run as ``python -m benchmarks.mlogb_profile`` (``--quick`` for fewer sizes, ``--json PATH``,
``--rounds N`` for the scan length: the per-round rule forms V once every ``spare_columns``
rounds, m/4 by default, so a scan shorter than that times no formation at all).

Prints, for D in a range, the per-round time of ``update`` alone inside a ``lax.scan`` (compile
excluded), the fitted slope (ms per 1000 dimensions: the passes over the D x (m + c) basis and,
amortised, the D x (m + c) x m product that forms V when the spare columns run out) and
intercept (D-independent work: the (m+1) x (m+1)
eigendecomposition of the FD core, by a rank-one secular update for K = 1), and, at the largest
D, those kernels alone: a plain ``V @ U`` product, ``eigh`` of an (m+1) x (m+1) matrix and the
secular solver that replaces it for K = 1.
"""

from __future__ import annotations

import argparse
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from bandits_jax import mlogb  # noqa: E402
from bandits_jax.linalg import secular  # noqa: E402
from benchmarks._device import add_device_option, select_device  # noqa: E402
from benchmarks._report import finish  # noqa: E402


def _time(fn, repeats: int) -> float:
    jax.block_until_ready(fn())
    t0 = time.perf_counter()
    for _ in range(repeats):
        out = fn()
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / repeats


def update_per_round(d: int, m: int, rounds: int, repeats: int) -> float:
    """Seconds per ``update`` call of EOFD (K = 1) inside one scan of ``rounds`` updates."""
    rng = np.random.default_rng(0)
    learner = mlogb.eofd(num_outcomes=1, dim=d, sketch_size=m)
    state = learner.init(mlogb.hyperparams(lam=10.0, eta=1.0, S=1.0, beta=1.0))
    xs = jnp.asarray(rng.normal(size=(rounds, d)) / np.sqrt(d))
    ys = jnp.asarray(np.arange(rounds) % 2)

    def body(s, xy):
        return learner.update(s, *xy), None

    run = jax.jit(lambda s: jax.lax.scan(body, s, (xs, ys))[0])
    return _time(lambda: run(state), repeats) / rounds


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", type=str, default=None)
    p.add_argument("--m", type=int, default=100)
    p.add_argument(
        "--rounds", type=int, default=None, help="scan length (default 50, 20 with --quick)"
    )
    add_device_option(p)
    args = p.parse_args(argv)
    select_device(args)
    dims = [2500, 10000] if args.quick else [2500, 5000, 10000, 20000]
    rounds, repeats = (20, 3) if args.quick else (50, 5)
    rounds = args.rounds or rounds
    per_round = [update_per_round(d, args.m, rounds, repeats) for d in dims]
    for d, t in zip(dims, per_round, strict=True):
        print(f"D = {d:>6}: update {1e3 * t:7.3f} ms per round", flush=True)
    slope, intercept = np.polyfit(np.asarray(dims) / 1000.0, 1e3 * np.asarray(per_round), 1)
    print(f"fit: {slope:.3f} ms per 1000 dims + {intercept:.3f} ms")
    rng = np.random.default_rng(1)
    V = jnp.asarray(rng.normal(size=(dims[-1], args.m)))
    U = jnp.asarray(rng.normal(size=(args.m, args.m + 1)))
    S = rng.normal(size=(args.m + 1, args.m + 1))
    S = jnp.asarray(S @ S.T)
    gemm = jax.jit(lambda V, U: V @ U)
    eigh = jax.jit(jnp.linalg.eigh)
    sec = jax.jit(secular.lowrank_eigh)  # what the FD core uses for K = 1 (sketch._core_eigh)
    mu = jnp.asarray(np.concatenate([np.sort(rng.exponential(size=args.m))[::-1], [0.0]]))
    a = jnp.asarray(rng.normal(size=(args.m + 1, 1)))
    t_gemm = _time(lambda: gemm(V, U), 20)
    t_eigh = _time(lambda: eigh(S), 50)
    t_sec = _time(lambda: sec(mu, a, jnp.eye(1, dtype=a.dtype)), 50)
    flops = 2.0 * dims[-1] * args.m * (args.m + 1)
    print(
        f"at D = {dims[-1]}: V @ U ({dims[-1]} x {args.m} x {args.m + 1}) {1e3 * t_gemm:.3f} ms "
        f"({flops / t_gemm / 1e9:.0f} GFLOP/s); eigh ({args.m + 1}) {1e3 * t_eigh:.3f} ms; "
        f"secular rank-one eigh ({args.m + 1}) {1e3 * t_sec:.3f} ms"
    )
    result = {
        "m": args.m,
        "dims": dims,
        "update_ms": [1e3 * t for t in per_round],
        "slope_ms_per_1000_dims": float(slope),
        "intercept_ms": float(intercept),
        "gemm_ms": 1e3 * t_gemm,
        "eigh_ms": 1e3 * t_eigh,
        "secular_ms": 1e3 * t_sec,
    }
    return finish(result, args.json)  # records backend and devices too


if __name__ == "__main__":
    main()
