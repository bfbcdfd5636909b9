"""``bandits-jax bench``: the speed benchmarks ``benchmarks/mlogb_speed.py`` and
``benchmarks/bco_speed.py``, each in its own process; their cases are collected into ``bench.csv``
(one row per case, empty cells where a case has no value), with their JSON, a figure per benchmark
and a summary. The scripts live beside the package in a source checkout (``pip install`` installs
no ``benchmarks``): installed from a wheel, ``bench`` says so in one line (exit status 2)."""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import pathlib
import subprocess
import sys

from bandits_jax.cli import options as opt
from bandits_jax.cli import output, tables

BENCHMARKS = ("mlogb_speed", "bco_speed")


def add_arguments(b: argparse.ArgumentParser) -> None:
    """``bench`` has no options of its own (its shared ones: ``options.COMMAND_GROUPS``)."""


def source_root() -> pathlib.Path:
    """The directory holding ``bandits_jax/``: in a source checkout, ``benchmarks/`` is there."""
    return pathlib.Path(__file__).resolve().parent.parent.parent


def has_benchmarks(root: pathlib.Path) -> bool:
    """Whether ``benchmarks`` is importable from ``root`` (what ``python -m benchmarks.NAME`` run
    in ``root`` imports; an installed wheel has none)."""
    found = importlib.machinery.PathFinder.find_spec("benchmarks", [str(root)]) is not None
    return found and any((root / "benchmarks" / f"{m}.py").is_file() for m in BENCHMARKS)


NEEDS_CHECKOUT = (
    "bench: needs a source checkout: its scripts (benchmarks/) are not part of the installed "
    "package; clone the repository and run it from there after pip install -e ."
)


def validate(args: argparse.Namespace) -> None:
    """Checks every option of ``bench`` before any work (:class:`~.options.UsageError`), and that
    the benchmarks are there (:data:`NEEDS_CHECKOUT`)."""
    errors: list[str] = []
    opt.check_common(args, errors)
    if not has_benchmarks(source_root()):
        errors.append(NEEDS_CHECKOUT)
    opt.finish(errors, args)
    args.plan = {}


def run(args: argparse.Namespace) -> int:
    """Runs ``bench``: the speed benchmarks, their table and figure; returns the exit status."""
    from bandits_jax.cli import plotting

    out = pathlib.Path(args.out)
    root = source_root()
    written, texts, rows = [], [], []
    status = 0
    for mod in BENCHMARKS:
        if not (root / "benchmarks" / f"{mod}.py").is_file():
            texts.append(f"benchmarks.{mod}: not present, skipped\n")
            continue
        js = out / f"bench_{mod}.json"
        cmd = [sys.executable, "-m", f"benchmarks.{mod}", "--json", str(js.resolve())]
        if args.quick:
            cmd.append("--quick")
        if args.float32 and mod == "mlogb_speed":  # bco_speed is float64 only
            cmd.append("--float32")
        output.say(args, "$ " + " ".join(cmd))
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr[-4000:])
        texts.append(f"$ {' '.join(cmd)}\n{proc.stdout}")
        if proc.returncode != 0:
            texts.append(f"(exit status {proc.returncode})\n{proc.stderr[-4000:]}")
            status = 1
            continue
        written.append(js)
        try:
            cases = json.loads(js.read_text()).get("cases", [])
        except (OSError, ValueError):
            cases = []
        rows += tables.bench_rows(mod, cases)
        if cases and args.plots:
            png = out / f"bench_{mod}.png"
            plotting.bench_figure(cases, png)
            written.append(png)
    if rows:
        output.write_csv(out / "bench.csv", rows)
        written.append(out / "bench.csv")
        texts.append("All cases (- where a case has no value):\n" + output.format_table(rows))
    (out / "bench_summary.txt").write_text("\n".join(texts) + "\n")
    written.append(out / "bench_summary.txt")
    output.write_outputs(out, written)
    return status
