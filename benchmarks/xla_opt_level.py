"""Compile time against run time under XLA's CPU compile options, for the command's runs.

Run as ``python -m benchmarks.xla_opt_level`` (``--json PATH`` to write the figures, e.g.
``docs/bench/xla_opt_level.json``). It takes several minutes: each configuration runs
``bandits-jax reproduce`` cold once per repeat. ``--quick`` narrows each run to one small cell
(:data:`QUICK_ARGS`: one setting, one learner, T = 20, 2 trials) and one repeat: a check that the
benchmark runs, not the figure.

Method. A configuration ``LEVEL:EMITTERS[:SPLIT]`` is the command's ``--xla-opt-level LEVEL``
(``default``: XLA's own; ``0``: LLVM's ``-O0``), ``--xla-fusion-emitters EMITTERS`` (``on``:
XLA's MLIR-based fusion emitters, its default; ``off``: its classic LLVM IR emitters) and
``--xla-codegen-split SPLIT`` (``default``, when omitted: XLA's own; ``auto``: one part per
core the process may use, one under the command's default threads). For every
configuration and every repeat, a fresh subprocess runs ``python -m
bandits_jax reproduce --quiet --no-plots`` with a new, empty ``--compile-cache`` directory (so
every program compiles) and the given ``--quick`` or ``--rounds/--trials``. From the run's
``reproduce.csv`` it takes each (setting, learner)'s ``compile_s`` (its programs' ahead-of-time
compilation, several at once, so they overlap) and ``ms_per_round_mean`` (the compiled chunks
alone), from ``reproduce.json`` the wall seconds spent compiling; the wall time is the
subprocess's. Printed: per (setting, learner) the median compile seconds and ms per round under
each configuration; per configuration the median wall time, compile wall seconds and summed
run seconds (ms per round x rounds x trials), with min-max over repeats, and the largest
relative difference of a cell's final regret from the first configuration's.
"""

from __future__ import annotations

import argparse
import csv
import os
import pathlib
import statistics
import tempfile

from benchmarks._device import add_device_option
from benchmarks._report import finish, reproduce_compile_wall, run_command

# --quick: the reproduction's arguments for one small cell
QUICK_ARGS = ["--settings", "synth-20-1-S8", "--learners", "linucb", "--rounds", "20",
              "--trials", "2"]  # fmt: skip


