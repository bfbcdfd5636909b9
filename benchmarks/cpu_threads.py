"""Per-round time of EOFD and OFUL under XLA CPU thread configurations, quiet and busy.

Run as ``python -m benchmarks.cpu_threads`` (``--quick`` for a short check, ``--json PATH`` to
write the figures, e.g. ``docs/bench/cpu_threads.json``).

Method. Each (configuration, case, load) runs in its own subprocess (``--worker``), so that the
configuration is in place before JAX starts its backend and no XLA thread pool of one
configuration lingers into the next. A worker plays EOFD-MLogB at (d, K, m) = (785, 1, 78) or
OFUL-MLogB at (d, K) = (400, 1) on the section-4 synthetic stream through
``bandits_jax.sim.runner.make_rollout`` (one trial, rounds in ``lax.scan``), float64; it compiles
once, then times ``repeats`` whole scans and reports milliseconds per round. "busy" runs the same
workers while this benchmark keeps one other CPU-bound process (a single-threaded numpy matmul
loop) running for the duration: the situation of a sweep on a shared machine.

Configurations (environment of the worker; ``XLA_FLAGS`` and the pool size are what XLA's CPU
client in jaxlib 0.10 reads when it starts):

* ``xla-default``: nothing set (XLA's intra-op pool has one thread per schedulable core; Eigen
  multi-threading on);
* ``eigen-off``: ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false``;
* ``pool-1``: ``PJRT_NPROC=1`` (XLA's intra-op thread pool of one thread);
* ``eigen-off+pool-1``: both;
* ``taskset-0``: ``taskset -c 0`` (the whole process pinned to one core, for reference);
* ``library-auto``: what ``bandits_jax.cli.process.configure_threads()`` does (the default of the
  ``bandits-jax`` command and the benchmarks: one thread, the process kept on the least busy
  core).

It prints, per configuration and case, the median ms per round with the spread (min-max over
repeats) quiet and busy, busy/quiet, and each configuration's time over ``xla-default``'s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

CASES = {"eofd-785-1-78": ("eofd", 785, 1, 78), "oful-400-1": ("oful", 400, 1, None)}
# Rounds per timed scan (a full run; --quick divides them).
ROUNDS = {"eofd-785-1-78": 200, "oful-400-1": 40}
CONFIGS = {
    "xla-default": ({}, []),
    "eigen-off": ({"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}, []),
    "pool-1": ({"PJRT_NPROC": "1"}, []),
    "eigen-off+pool-1": (
        {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false", "PJRT_NPROC": "1"},
        [],
    ),
    "taskset-0": ({}, ["taskset", "-c", "0"]),
    "library-auto": (None, []),  # None: the worker calls bandits_jax.cli.process.configure_threads
}
_OUR_VARS = ("XLA_FLAGS", "PJRT_NPROC", "NPROC", "JAX_PLATFORMS", "BANDITS_JAX_THREADS")

BUSY_LOOP = (
    "import numpy as np\n"
    "a = np.random.default_rng(0).normal(size=(256, 256))\n"
    "while True:\n"
    "    a = np.tanh(a @ a)\n"
)


def _worker(case: str, rounds: int, repeats: int, library: bool) -> dict:
    """Runs in the subprocess: compiles once, then times ``repeats`` scans of ``rounds``."""
    if library:
        from bandits_jax.cli import process as threads

        threads.configure_threads()
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_platforms", "cpu")
    from bandits_jax import envs, mlogb
    from bandits_jax.sim.runner import make_rollout

    kind, d, K, m = CASES[case]
    hp = mlogb.section4(num_outcomes=K, dim=d, S=1.0, horizon=10_000).hparams
    learner = (
        mlogb.eofd(num_outcomes=K, dim=d, sketch_size=m)
        if kind == "eofd"
        else mlogb.oful(num_outcomes=K, dim=d)
    )
    env = envs.synthetic_mlogb(num_outcomes=K, dim=d, S=1.0)
    run = make_rollout(mlogb.interact(learner, env), rounds)
    key = jax.random.key(0)
    ls, es = learner.init(hp), env.init(key)
    t0 = time.perf_counter()
    jax.block_until_ready(run(ls, es, key))
    compile_s = time.perf_counter() - t0
    ms = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(run(ls, es, key))
        ms.append(1e3 * (time.perf_counter() - t0) / rounds)
    return {"ms_per_round": ms, "compile_s": compile_s}


def _run_worker(config: str, case: str, rounds: int, repeats: int) -> dict:
    env_updates, prefix = CONFIGS[config]
    env = {k: v for k, v in os.environ.items() if k not in _OUR_VARS}
    env.update(env_updates or {})
    cmd = [*prefix, sys.executable, "-m", "benchmarks.cpu_threads", "--worker", case]
    cmd += ["--rounds", str(rounds), "--repeats", str(repeats)]
    if env_updates is None:
        cmd.append("--library")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"worker {config} {case} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _start_busy() -> subprocess.Popen:
    one = {v: "1" for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env = {**os.environ, **one}
    return subprocess.Popen([sys.executable, "-c", BUSY_LOOP], env=env)


def _summary(ms: list[float]) -> dict:
    return {"median": statistics.median(ms), "min": min(ms), "max": max(ms), "all": ms}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer rounds and repeats")
    p.add_argument("--json", default=None, help="write the figures here")
    p.add_argument("--repeats", type=int, default=None, help="timed scans per worker")
    p.add_argument("--configs", default=",".join(CONFIGS), help="comma list of configurations")
    p.add_argument("--cases", default=",".join(CASES), help="comma list of cases")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--rounds", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--library", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.worker, args.rounds, args.repeats, args.library)))
        return {}

    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in configs if c not in CONFIGS] + [c for c in cases if c not in CASES]
    if bad:
        p.error(f"unknown configuration or case {bad[0]!r}")
    if "taskset-0" in configs and shutil.which("taskset") is None:
        configs.remove("taskset-0")
        print("taskset not found: taskset-0 skipped")
    repeats = args.repeats or (3 if args.quick else 7)
    rounds = {c: max(5, ROUNDS[c] // (4 if args.quick else 1)) for c in cases}

    # A SIGTERM must still end the busy loop and the worker (the finally blocks below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rows = []
    for load in ("quiet", "busy"):
        busy = _start_busy() if load == "busy" else None
        try:
            if busy is not None:
                time.sleep(1.0)  # let the busy loop reach its steady state
            for config in configs:
                for case in cases:
                    res = _run_worker(config, case, rounds[case], repeats)
                    row = {"config": config, "case": case, "load": load, "rounds": rounds[case]}
                    row.update(_summary(res["ms_per_round"]), compile_s=res["compile_s"])
                    rows.append(row)
                    print(
                        f"{load:>5} {config:>17} {case:>14}: {row['median']:8.3f} ms/round "
                        f"(min {row['min']:.3f}, max {row['max']:.3f})",
                        flush=True,
                    )
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()

    ratios = _ratios(rows, configs, cases)
    _print_table(ratios)
    from benchmarks._report import finish

    return finish(
        {
            "benchmark": "cpu_threads",
            "quick": args.quick,
            "repeats": repeats,
            "rounds": rounds,
            "busy_process": "one single-threaded numpy matmul loop",
            "library_auto_environment": _library_environment(),
            "rows": rows,
            "ratios": ratios,
        },
        args.json,
    )


def _library_environment() -> dict:
    from bandits_jax.cli import process as threads

    clean = {k: v for k, v in os.environ.items() if k not in _OUR_VARS}
    return threads.thread_environment(threads.resolve_threads(None), clean)


def _ratios(rows: list[dict], configs: list[str], cases: list[str]) -> list[dict]:
    med = {(r["config"], r["case"], r["load"]): r["median"] for r in rows}
    out = []
    for case in cases:
        for config in configs:
            q, b = med[(config, case, "quiet")], med[(config, case, "busy")]
            base_q = med.get(("xla-default", case, "quiet"))
            base_b = med.get(("xla-default", case, "busy"))
            out.append(
                {
                    "case": case,
                    "config": config,
                    "quiet_ms": q,
                    "busy_ms": b,
                    "busy_over_quiet": b / q,
                    "quiet_over_default": q / base_q if base_q else None,
                    "busy_over_default": b / base_b if base_b else None,
                }
            )
    return out


def _print_table(ratios: list[dict]) -> None:
    print(
        f"\n{'case':>14} {'config':>17} | {'quiet ms':>9} {'busy ms':>9} {'busy/quiet':>10} | "
        f"{'quiet/dflt':>10} {'busy/dflt':>9}"
    )
    f = lambda x, w: f"{'-':>{w}}" if x is None else f"{x:{w}.2f}"  # noqa: E731
    for r in ratios:
        print(
            f"{r['case']:>14} {r['config']:>17} | {r['quiet_ms']:9.3f} {r['busy_ms']:9.3f} "
            f"{f(r['busy_over_quiet'], 10)} | {f(r['quiet_over_default'], 10)} "
            f"{f(r['busy_over_default'], 9)}"
        )


if __name__ == "__main__":
    main()
