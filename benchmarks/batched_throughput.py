"""Batched throughput: learner-rounds per second against the number of vmapped trials.

Run as ``python -m benchmarks.batched_throughput`` (``--quick``: trials 1, 4, 16, 64; ``--json
FILE``, or ``--out``, writes the figures; ``--device gpu`` runs it on a GPU). ``--learners``:
specs ``KIND[@DxK][+batched]``, a registry kind on the Section 4 synthetic stream
(``envs.synthetic_mlogb``, ``--mlogb-size DxK`` unless the spec has its own, ``||W*|| = 1``, at
``mlogb.tuned(kind, S=1)`` as ``reproduce`` runs it; ``+batched``: ``solver="batched"``, the
form a GPU keeps as one batch, for the kinds with a LAPACK form on the CPU), or ``bco``,
the BCO paper's Algorithm 1 (``bco.two_point_learner``, ``"variance"``) on a drifting quadratic
(``--bco-dim``, default 10); in float32 and float64 (``--dtypes``), a subprocess per dtype.
``--recommended``: the GPU script (``RECOMMENDED``, trials 1, 16, 256, 4096); ``--against FILE``
adds each case's rate over the same case's in another run (e.g. the 2-core CPU's JSON).

Method. A case is one (learner, dtype, trials): the family's step played by the library's runner
(``jax.vmap`` over trials of ``sim.runner.rollout``, each trial its own environment state and key,
one shared learner start state: what ``make_rollout(step, rounds, trials=True)`` compiles),
compiled once (``compile_s``) and called once untimed (``first_call_s``). Then every batch size of
a learner is timed ``--repeats`` times, in turn, so that a change of load falls on every batch
alike; a repeat is as many back-to-back calls as last about ``--min-time`` (0.1 s), its time their
mean. Seconds per call are the median, min and max over repeats; learner-rounds/s is
``trials * rounds / median``; the speedup is that over the same learner's and dtype's smallest
batch. Every call plays ``--rounds`` (100), large batches ``max(--min-rounds,
--max-learner-rounds // trials)`` (4 and 16384). Compiling dominates (56 programs for the default
list, 1 to 10 s each). ``--skip LEARNER:TRIALS`` leaves cases out (``skipped``).

Best batch: per learner and dtype, the smallest batch per device (trials over the devices they are
sharded over, ``--host-devices``) beyond which no larger batch of the list raises
learner-rounds/s by more than 10% (``--gain``): ``best_batch[learner][dtype]`` in the JSON. The
1-minute load average is recorded at the start, at each compile, when timing begins and at the
end (the machine may be shared).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import pathlib
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import types

from benchmarks._device import select_device
from benchmarks._options import parser
from benchmarks._report import finish

LEARNERS = ("eofd", "oful", "linucb", "bco")
LABELS = {"eofd": "EOFD-MLogB", "oful": "OFUL-MLogB", "linucb": "LinUCB", "bco": "BCO Alg. 1"}
# What the library recommends (``mlogb.practical``'s picks in their regimes: LinUCB at K d <= 32,
# robust EOFD at K = 1 and K d > 32, buffered EOFD at K >= 2 and 32 < K d <= 128), the paper's
# EOFD-MLogB and OFUL-MLogB, LinUCB and Algorithm 1 of the BCO paper.
RECOMMENDED = ("linucb@20x1", "eofd-robust@100x1", "eofd-buffered@20x4", "eofd-paper@20x4",
               "oful-paper@20x4", "bco")  # fmt: skip
RECOMMENDED_TRIALS = (1, 16, 256, 4096)
TRIALS = (1, 4, 16, 64, 256, 1024, 4096)
QUICK_TRIALS = (1, 4, 16, 64)
DTYPES = ("float32", "float64")
HORIZON = 10_000  # enters delta = 1/T and the BCO schedule only; the calls play --rounds
GAIN = 1.10  # best batch: no larger batch is more than 10% faster
ROOT = pathlib.Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- options


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive ints, got {text!r}")
    return sorted(set(values))


def _size(text: str) -> tuple[int, int]:
    try:
        d, K = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected DxK (e.g. 20x1), got {text!r}") from None
    if d < 1 or K < 1:
        raise argparse.ArgumentTypeError(f"expected positive d and K, got {text!r}")
    return d, K


def _spec(text: str) -> str:
    """A learner spec ``KIND[@DxK][+batched]`` or ``bco`` (module docstring), checked."""
    from bandits_jax.mlogb import recipes

    name, _, solver = text.partition("+")
    kind, _, size = name.partition("@")
    if text == "bco":
        return text
    if kind not in recipes.KINDS or solver not in ("", "batched"):
        raise argparse.ArgumentTypeError(
            f"expected KIND[@DxK][+batched] with KIND one of {','.join(recipes.KINDS)}, or bco; "
            f"got {text!r}"
        )
    if size:
        _size(size)
    if solver and not recipes.REGISTRY[kind].solver:
        raise argparse.ArgumentTypeError(
            f"+batched applies to the kinds with a solver option (the others have one form), "
            f"got {text!r}"
        )
    return text


def _specs(text: str) -> list[str]:
    return list(dict.fromkeys(_spec(v.strip()) for v in text.split(",") if v.strip()))


def _skip(text: str) -> tuple[str, int]:
    name, _, n = text.rpartition(":")
    if not n.isdigit():
        raise argparse.ArgumentTypeError(f"expected LEARNER:TRIALS (e.g. oful:4096), got {text!r}")
    return _spec(name), int(n)


def _parser() -> argparse.ArgumentParser:
    p = parser(__file__, __doc__, quick="trials 1,4,16,64", json_aliases=("--out",), repeats=5,
               dtypes=DTYPES, device=True)  # fmt: skip
    p.add_argument("--trials-list", type=_int_list, default=None, help="default 1,4,...,4096")
    p.add_argument(
        "--learners",
        type=_specs,
        default=None,
        help=f"KIND[@DxK][+batched] or bco, comma-separated ({','.join(LEARNERS)})",
    )
    p.add_argument(
        "--recommended",
        action="store_true",
        help=f"the GPU script: {','.join(RECOMMENDED)}, trials 1,16,256,4096",
    )
    p.add_argument(
        "--against",
        type=pathlib.Path,
        default=None,
        help="a JSON of this script: each case's rate over the same case's there",
    )
    p.add_argument("--rounds", type=int, default=100, help="rounds per call (default 100)")
    p.add_argument(
        "--max-learner-rounds",
        type=int,
        default=16384,
        help="large batches play max(--min-rounds, this // trials) rounds (default 16384)",
    )
    p.add_argument("--min-rounds", type=int, default=4, help="see --max-learner-rounds")
    p.add_argument(
        "--min-time",
        type=float,
        default=0.1,
        help="seconds a repeat lasts at least: short calls are repeated (default 0.1)",
    )
    p.add_argument("--mlogb-size", type=_size, default=(20, 1), help="MLogB d x K (20x1)")
    p.add_argument("--bco-dim", type=int, default=10, help="BCO dimension (10)")
    p.add_argument("--skip", type=_skip, action="append", default=[], help="LEARNER:TRIALS")
    p.add_argument("--gain", type=float, default=GAIN, help="best-batch threshold (1.10)")
    p.add_argument("--worker", choices=DTYPES, default=None, help=argparse.SUPPRESS)
    p.add_argument("--worker-out", type=str, default=None, help=argparse.SUPPRESS)
    return p


def rounds_for(trials: int, rounds: int, max_learner_rounds: int, min_rounds: int) -> int:
    """Rounds a call of ``trials`` plays: ``rounds``, fewer for large batches (the work cap)."""
    return min(rounds, max(min_rounds, max_learner_rounds // trials))


# ----------------------------------------------------------------------------- worker


def _build(name: str, dtype, args):
    """``(step, learner_state, env_init, info)`` of a learner on its environment."""
    from bandits_jax import bco, envs, mlogb
    from bandits_jax.envs import bco_losses

    bco_interact = bco.interact
    if isinstance(bco_interact, types.ModuleType):  # an older layout: the module of that name
        bco_interact = bco_interact.interact

    if name == "bco":
        d = args.bco_dim
        env = bco_losses.quadratic(d, base_norm=2.0, amplitude=0.5, omega=0.01, dtype=dtype)
        learner = bco.two_point_learner(dim=d, schedule="variance")
        hp = learner.hyperparams(
            env.domain, horizon=HORIZON, smoothness=env.smoothness, lipschitz=env.lipschitz
        )
        info = {"d": d, "env": "bco_losses.quadratic(base_norm=2, amplitude=0.5, omega=0.01)"}
        return bco_interact(learner, env), learner.init(hp), env.init, info
    spec, _, batched = name.partition("+")
    kind, _, size = spec.partition("@")
    d, K = _size(size) if size else args.mlogb_size
    row = mlogb.recipes.REGISTRY[kind]
    solver = "batched" if batched else "auto"
    recipe = mlogb.tuned(kind, num_outcomes=K, dim=d, S=1.0, horizon=HORIZON, dtype=dtype,
                         solver=solver)  # fmt: skip
    env = envs.synthetic_mlogb(num_outcomes=K, dim=d, S=1.0, dtype=dtype)
    info = {"d": d, "K": K, "env": "synthetic_mlogb(S=1)", "recipe": f"mlogb.tuned({kind!r}, S=1)"}
    if row.sketched:
        info["sketch_size"] = recipe.sketch_size
    if row.solver:
        info["solver"] = solver
    step = mlogb.interact(recipe.learner, env)
    return step, recipe.learner.init(recipe.hparams), env.init, info


def _prepare(build, trials: int, rounds: int) -> dict:
    """Compiles one case and calls it once (module docstring); ``"call"`` runs it again."""
    import jax

    from bandits_jax.sim import run_mesh, shard_runs
    from bandits_jax.sim.runner import rollout

    step, learner_state, env_init, _ = build
    k_env, k_run = jax.random.split(jax.random.key(0))
    env_states = jax.vmap(env_init)(jax.random.split(k_env, trials))
    keys = jax.random.split(k_run, trials)
    devices = jax.device_count()
    sharded = devices > 1 and trials % devices == 0
    if sharded:  # trials over the host devices: jit splits the vmapped scan
        env_states, keys = shard_runs((env_states, keys), run_mesh())
    fn = jax.vmap(functools.partial(rollout, step, num_rounds=rounds), in_axes=(None, 0, 0))
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(learner_state, env_states, keys).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(learner_state, env_states, keys))
    first_call_s = time.perf_counter() - t0
    return {
        "trials": trials,
        "trials_per_device": trials // devices if sharded else trials,
        "sharded_over": devices if sharded else 1,
        "rounds": rounds,
        "compile_s": compile_s,
        "first_call_s": first_call_s,
        "loadavg_1min_compile": load,
        "call": lambda: compiled(learner_state, env_states, keys),
    }


def _time_interleaved(cases: list[dict], repeats: int, min_time: float) -> None:
    """Times ``repeats`` repeats of every case, one repeat of each case in turn, so that a change
    of the machine's load in between falls on every batch size alike. A repeat is ``calls``
    back-to-back calls, each to ``block_until_ready``, enough to last about ``min_time`` seconds
    by the first call (short calls are otherwise at the mercy of the scheduler); its time is
    their mean. Adds the seconds per call (median, min, max, all), ``calls_per_repeat`` and the
    1-minute load average when timing began."""
    import jax

    times: list[list[float]] = [[] for _ in cases]
    for case in cases:
        case["calls_per_repeat"] = max(1, min(1000, math.ceil(min_time / case["first_call_s"])))
    load = os.getloadavg()[0]
    for _ in range(repeats):
        for case, ts in zip(cases, times, strict=True):
            call, n = case["call"], case["calls_per_repeat"]
            t0 = time.perf_counter()
            for _ in range(n):
                jax.block_until_ready(call())
            ts.append((time.perf_counter() - t0) / n)
    for case, ts in zip(cases, times, strict=True):
        del case["call"]
        case["seconds_per_call"] = {"median": statistics.median(ts), "min": min(ts), "max": max(ts)}
        case["times_s"] = ts
        case["loadavg_1min_timing"] = load


def _worker(args) -> None:
    """Runs every case of one dtype in this process; writes them to ``--worker-out``."""
    import jax

    jax.config.update("jax_enable_x64", args.worker == "float64")
    select_device(args)
    import jax.numpy as jnp

    dtype = jnp.dtype(args.worker)
    skip = set(args.skip)
    cases, infos = [], {}
    for name in args.learners:
        build = _build(name, dtype, args)
        infos[name] = build[3]
        group = []
        for trials in args.trials_list:
            if (name, trials) in skip:
                continue
            rounds = rounds_for(trials, args.rounds, args.max_learner_rounds, args.min_rounds)
            case = {"learner": name, "dtype": args.worker, **build[3]}
            case.update(_prepare(build, trials, rounds))
            group.append(case)
            print(
                f"  {name:<26} {args.worker} trials {trials:>5} rounds {rounds:>3}: compile "
                f"{case['compile_s']:6.2f} s, first call {case['first_call_s'] * 1e3:9.2f} ms",
                flush=True,
            )
        _time_interleaved(group, args.repeats, args.min_time)
        for case in group:
            med = case["seconds_per_call"]["median"]
            print(
                f"  {name:<26} {args.worker} trials {case['trials']:>5}: {med * 1e3:9.2f} ms/call, "
                f"{case['trials'] * case['rounds'] / med:12.0f} learner-rounds/s",
                flush=True,
            )
        cases += group
        del group
        jax.clear_caches()
    dev = jax.devices()[0]
    out = {
        "dtype": args.worker,
        "x64": bool(jax.config.jax_enable_x64),
        "platform": dev.platform,
        "device_kind": dev.device_kind,
        "device_count": jax.device_count(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "learners": infos,
        "cases": cases,
    }
    pathlib.Path(args.worker_out).write_text(json.dumps(out))


# ----------------------------------------------------------------------------- summary


def add_rates(cases: list[dict]) -> None:
    """Adds learner-rounds/s (median, and the spread over repeats) and the speedup over the
    smallest batch (trials = 1 when measured) of the same learner and dtype."""
    for c in cases:
        work = c["trials"] * c["rounds"]
        s = c["seconds_per_call"]
        c["learner_rounds_per_s"] = work / s["median"]
        c["learner_rounds_per_s_spread"] = [work / s["max"], work / s["min"]]
    for c in cases:
        group = [o for o in cases if (o["learner"], o["dtype"]) == (c["learner"], c["dtype"])]
        base = min(group, key=lambda o: o["trials"])
        c["speedup_base_trials"] = base["trials"]
        c["speedup"] = c["learner_rounds_per_s"] / base["learner_rounds_per_s"]


def best_batch(rates: dict[int, float], gain: float = GAIN) -> int:
    """The smallest batch (per device) beyond which no larger batch is more than ``gain`` times
    faster: ``rates`` maps batch -> learner-rounds/s."""
    batches = sorted(rates)
    for i, b in enumerate(batches):
        if all(rates[o] <= gain * rates[b] for o in batches[i + 1 :]):
            return b
    return batches[-1]  # not reached: the largest batch always qualifies


def best_batches(cases: list[dict], gain: float = GAIN) -> dict[str, dict[str, int]]:
    """``{learner: {dtype: best batch per device}}`` from the measured cases."""
    out: dict[str, dict[str, int]] = {}
    for c in cases:
        out.setdefault(c["learner"], {}).setdefault(c["dtype"], None)
    for name, per_dtype in out.items():
        for dt in per_dtype:
            rates = {
                c["trials_per_device"]: c["learner_rounds_per_s"]
                for c in cases
                if (c["learner"], c["dtype"]) == (name, dt)
            }
            per_dtype[dt] = best_batch(rates, gain)
    return out


def _load_against(path: pathlib.Path) -> dict:
    """The run of ``--against``: its device and its rates by (learner, dtype, trials)."""
    try:
        data = json.loads(path.read_text())
        rates = {(c["learner"], c["dtype"], c["trials"]): c["learner_rounds_per_s"]
                 for c in data["cases"]}  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(
            f"error: --against: expected a JSON of this script, {path}: {exc}"
        ) from None
    device = {k: data.get(k) for k in ("platform", "device_kind", "device_count", "commit")}
    return {"file": str(path), **device, "rates": rates}


def add_against(cases: list[dict], against: dict) -> None:
    """``over_against``: each case's learner-rounds/s over the same case's in the other run."""
    for c in cases:
        other = against["rates"].get((c["learner"], c["dtype"], c["trials"]))
        c["over_against"] = None if other is None else c["learner_rounds_per_s"] / other


def print_table(cases: list[dict], best: dict[str, dict[str, int]]) -> None:
    ratio = any("over_against" in c for c in cases)
    print(
        f"{'learner':<26} {'dtype':<7} {'trials':>6} {'rounds':>6} {'compile s':>9} "
        f"{'ms/call [min, max]':>28} {'learner-rounds/s':>16} {'speedup':>8} {'best batch':>10}"
        + (f" {'/ --against':>11}" if ratio else "")
    )
    for c in cases:
        s = c["seconds_per_call"]
        spread = f"{s['median'] * 1e3:9.2f} [{s['min'] * 1e3:.2f}, {s['max'] * 1e3:.2f}]"
        mark = " <-" if c["trials_per_device"] == best[c["learner"]][c["dtype"]] else "   "
        other = c.get("over_against")
        print(
            f"{LABELS.get(c['learner'], c['learner']):<26} {c['dtype']:<7} {c['trials']:>6} "
            f"{c['rounds']:>6} {c['compile_s']:9.2f} {spread:>28} "
            f"{c['learner_rounds_per_s']:16.0f} {c['speedup']:8.2f} "
            f"{best[c['learner']][c['dtype']]:>7}{mark}"
            + ((f" {other:11.2f}" if other is not None else f" {'-':>11}") if ratio else "")
        )
    print("best batch per device (learner-rounds/s stop improving by more than 10%):")
    for name, per_dtype in best.items():
        label = LABELS.get(name, name)
        print(f"  {label:<26} " + "  ".join(f"{dt}: {n}" for dt, n in per_dtype.items()))


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> dict | None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.learners is None:
        args.learners = list(RECOMMENDED if args.recommended else LEARNERS)
    if args.trials_list is None:
        default = RECOMMENDED_TRIALS if args.recommended else TRIALS
        args.trials_list = list(QUICK_TRIALS if args.quick else default)
    against = _load_against(args.against) if args.against and not args.worker else None
    for name in ("rounds", "max_learner_rounds", "min_rounds", "repeats"):
        if getattr(args, name) < 1:
            raise SystemExit(f"error: --{name.replace('_', '-')}: expected a positive int")
    if not args.min_time >= 0:
        raise SystemExit("error: --min-time: expected seconds >= 0")
    if args.worker:
        _worker(args)
        return None

    load_start = os.getloadavg()
    t_start = time.perf_counter()
    workers = []
    with tempfile.TemporaryDirectory(prefix="batched-throughput-") as tmp:
        for dt in args.dtypes:
            path = pathlib.Path(tmp) / f"{dt}.json"
            cmd = [sys.executable, "-m", "benchmarks.batched_throughput", *argv]
            cmd += ["--worker", dt, "--worker-out", str(path)]
            print(
                f"{dt}: cases in a subprocess (x64 {'on' if dt == 'float64' else 'off'})",
                flush=True,
            )
            path_dirs = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(path_dirs)}
            proc = subprocess.run(cmd, cwd=ROOT, env=env, check=False)
            if proc.returncode != 0:
                raise SystemExit(f"error: the {dt} worker failed ({proc.returncode})")
            workers.append(json.loads(path.read_text()))
    cases = [c for w in workers for c in w["cases"]]
    add_rates(cases)
    if against is not None:
        add_against(cases, against)
    best = best_batches(cases, args.gain)
    skipped = [
        {"learner": n, "trials": t, "reason": "--skip"}
        for n, t in args.skip
        if n in args.learners and t in args.trials_list
    ]

    select_device(args)  # after the workers: this process starts its backend only to report it
    import jax

    dev = jax.devices()[0]
    result = {
        "benchmark": "batched_throughput",
        "command": shlex.join(["python", "-m", "benchmarks.batched_throughput", *argv]),
        "platform": dev.platform,
        "device_kind": dev.device_kind,
        "device_count": jax.device_count(),
        "loadavg_start": list(load_start),
        "loadavg_end": list(os.getloadavg()),
        "wall_s": time.perf_counter() - t_start,
        "settings": {
            "trials_list": args.trials_list,
            "learners": args.learners,
            "dtypes": args.dtypes,
            "rounds": args.rounds,
            "max_learner_rounds": args.max_learner_rounds,
            "min_rounds": args.min_rounds,
            "repeats": args.repeats,
            "min_time_s": args.min_time,
            "threads": args.threads,
            "host_devices": args.host_devices,
            "gain": args.gain,
        },
        "workers": [{k: v for k, v in w.items() if k != "cases"} for w in workers],
        "skipped": skipped,
        "best_batch_rule": (
            "smallest batch per device beyond which no larger batch of the list raises "
            f"learner-rounds/s by more than {round((args.gain - 1) * 100)}%"
        ),
        "best_batch": best,
        "against": None if against is None else {k: v for k, v in against.items() if k != "rates"},
        "cases": cases,
    }
    print_table(cases, best)
    print(
        f"load average (1 min): {load_start[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end; "
        f"wall {result['wall_s']:.0f} s"
    )
    return finish(result, args.json)


if __name__ == "__main__":
    main()