def _run(config: str, root: pathlib.Path, extra: list[str]) -> tuple[float, float, list[dict]]:
    out, cache = root / "out", root / "xla"
    parts = config.split(":")
    level, emitters, split = parts[0], (parts[1:2] or ["on"])[0], (parts[2:3] or ["default"])[0]
    cmd = ["reproduce", "--quiet", "--no-plots", "--out", str(out), "--compile-cache", str(cache)]
    cmd += ["--xla-opt-level", level, "--xla-fusion-emitters", emitters]
    cmd += ["--xla-codegen-split", split, *extra]
    wall, _ = run_command(cmd, root / "data")
    with open(out / "reproduce.csv", newline="") as f:
        return wall, reproduce_compile_wall(out), list(csv.DictReader(f))


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):7.1f} ({min(xs):.1f}-{max(xs):.1f})"


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--json", default=None, help="write the figures here")
    p.add_argument(
        "--levels",
        default="default:on,0:on,default:off,0:off,default:off:auto,0:off:auto",
        help="configurations LEVEL:EMITTERS[:SPLIT] to compare (LEVEL: default,0,1,2,3; "
        "EMITTERS: on, off; SPLIT: default, auto or N, default when omitted)",
    )
    p.add_argument("--repeats", type=int, default=None, help="cold runs per configuration (2)")
    p.add_argument("--rounds", type=int, default=None, help="T (default: --quick's 200)")
    p.add_argument("--trials", type=int, default=None, help="trials (default: --quick's 4)")
    p.add_argument("--quick", action="store_true", help="one small cell, one repeat")
    add_device_option(p)
    args = p.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.quick else 2
    extra = ["--quick", *(QUICK_ARGS if args.quick else [])]
    if args.rounds is not None:
        extra += ["--rounds", str(args.rounds)]
    if args.trials is not None:
        extra += ["--trials", str(args.trials)]
    if args.threads is not None:
        extra += ["--threads", str(args.threads)]
    if args.device != "auto":
        os.environ["JAX_PLATFORMS"] = {"cpu": "cpu", "gpu": "cuda"}[args.device]
    levels = args.levels.split(",")

    runs: dict[str, list[dict]] = {lv: [] for lv in levels}
    for rep in range(args.repeats):
        for lv in levels:  # interleaved: a change in machine load hits every configuration
            with tempfile.TemporaryDirectory(prefix="bandits-jax-opt-level-") as tmp:
                wall, compile_s, rows = _run(lv, pathlib.Path(tmp), extra)
            run_s = sum(
                float(r["ms_per_round_mean"]) * int(r["rounds"]) * int(r["trials"]) / 1e3
                for r in rows
            )
            runs[lv].append({"wall_s": wall, "compile_s": compile_s, "run_s": run_s, "rows": rows})
            print(
                f"repeat {rep + 1}, {lv}: {wall:6.1f} s wall, {compile_s:6.1f} s compiling "
                f"the learners' programs, {run_s:6.1f} s running them",
                flush=True,
            )

    cells = [(r["setting"], r["learner"]) for r in runs[levels[0]][0]["rows"]]
    per_cell = {}
    head = "".join(f" {'compile s':>10s} {'ms/round':>9s}" for _ in levels)
    print(f"\n{'setting':22s} {'learner':14s}{head}   (configurations {', '.join(levels)})")
    for i, (setting, learner) in enumerate(cells):
        fig = {}
        for lv in levels:
            fig[lv] = {
                "compile_s": statistics.median(float(r["rows"][i]["compile_s"]) for r in runs[lv]),
                "ms_per_round": statistics.median(
                    float(r["rows"][i]["ms_per_round_mean"]) for r in runs[lv]
                ),
                "final_regret_mean": float(runs[lv][0]["rows"][i]["final_regret_mean"]),
            }
        per_cell[f"{setting} / {learner}"] = fig
        cols = "".join(
            f" {fig[lv]['compile_s']:10.2f} {fig[lv]['ms_per_round']:9.3f}" for lv in levels
        )
        print(f"{setting:22s} {learner:14s}{cols}")
    # The options change how fast a program compiles and runs, not what it computes: the largest
    # relative difference of a cell's mean final regret from the first configuration's.
    regret_diff = {
        lv: max(
            abs(f[lv]["final_regret_mean"] - f[levels[0]]["final_regret_mean"])
            / max(abs(f[levels[0]]["final_regret_mean"]), 1e-300)
            for f in per_cell.values()
        )
        for lv in levels
    }
    totals = {}
    print()
    for lv in levels:
        t = {k: [r[k] for r in runs[lv]] for k in ("wall_s", "compile_s", "run_s")}
        totals[lv] = {
            k: {"median": statistics.median(v), "min": min(v), "max": max(v)} for k, v in t.items()
        }
        print(
            f"{lv:10s}: wall {_spread(t['wall_s'])} s, compile {_spread(t['compile_s'])} s,"
            f" run {_spread(t['run_s'])} s  (median, min-max over {args.repeats}); final regret"
            f" within {regret_diff[lv]:.1e} (relative) of {levels[0]}'s"
        )
    return finish(
        {
            "benchmark": "xla_opt_level",
            "command": "bandits-jax reproduce --quiet --no-plots " + " ".join(extra),
            "repeats": args.repeats,
            "levels": levels,
            "totals": totals,
            "max_relative_regret_difference": regret_diff,
            "per_cell": per_cell,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
