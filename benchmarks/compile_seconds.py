"""Compile seconds of every learner's programs at XLA's default options (what a library user's
own ``jit`` pays, without the command's XLA flags).

Run as ``python -m benchmarks.compile_seconds --json docs/bench/compile_seconds_quiet.json``
(``--cases`` and ``--dtypes`` narrow it, ``--repeats`` for more samples, ``--list`` for the case
names, ``--quick``: :data:`QUICK_CASES` once; ``--out`` is ``--json``'s other name).

Method. Every (case, dtype, repeat) runs in a fresh subprocess with no ``XLA_FLAGS`` and no
``JAX_*`` compile-cache settings (every program compiles from scratch). It builds the learner
(MLogB: ``mlogb.recipes.make_learner(kind, ..., horizon=1000)`` at Section 4's sketch size and the
kind's tuned hyperparameters; BCO: Algorithms 1 and 3, Algorithm 4 on a box, the two ensembles),
compiles a trivial program (backend start-up is charged to no learner), and for each program,
after ``jax.clear_caches()``, times ``trace_lower_s`` (``jax.jit(fn).trace(*args).lower()``) and
``compile_s`` (``lowered.compile()``), each also in the process's CPU seconds (``*_cpu_s``, less
sensitive to load), and counts its size (``stablehlo_ops``, ``hlo_ops``, while loops, the most
frequent HLO ops). The programs: MLogB ``update`` and ``select``, each jitted alone; BCO ``round``
(``act`` then ``update`` on the drifting quadratic); both: ``rollout``, ``jax.jit`` of
``sim.runner.rollout(step, learner_state, env_state, key, 1000)`` with the family's ``interact``
step (``envs.synthetic_mlogb``; ``envs.bco_losses.quadratic``, on a box for Algorithm 4).

Reported per case, dtype and program: median, min and max over the repeats, with the 1-minute load
average before and after each subprocess. ``--source LABEL=DIR`` (repeatable) measures another
checkout's ``bandits_jax``, the sources' runs interleaved (a before/after comparison). On a shared
machine compare medians taken in the same sitting.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections import Counter

ROUNDS = 1000
MLOGB_KINDS = (
    "eofd",
    "eofd-robust",
    "eofd-adaptive",
    "oful",
    "greedy",
    "linucb",
    "ecolog",
    "lin-ts",
    "logistic-ts",
    "eofd-buffered",
    "exact",
    "uniform",
)
MLOGB_SETTINGS = ((1, 20), (3, 10))  # (K, d)
BCO_DIM = 10
BCO_KINDS = ("alg1-variance", "alg3-sphere", "alg4-box", "alg5-dynamic", "alg6-universal")
QUICK_CASES = ("mlogb:linucb:K1:d20", "bco:alg1-variance:d10")  # --quick


def case_names() -> list[str]:
    names = []
    for K, d in MLOGB_SETTINGS:
        for kind in MLOGB_KINDS:
            if kind == "ecolog" and K != 1:
                continue
            names.append(f"mlogb:{kind}:K{K}:d{d}")
    names += [f"bco:{kind}:d{BCO_DIM}" for kind in BCO_KINDS]
    return names


# --- the worker (one case, one dtype, in a fresh process) --------------------------------------


def _count_stablehlo(text: str) -> tuple[int, int, Counter]:
    kinds = Counter(re.findall(r"=\s*\"?((?:stablehlo|chlo|mhlo|func|call)\.?[\w.]*)", text))
    kinds.update(re.findall(r"^\s*\"?(stablehlo\.return|func\.return)", text, re.M))
    n_ops = sum(kinds.values())
    return n_ops, kinds.get("stablehlo.while", 0), kinds


def _count_hlo(text: str) -> tuple[int, int, Counter]:
    kinds: Counter = Counter()
    for line in text.splitlines():
        m = re.match(r"\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][\w\-]*)\(", line)
        if m and not line.lstrip().startswith(("HloModule", "//")):
            kinds[m.group(1)] += 1
    return sum(kinds.values()), kinds.get("while", 0), kinds


def _measure(fn, args) -> dict:
    import jax

    jax.clear_caches()
    c0, t0 = time.process_time(), time.perf_counter()
    lowered = jax.jit(fn).trace(*args).lower()
    c1, t1 = time.process_time(), time.perf_counter()
    compiled = lowered.compile()
    c2, t2 = time.process_time(), time.perf_counter()
    s_ops, s_while, _ = _count_stablehlo(lowered.as_text())
    h_ops, h_while, h_kinds = _count_hlo(compiled.as_text())
    return {
        "trace_lower_s": t1 - t0,
        "compile_s": t2 - t1,
        "trace_lower_cpu_s": c1 - c0,
        "compile_cpu_s": c2 - c1,
        "stablehlo_ops": s_ops,
        "stablehlo_while": s_while,
        "hlo_ops": h_ops,
        "hlo_while": h_while,
        "hlo_top_ops": dict(h_kinds.most_common(12)),
    }


def _mlogb_programs(kind: str, K: int, d: int, dtype):
    import jax
    import jax.numpy as jnp

    from bandits_jax import envs, mlogb
    from bandits_jax.mlogb import recipes
    from bandits_jax.sim.runner import rollout

    m = recipes.sketch_size(K, d)
    learner = recipes.make_learner(kind, num_outcomes=K, dim=d, sketch_size=m, horizon=ROUNDS)
    hp = recipes.tuned(kind, num_outcomes=K, dim=d, S=1.0, horizon=ROUNDS, dtype=dtype).hparams
    state = learner.init(hp)
    env = envs.synthetic_mlogb(num_outcomes=K, dim=d, dtype=dtype)
    env_state = env.init(jax.random.key(1))
    _, actions, mask = env.observe(env_state, jax.random.key(2))
    x, y = actions[0], jnp.asarray(1, jnp.int32)
    step = mlogb.interact(learner, env)
    return {
        "update": (learner.update, (state, x, y)),
        "select": (learner.select, (state, actions, mask)),
        "rollout": (
            lambda ls, es, key: rollout(step, ls, es, key, ROUNDS),
            (state, env_state, jax.random.key(3)),
        ),
    }


def _bco_programs(kind: str, d: int, dtype):
    import jax
    import numpy as np

    from bandits_jax import bco
    from bandits_jax.bco import domains as dom
    from bandits_jax.bco import ensembles as ens
    from bandits_jax.bco import one_point as op
    from bandits_jax.bco import two_point as tp
    from bandits_jax.envs import bco_losses
    from bandits_jax.sim.runner import rollout

    interact = getattr(bco.interact, "interact", bco.interact)  # the submodule or the function
    env_kw = dict(base_norm=1.5, amplitude=0.3, omega=0.05, dtype=dtype)
    if kind == "alg4-box":
        lo, hi = -np.ones(d, np.dtype(dtype)), np.ones(d, np.dtype(dtype))
        env = bco_losses.quadratic(d, domain=dom.box(lo, hi), **env_kw)
        learner = op.box_ftrl(dim=d)
        hp = learner.hyperparams(eta=0.1, lower=lo, upper=hi)
    else:
        env = bco_losses.quadratic(d, **env_kw)
        learner, kw = {
            "alg1-variance": (tp.two_point_learner(dim=d, schedule="variance"), {}),
            "alg3-sphere": (tp.sphere_learner(dim=d, schedule="variance"), {}),
            "alg5-dynamic": (ens.dynamic_ensemble(dim=d), {"preset": "practical"}),
            "alg6-universal": (
                ens.universal_ensemble(dim=d),
                {"preset": "practical", "lipschitz": 2.0},
            ),
        }[kind]
        hp = learner.hyperparams(env.domain, horizon=ROUNDS, **kw)
    state = learner.init(hp)
    env_state = env.init(jax.random.key(1))
    step = interact(learner, env)

    def round_(ls, es, key):
        points, aux = query = learner.act(ls, None, key)
        return learner.update(ls, query, env.loss(es, es.t, points))

    return {
        "round": (round_, (state, env_state, jax.random.key(2))),
        "rollout": (
            lambda ls, es, key: rollout(step, ls, es, key, ROUNDS),
            (state, env_state, jax.random.key(3)),
        ),
    }


def worker(case: str, dtype_name: str, programs: list[str] | None) -> dict:
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    if dtype_name == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    dtype = jnp.dtype(dtype_name)
    jax.jit(lambda v: v + 1).lower(jnp.ones(3, dtype)).compile()  # backend start-up
    parts = case.split(":")
    if parts[0] == "mlogb":
        progs = _mlogb_programs(parts[1], int(parts[2][1:]), int(parts[3][1:]), dtype)
    else:
        progs = _bco_programs(parts[1], int(parts[2][1:]), dtype)
    out = {}
    for name, (fn, args) in progs.items():
        if programs and name not in programs:
            continue
        out[name] = _measure(fn, args)
    return out


# --- the driver --------------------------------------------------------------------------------


def _clean_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "XLA_FLAGS" and not k.startswith("JAX_") and k != "TF_CPP_MIN_LOG_LEVEL"
    }
    env["JAX_PLATFORMS"] = "cpu"
    return env


def _run_one(case: str, dtype: str, programs: list[str] | None, source: str) -> dict:
    """One worker subprocess: this file's worker, importing ``bandits_jax`` from ``source``."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", case, dtype]
    if programs:
        cmd.append(",".join(programs))
    env = _clean_env()
    env["PYTHONPATH"] = os.pathsep.join([source, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=source, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"programs": res, "load_before": load0, "load_after": os.getloadavg()[0], "wall_s": wall}


def _stats(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "samples": xs}


def _summarise(runs: list[dict]) -> dict:
    out: dict = {}
    for name in runs[0]["programs"]:
        samples = [r["programs"][name] for r in runs]
        entry = {
            key: _stats([s[key] for s in samples])
            for key in ("trace_lower_s", "compile_s", "trace_lower_cpu_s", "compile_cpu_s")
        }
        entry["total_s"] = _stats([s["trace_lower_s"] + s["compile_s"] for s in samples])
        for key in ("stablehlo_ops", "stablehlo_while", "hlo_ops", "hlo_while"):
            entry[key] = samples[0][key]
        entry["hlo_top_ops"] = samples[0]["hlo_top_ops"]
        out[name] = entry
    out["load_1min"] = _stats([r["load_before"] for r in runs] + [r["load_after"] for r in runs])
    out["subprocess_wall_s"] = _stats([r["wall_s"] for r in runs])
    return out


def main(argv=None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:  # CASE DTYPE [PROGRAMS]: imports nothing but bandits_jax
        programs = argv[3].split(",") if len(argv) > 3 else None
        print(json.dumps(worker(argv[1], argv[2], programs)))
        return {}
    from benchmarks._options import parser

    p = parser(__file__, __doc__, quick="one MLogB and one BCO case (QUICK_CASES), one repeat",
               json_aliases=("--out",), repeats="3, 1 with --quick",
               dtypes=("float32", "float64"))  # fmt: skip
    p.add_argument("--cases", default=None, help="comma-separated case names (default: all)")
    p.add_argument("--programs", default=None, help="e.g. rollout,update (default: all)")
    p.add_argument("--list", action="store_true", help="print the case names and exit")
    p.add_argument(
        "--source",
        action="append",
        metavar="LABEL=DIR",
        help="measure the bandits_jax of checkout DIR (repeatable: the sources' runs are "
        "interleaved, e.g. --source before=/tmp/old --source after=.; the last one's JSON goes "
        "to --json, each other's to --json with _LABEL before the suffix); default: this checkout",
    )
    args = p.parse_args(argv)
    programs = args.programs.split(",") if args.programs else None
    if args.list:
        print("\n".join(case_names()))
        return {}
    cases = args.cases.split(",") if args.cases else None
    cases = cases or list(QUICK_CASES if args.quick else case_names())
    dtypes = args.dtypes
    args.repeats = args.repeats or (1 if args.quick else 3)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sources = dict(s.split("=", 1) for s in args.source) if args.source else {"after": root}
    sources = {label: os.path.abspath(d) for label, d in sources.items()}
    runs = {lb: {c: {dt: [] for dt in dtypes} for c in cases} for lb in sources}
    t_start = time.time()
    for rep in range(args.repeats):  # interleaved: a change in load hits every case and source
        for case in cases:
            for dt in dtypes:
                for label, source in sources.items():
                    r = _run_one(case, dt, programs, source)
                    runs[label][case][dt].append(r)
                    brief = "  ".join(
                        f"{n} {v['trace_lower_s']:.2f}+{v['compile_s']:.2f}s"
                        f" (cpu {v['compile_cpu_s']:.2f})"
                        for n, v in r["programs"].items()
                    )
                    tag = f" {label}" if len(sources) > 1 else ""
                    print(f"[{rep}]{tag} {case} {dt}: {brief}  (load {r['load_before']:.2f})",
                          flush=True)  # fmt: skip
    for i, (label, source) in enumerate(sources.items()):
        out = args.json
        if out and i < len(sources) - 1:
            stem, ext = os.path.splitext(out)
            out = f"{stem}_{label}{ext}"
        _report(argv, args, label, source, runs[label], t_start, out)
    return {}


def _report(argv, args, label, source, runs, t_start, out) -> dict:
    import jax

    result = {
        "source": label,
        "source_commit": _commit(source),
        "command": "python -m benchmarks.compile_seconds " + " ".join(argv or sys.argv[1:]),
        "rounds": ROUNDS,
        "repeats": args.repeats,
        "xla_flags": "none (XLA's defaults), no compilation cache",
        "cpu_count": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)),
        "jax": jax.__version__,
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t_start)),
        "elapsed_s": time.time() - t_start,
        "cases": {c: {dt: _summarise(rs) for dt, rs in by.items()} for c, by in runs.items()},
    }
    print(f"--- {label} ({source})")
    print(_table(result))
    if out:
        with open(out, "w") as f:
            json.dump(result, f, indent=1)
        print(f"wrote {out}")
    return result


def _commit(source: str) -> str | None:
    """``git describe`` of ``source`` (with ``-dirty`` for uncommitted changes), if it is one."""
    proc = subprocess.run(
        ["git", "-C", source, "describe", "--always", "--dirty"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return proc.stdout.strip() or None


def _table(result: dict) -> str:
    lines = [f"{'case':34s} {'dtype':8s} {'program':8s} {'trace+lower':>16s} {'compile':>18s} "
             f"{'cpu':>6s} {'hlo ops':>8s} {'load':>5s}"]  # fmt: skip
    for case, by in result["cases"].items():
        for dt, summ in by.items():
            for name, e in summ.items():
                if not isinstance(e, dict) or "compile_s" not in e:
                    continue
                tl, c = e["trace_lower_s"], e["compile_s"]
                lines.append(
                    f"{case:34s} {dt:8s} {name:8s} {tl['median']:6.2f} ({tl['min']:.2f}-"
                    f"{tl['max']:.2f}) {c['median']:6.2f} ({c['min']:.2f}-{c['max']:.2f}) "
                    f"{e['compile_cpu_s']['median']:6.2f} {e['hlo_ops']:8d} "
                    f"{summ['load_1min']['median']:5.2f}"
                )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
