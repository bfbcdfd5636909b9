"""Wall time of batched rollouts with the library's LAPACK calls (``bandits_jax.linalg.lapack``:
one call on a batch below jaxlib's split work, chunks of such batches above it) against one
batched call each (plain ``jnp.linalg``, which can deadlock XLA's CPU runtime at its default
thread options: ``docs/xla_cpu_hang.md``).

Run as ``python -m benchmarks.lapack_batching`` (``--quick`` for a shorter run, ``--json PATH``
for the figures). Each (learner, arm) runs in its own process; float64. The arms:

- ``batched-1thread``: the LAPACK calls batched, XLA with one thread (``--xla_cpu_multi_thread_
  eigen=false``, ``NPROC=1``, as the command sets it): what the library cost before the change;
- ``library-1thread``: the library as it is, the same threads;
- ``library-default``: the library as it is at XLA's default options (a user's own process).

A case is ``mlogb.tuned(kind, ...)``'s learner played through ``sim.make_rollout`` on
``envs.synthetic_mlogb`` for ``trials`` vmapped trials; the time is the median of ``repeats``
calls after one warm-up (compilation excluded), with its [min, max]. Ratios are to
``batched-1thread``, measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ARMS = {
    "batched-1thread": ("batched", {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false",
                                    "NPROC": "1"}),
    "library-1thread": ("library", {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false",
                                    "NPROC": "1"}),
    "library-default": ("library", {}),
}  # fmt: skip
# (kind, K, d): buffered EOFD at each of its regimes, and the other kinds with a factorization.
CASES = [
    ("eofd-buffered", 4, 20),
    ("eofd-buffered", 1, 20),
    ("eofd-buffered", 4, 40),
    ("oful", 2, 10),
    ("exact", 2, 10),
    ("logistic-ts", 2, 10),
    ("lin-ts", 2, 10),
]


def _worker(kind: str, K: int, d: int, arm: str, rounds: int, trials: int, repeats: int):
    """Times one case in this process (the arm's threads were set by the parent)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax.scipy import linalg as jsl

    from bandits_jax import envs, mlogb, sim
    from bandits_jax.linalg import lapack

    if arm == "batched":  # the calls as they were: one batched LAPACK call each
        lapack.cholesky = jnp.linalg.cholesky
        lapack.eigh = jnp.linalg.eigh
        lapack.eigvalsh = lambda a: jnp.linalg.eigvalsh(a, UPLO="U")
        lapack.solve = jnp.linalg.solve
        lapack.lower_solve = lambda L, b: jsl.solve_triangular(L, b, lower=True)
        lapack.lower_solve_t = lambda L, b: jsl.solve_triangular(L, b, lower=True, trans="T")
        lapack.cho_solve = lambda L, b: jsl.cho_solve((L, True), b)
        lapack.svd = lambda a: jnp.linalg.svd(a, full_matrices=False)
        lapack.qr = jnp.linalg.qr
    rec = mlogb.tuned(kind, num_outcomes=K, dim=d, S=4.0, horizon=rounds)
    env = envs.synthetic_mlogb(num_outcomes=K, dim=d, S=4.0)
    run = sim.make_rollout(mlogb.interact(rec.learner, env), rounds, trials=True)
    keys = jax.random.split(jax.random.key(0), trials)
    args = (rec.learner.init(rec.hparams), jax.vmap(env.init)(keys), keys)
    regret = float(jax.block_until_ready(run(*args)).regret.sum(-1).mean())  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(run(*args))
        times.append(time.perf_counter() - t0)
    return {"seconds": statistics.median(times), "spread": [min(times), max(times)],
            "regret": regret}  # fmt: skip


def _run_case(case, arm, rounds, trials, repeats, timeout):
    kind, K, d = case
    mode, env = ARMS[arm]
    cmd = [sys.executable, "-m", "benchmarks.lapack_batching", "--worker", kind, str(K), str(d),
           mode, str(rounds), str(trials), str(repeats)]  # fmt: skip
    full = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "NPROC", "PJRT_NPROC")}
    try:
        out = subprocess.run(cmd, env={**full, **env}, capture_output=True, text=True,
                             timeout=timeout, check=True)  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"hung": f"no result after {timeout} s"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="1 case, 200 rounds, 8 trials")
    p.add_argument("--rounds", type=int, default=1000)
    p.add_argument("--trials", type=int, default=16)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--timeout", type=int, default=600, help="seconds a case may take")
    p.add_argument("--cases", default=None, help="KIND:K:d,... (default: every case)")
    p.add_argument("--json", type=str, default=None, help="write the figures to this path")
    p.add_argument("--worker", nargs=7, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        kind, K, d, mode, rounds, trials, repeats = a.worker
        print(json.dumps(_worker(kind, int(K), int(d), mode, int(rounds), int(trials),
                                 int(repeats))))  # fmt: skip
        return {}
    cases = CASES[:1] if a.quick else CASES
    if a.cases:
        cases = [(k, int(K), int(d)) for k, K, d in (c.split(":") for c in a.cases.split(","))]
    rounds, trials, repeats = (200, 8, 3) if a.quick else (a.rounds, a.trials, a.repeats)
    rows = []
    for case in cases:
        row = {"kind": case[0], "K": case[1], "d": case[2]}
        for arm in ARMS:
            row[arm] = _run_case(case, arm, rounds, trials, repeats, a.timeout)
        base = row["batched-1thread"].get("seconds")
        for arm in ("library-1thread", "library-default"):
            if base and "seconds" in row[arm]:
                row[arm]["ratio"] = row[arm]["seconds"] / base
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {"rounds": rounds, "trials": trials, "repeats": repeats, "arms": list(ARMS),
              "cases": rows}  # fmt: skip
    from benchmarks._report import finish

    return finish(result, a.json)


if __name__ == "__main__":
    main()
