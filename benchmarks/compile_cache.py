"""First vs second run of ``bandits-jax reproduce --quick`` with JAX's persistent compilation cache.

Run as ``python -m benchmarks.compile_cache`` (``--json PATH`` to write the figures, e.g.
``docs/bench/compile_cache.json``). It takes a few minutes: the quick reproduction runs twice.
``--quick`` narrows both runs to one small cell (:data:`QUICK_ARGS`: one setting, one learner,
T = 20, 2 trials): a check that the benchmark runs, not the figure.

Method. Both runs are fresh subprocesses of ``python -m bandits_jax reproduce --quick --quiet``
with the same new, empty ``--compile-cache`` directory, each with its own new ``--out``
directory, and a data cache (``BANDITS_JAX_DATA``) in a temporary directory shared by both (so the
second run finds the data the first one prepared, as a user's second run does). The first run
compiles and fills the cache; the second should mostly read it. Reported: the wall time of each
run and the wall seconds it spent compiling the learners' programs (``reproduce.json``),
second/first (issue 10's target: at most 0.5), the cache's entries and size, and, from JAX's
compile log (``JAX_LOG_COMPILES=1``): compilations per run, the seconds XLA spent in them
(``Finished XLA compilation``: with a cache hit that is the time to load the executable),
persistent-cache hits, the compilations of chunk functions (``jit(fn)``, the compiled function of
``bandits_jax.sim.chunks.ChunkFn``), and any program compiled twice within one run (each distinct
chunk function should compile once): in the second run every cached program is logged with its
cache key, so a key that appears twice is the same program compiled again.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import re
import tempfile

from benchmarks._device import add_device_option
from benchmarks._report import finish, reproduce_compile_wall, run_command

COMPILING = re.compile(r"Compiling (\S+) with global shapes and types (.*?)\. Argument mapping")
FINISHED = re.compile(r"Finished XLA compilation of (\S+) in ([0-9.]+) sec")
HIT = re.compile(r"Persistent compilation cache hit for '(\S+)' with key '(\S+)'")
# the name JAX logs for ChunkFn's program (sharded or not)
CHUNK_FNS = ("jit(fn)",)
TARGET = 0.5
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


def _reproduce(out: pathlib.Path, cache: pathlib.Path, data: pathlib.Path, extra: list[str]):
    cmd = ["reproduce", "--quick", "--quiet", "--no-plots", "--out", str(out)]
    cmd += ["--compile-cache", str(cache), *extra]
    wall, stderr = run_command(cmd, data, JAX_LOG_COMPILES="1")
    return wall, {**compile_log(stderr), "compile_wall_s": reproduce_compile_wall(out)}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--json", default=None, help="write the figures here")
    p.add_argument("--quick", action="store_true", help="one small cell (seconds, not minutes)")
    p.add_argument(
        "--keep", default=None, help="use this directory for cache, data and outputs (kept)"
    )
    add_device_option(p)
    args = p.parse_args(argv)
    # The runs are subprocesses of the command: pass the benchmark's device/thread choice on.
    extra = [] if args.threads is None else ["--threads", str(args.threads)]
    if args.quick:
        extra += QUICK_ARGS
    if args.device != "auto":
        os.environ["JAX_PLATFORMS"] = {"cpu": "cpu", "gpu": "cuda"}[args.device]

    with tempfile.TemporaryDirectory(prefix="bandits-jax-compile-cache-") as tmp:
        root = pathlib.Path(args.keep or tmp)
        cache, data = root / "xla", root / "data"
        for d in (cache, data):
            d.mkdir(parents=True, exist_ok=True)
        if any(cache.iterdir()):
            p.error(f"--keep {root}: its xla/ cache is not empty (the first run must be cold)")
        runs = []
        for i in (1, 2):
            wall, log = _reproduce(root / f"out{i}", cache, data, extra)
            entries, size = _cache_size(cache)
            runs.append({"wall_s": wall, **log, "cache_entries": entries, "cache_bytes": size})
            print(
                f"run {i}: {wall:7.1f} s wall, {log['compile_wall_s']:.1f} s compiling the "
                f"learners' programs; {log['compilations']} compilations "
                f"({log['xla_seconds']:.1f} s in XLA), {log['cache_hits']} cache hits, "
                f"{log['chunk_compilations']} chunk compilations over "
                f"{log['chunk_signatures']} input signatures; cache {entries} entries, "
                f"{size / 1e6:.1f} MB",
                flush=True,
            )
            for r in log["programs_loaded_twice"]:
                print(f"  the same program {r['times']}x in one run: {r['function']} {r['key']}")

    ratio = runs[1]["wall_s"] / runs[0]["wall_s"]
    verdict = "met" if ratio <= TARGET else "MISSED"
    print(f"second / first run: {ratio:.2f} (target <= {TARGET}): {verdict}")
    return finish(
        {
            "benchmark": "compile_cache",
            "command": " ".join(["bandits-jax reproduce --quick --quiet --no-plots", *extra]),
            "runs": runs,
            "second_over_first": ratio,
            "target": TARGET,
            "met": ratio <= TARGET,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
