"""The first minutes of a user: a cold ``bandits-jax reproduce --quick`` (a fresh compile cache),
run ``--repeats`` times (default 3), then once warm (reading the cache the last cold run filled).

Run as ``python -m benchmarks.cold_start --json docs/bench/cold_start.json``. Each run is a fresh
subprocess of ``python -m bandits_jax reproduce --quick`` (README's quickstart command, figures
included) with its own ``--out`` directory; each cold run gets a new, empty compile cache
(``BANDITS_JAX_COMPILE_CACHE``), the warm run (``--no-warm``: none) the last cold run's. The data
root (``BANDITS_JAX_DATA``) is one temporary directory for all runs (a user's second run finds the
data the first prepared). ``--args "..."`` appends options to the command (e.g. ``--no-plots``);
``--quick`` narrows it to one small cell (:data:`QUICK_ARGS`: a check that the script runs, not
the figure); ``--keep DIR`` keeps caches, data and outputs there.

Reported per run: its wall seconds (start to exit, as a user waits: Python, JAX and the figures
included), the wall seconds it spent compiling the learners' programs (``compile_wall_seconds``
of its ``reproduce.json``) and their ratio, the compile share; from JAX's compile log
(``JAX_LOG_COMPILES=1``): compilations, the seconds XLA spent in them (with a cache hit: loading
the executable), persistent-cache hits, the compilations of chunk functions (``jit(fn)``,
``sim.chunks.ChunkFn``) and any program loaded twice in one run (a cache key hit twice); the
cache's entries and bytes. Summary: the median cold wall seconds, compile seconds and compile
share, and the warm run's wall over the cold median. The 1-minute load average is recorded
before and after (on a shared machine the figures move with it).
"""

from __future__ import annotations

import collections
import os
import pathlib
import re
import shlex
import statistics
import tempfile

from benchmarks._options import parser
from benchmarks._report import finish, reproduce_compile_wall, run_command

COMPILING = re.compile(r"Compiling (\S+) with global shapes and types (.*?)\. Argument mapping")
FINISHED = re.compile(r"Finished XLA compilation of (\S+) in ([0-9.]+) sec")
HIT = re.compile(r"Persistent compilation cache hit for '(\S+)' with key '(\S+)'")
CHUNK_FNS = ("jit(fn)",)  # the name JAX logs for ChunkFn's program (sharded or not)
COMMAND = ["reproduce", "--quick"]
# --quick: the reproduction's arguments for one small cell
QUICK_ARGS = ["--settings", "synth-20-1-S8", "--learners", "linucb", "--rounds", "20",
              "--trials", "2"]  # fmt: skip


def compile_log(stderr: str) -> dict:
    """Counts from a ``JAX_LOG_COMPILES=1`` stderr (pure function): compilations, XLA seconds,
    persistent-cache hits, chunk-function compilations and their distinct input signatures
    (several learners share a signature, so fewer signatures than compilations is no fault),
    and cache keys hit more than once: the same program compiled again in one process (seen in
    a run that reads the cache, where each program is logged with its key)."""
    compiles = COMPILING.findall(stderr)
    chunk = [sig for sig in compiles if sig[0] in CHUNK_FNS]
    hits = collections.Counter(HIT.findall(stderr))
    return {
        "compilations": len(compiles),
        "xla_seconds": sum(float(t) for _, t in FINISHED.findall(stderr)),
        "cache_hits": sum(hits.values()),
        "chunk_compilations": len(chunk),
        "chunk_signatures": len(set(chunk)),
        "programs_loaded_twice": [
            {"function": f, "key": k, "times": n} for (f, k), n in hits.items() if n > 1
        ],
    }


def _cache_size(path: pathlib.Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def _run(name: str, out: pathlib.Path, cache: pathlib.Path, data: pathlib.Path, args: list[str]):
    """One run of the command (module docstring); prints and returns its figures."""
    wall, stderr = run_command(
        [*COMMAND, "--quiet", "--out", str(out), *args],
        data,
        BANDITS_JAX_COMPILE_CACHE=str(cache),
        JAX_LOG_COMPILES="1",
    )
    compile_s = reproduce_compile_wall(out)
    entries, size = _cache_size(cache)
    run = {"run": name, "wall_s": wall, "compile_wall_s": compile_s,
           "compile_share": compile_s / wall, **compile_log(stderr),
           "cache_entries": entries, "cache_bytes": size}  # fmt: skip
    print(
        f"{name}: {wall:6.1f} s wall, {compile_s:5.1f} s compiling the learners' programs "
        f"({run['compile_share']:.0%}); {run['compilations']} compilations "
        f"({run['xla_seconds']:.1f} s in XLA), {run['cache_hits']} cache hits; cache {entries} "
        f"entries, {size / 1e6:.1f} MB",
        flush=True,
    )
    for r in run["programs_loaded_twice"]:
        print(f"  the same program {r['times']}x in one run: {r['function']} {r['key']}")
    return run


def main(argv: list[str] | None = None) -> dict:
    p = parser(__file__, __doc__, quick="one small cell of the command (QUICK_ARGS)",
               repeats=3, device=True)  # fmt: skip
    p.add_argument("--args", default="", help="more options for the command (one string)")
    p.add_argument("--no-warm", action="store_true", help="cold runs only")
    p.add_argument("--keep", default=None, help="keep caches, data and outputs in this directory")
    args = p.parse_args(argv)
    # The runs are subprocesses of the command: pass the benchmark's device/thread choice on.
    extra = [] if args.threads is None else ["--threads", str(args.threads)]
    extra += (QUICK_ARGS if args.quick else []) + shlex.split(args.args)
    if args.device != "auto":
        os.environ["JAX_PLATFORMS"] = {"cpu": "cpu", "gpu": "cuda"}[args.device]
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bandits-jax-cold-start-") as tmp:
        root = pathlib.Path(args.keep or tmp)
        data = root / "data"
        data.mkdir(parents=True, exist_ok=True)
        cold = []
        for i in range(1, args.repeats + 1):
            cache = root / f"xla{i}"
            if cache.exists() and any(cache.iterdir()):
                p.error(f"--keep {root}: {cache.name}/ is not empty (a cold run needs a new cache)")
            cache.mkdir(exist_ok=True)
            cold.append(_run(f"cold {i}", root / f"out{i}", cache, data, extra))
        warm = None if args.no_warm else _run("warm", root / "out-warm", cache, data, extra)

    med = {key: statistics.median(r[key] for r in cold)
           for key in ("wall_s", "compile_wall_s", "compile_share")}  # fmt: skip
    line = (f"median of {len(cold)} cold runs: {med['wall_s']:.1f} s wall, "
            f"{med['compile_wall_s']:.1f} s compiling ({med['compile_share']:.0%})")  # fmt: skip
    if warm:
        line += f"; warm run {warm['wall_s']:.1f} s ({warm['wall_s'] / med['wall_s']:.2f} of it)"
    print(line)
    return finish(
        {
            "benchmark": "cold_start",
            "command": shlex.join(["bandits-jax", *COMMAND, *extra]),
            "repeats": args.repeats,
            "median_cold_wall_s": med["wall_s"],
            "median_cold_compile_wall_s": med["compile_wall_s"],
            "median_compile_share": med["compile_share"],
            "warm_over_cold": warm and warm["wall_s"] / med["wall_s"],
            "loadavg_1min": [load_before, os.getloadavg()[0]],
            "cold": cold,
            "warm": warm,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
