"""Wall time of a batched command on one host device against one per core, and equal results.

Run as ``python -m benchmarks.host_devices`` (``--json PATH`` to write the figures, e.g.
``docs/bench/host_devices.json``). It takes several minutes: the command runs once per device
count per repeat.

Method. For every device count of ``--devices`` (default ``1,2``) and every repeat (interleaved,
so that a change in machine load hits every count), a fresh subprocess runs ``python -m
bandits_jax COMMAND --quiet --no-plots --devices N`` (``--command``, default ``kappa --quick``:
the command whose default is one device per idle core) with a new output directory and a new,
empty ``--compile-cache`` (every program compiles, as in a user's first run). Printed: the median
wall time per count with its min-max, each count's time over one device's, and whether the
largest relative difference of a number in the command's CSV tables (timings aside) from the
one-device run's (sharding splits the trials over devices; it changes numbers at most by
rounding).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import pathlib
import shlex
import statistics
import tempfile

from benchmarks._report import finish, run_command


def _run(command: list[str], devices: int, root: pathlib.Path) -> tuple[float, dict[str, str]]:
    out = root / "out"
    cmd = [*command, "--quiet", "--no-plots", "--devices", str(devices), "--out", str(out)]
    wall, _ = run_command([*cmd, "--compile-cache", str(root / "xla")], root / "data")
    return wall, {p.name: p.read_text() for p in sorted(out.glob("*.csv"))}


TIMING = ("ms_per_round", "compile_s", "seconds", "wall", "time")  # columns that are timings


def max_relative_difference(a: dict[str, str], b: dict[str, str]) -> float:
    """The largest relative difference between two runs' CSV tables over every numeric cell that
    is not a timing (``inf`` when the tables differ in files, rows, columns or a text cell)."""
    if a.keys() != b.keys():
        return math.inf
    worst = 0.0
    for name in a:
        ra, rb = (list(csv.DictReader(io.StringIO(x[name]))) for x in (a, b))
        if len(ra) != len(rb):
            return math.inf
        for x, y in zip(ra, rb, strict=True):
            if x.keys() != y.keys():
                return math.inf
            for col in x:
                if any(t in col for t in TIMING) or x[col] == y[col]:
                    continue
                try:
                    u, v = float(x[col]), float(y[col])
                except ValueError:
                    return math.inf
                worst = max(worst, abs(u - v) / max(abs(u), abs(v), 1e-300))
    return worst


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--json", default=None, help="write the figures here")
    p.add_argument("--command", default="kappa --quick", help="the bandits-jax command line")
    p.add_argument("--devices", default="1,2", help="host device counts to compare")
    p.add_argument("--repeats", type=int, default=2, help="runs per device count")
    args = p.parse_args(argv)
    command = shlex.split(args.command)
    counts = [int(n) for n in args.devices.split(",")]

    walls: dict[int, list[float]] = {n: [] for n in counts}
    tables: dict[int, dict[str, str]] = {}
    for rep in range(args.repeats):
        for n in counts:
            with tempfile.TemporaryDirectory(prefix="bandits-jax-devices-") as tmp:
                wall, csvs = _run(command, n, pathlib.Path(tmp))
            walls[n].append(wall)
            tables.setdefault(n, csvs)
            print(f"repeat {rep + 1}, --devices {n}: {wall:6.1f} s wall", flush=True)

    base = statistics.median(walls[counts[0]])
    figures = {}
    print(f"\nbandits-jax {args.command}, a fresh compile cache each run:")
    for n in counts:
        med = statistics.median(walls[n])
        diff = max_relative_difference(tables[counts[0]], tables[n])
        figures[str(n)] = {
            "wall_s": {"median": med, "min": min(walls[n]), "max": max(walls[n])},
            "over_first": med / base,
            "max_relative_difference": diff,
        }
        print(
            f"--devices {n}: {med:6.1f} s ({min(walls[n]):.1f}-{max(walls[n]):.1f}), "
            f"{med / base:.2f}x --devices {counts[0]}'s time; CSV numbers within {diff:.1e} "
            f"(relative, timings aside) of --devices {counts[0]}'s"
        )
    return finish(
        {
            "benchmark": "host_devices",
            "command": f"bandits-jax {args.command} --quiet --no-plots",
            "repeats": args.repeats,
            "device_counts": counts,
            "figures": figures,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
