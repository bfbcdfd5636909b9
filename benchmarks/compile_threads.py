"""Compiling ahead on every idle core against one: cold ``bandits-jax reproduce --quick`` runs.

Run as ``python -m benchmarks.compile_threads`` (``--repeats N``, default 3; ``--json PATH``,
e.g. ``docs/bench/compile_threads.json``). It takes a few minutes: 2 x N cold quick runs.

Method. Each run is a fresh subprocess of ``python -m bandits_jax reproduce --quick --quiet
--no-plots`` with a new, empty ``--compile-cache`` directory (nothing compiled yet) and a data
cache (``BANDITS_JAX_DATA``) shared by all runs. The two ways alternate, so a machine that gets
busier slows both:

* ``idle cores``: the command as a user runs it. Its learners' programs compile before any trial,
  one thread per idle core (``sim.chunks.compile_ahead``);
* ``one core``: the same command confined to one core (``os.sched_setaffinity`` before it
  starts), so its programs compile one after another. Its trials run on one core either way.

Reported per run and as medians with their range: the wall time, the wall seconds spent
compiling the learners' programs and the compile threads (``reproduce.json``); then the median
idle-cores / one-core ratios of both.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import tempfile

from benchmarks._report import finish, run_command

WAYS = ("idle cores", "one core")


def _run(root: pathlib.Path, name: str, data: pathlib.Path, cores) -> dict:
    out, cache = root / f"out-{name}", root / f"xla-{name}"
    cmd = ["reproduce", "--quick", "--quiet", "--no-plots", "--out", str(out)]
    wall, _ = run_command([*cmd, "--compile-cache", str(cache)], data, cores=cores)
    report = json.loads((out / "reproduce.json").read_text())
    return {
        "wall_s": wall,
        "compile_wall_s": report["compile_wall_seconds"],
        "compile_threads": report["compile_threads"],
    }


def _spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repeats", type=int, default=3, help="runs of each way (default 3)")
    p.add_argument("--json", default=None, help="write the figures here")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error(f"--repeats: expected an int >= 1, got {args.repeats}")
    if not hasattr(os, "sched_setaffinity"):
        p.error("needs os.sched_setaffinity (Linux)")
    one = {min(os.sched_getaffinity(0))}

    runs: dict[str, list[dict]] = {w: [] for w in WAYS}
    with tempfile.TemporaryDirectory(prefix="bandits-jax-compile-threads-") as tmp:
        root = pathlib.Path(tmp)
        data = root / "data"
        data.mkdir()
        for i in range(args.repeats):
            for way in WAYS:
                cores = None if way == WAYS[0] else one
                r = _run(root, f"{i}-{way.replace(' ', '-')}", data, cores)
                runs[way].append(r)
                print(
                    f"{way:>10}, run {i + 1}: {r['wall_s']:6.1f} s wall, "
                    f"{r['compile_wall_s']:5.1f} s compiling on {r['compile_threads']} thread(s)",
                    flush=True,
                )
    summary = {
        w: {k: _spread([r[k] for r in rs]) for k in ("wall_s", "compile_wall_s")}
        for w, rs in runs.items()
    }
    ratios = {
        k: summary[WAYS[0]][k]["median"] / summary[WAYS[1]][k]["median"]
        for k in ("wall_s", "compile_wall_s")
    }
    for w, s in summary.items():
        c, t = s["compile_wall_s"], s["wall_s"]
        print(
            f"{w:>10}: compiling {c['median']:.1f} s ({c['min']:.1f}-{c['max']:.1f}) of "
            f"{t['median']:.1f} s wall ({t['min']:.1f}-{t['max']:.1f}), medians (range)"
        )
    print(
        f"idle cores / one core: compiling {ratios['compile_wall_s']:.2f}, "
        f"wall {ratios['wall_s']:.2f}"
    )
    return finish(
        {
            "benchmark": "compile_threads",
            "command": "bandits-jax reproduce --quick --quiet --no-plots",
            "repeats": args.repeats,
            "runs": runs,
            "summary": summary,
            "idle_over_one_core": ratios,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
