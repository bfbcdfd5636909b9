"""``bench`` with stand-in benchmark scripts: cases collected into bench.csv, no ``nan`` cell;
without the source checkout's ``benchmarks/`` (an installed wheel) one error line, exit 2."""

import csv
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from bandits_jax.cli import bench, build_parser, main

ROOT = pathlib.Path(__file__).resolve().parents[2]
FAKE = """
import argparse, json
p = argparse.ArgumentParser()
p.add_argument("--json"); p.add_argument("--quick", action="store_true")
p.add_argument("--float32", action="store_true")
a = p.parse_args()
cases = [{"learner": "EOFD", "d": 4, "jax_s": 1e-4, "numpy_s": float("nan")},
         {"learner": "OFUL", "d": 4, "jax_s": 2e-4}]
json.dump({"cases": cases}, open(a.json, "w"))
print("fake benchmark ran")
"""


def test_bench_writes_csv_without_nan(tmp_path, monkeypatch, capsys):
    root = tmp_path / "src"
    (root / "benchmarks").mkdir(parents=True)
    (root / "benchmarks" / "__init__.py").write_text("")
    (root / "benchmarks" / "mlogb_speed.py").write_text(FAKE)  # bco_speed absent: skipped
    monkeypatch.setattr(bench, "source_root", lambda: root)
    out = tmp_path / "out"
    assert main(["bench", "--quick", "--no-plots", "--out", str(out), "--quiet"]) == 0
    with open(out / "bench.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["learner"] for r in rows] == ["EOFD", "OFUL"]
    assert rows[0]["numpy_s"] == "" and rows[1]["numpy_s"] == ""  # missing: empty, not nan
    assert rows[0]["benchmark"] == "mlogb_speed"
    assert json.loads((out / "bench_mlogb_speed.json").read_text())["cases"][0]["d"] == 4
    summary = (out / "bench_summary.txt").read_text()
    assert "bco_speed: not present, skipped" in summary and "nan" not in summary.lower()
    assert "fake benchmark ran" in capsys.readouterr().out


@pytest.mark.parametrize("layout", ["nothing", "other benchmarks package"])
def test_bench_needs_the_source_checkout(tmp_path, monkeypatch, capsys, layout):
    if layout != "nothing":  # a top-level ``benchmarks`` of another distribution is not ours
        (tmp_path / "benchmarks").mkdir()
        (tmp_path / "benchmarks" / "__init__.py").write_text("")
    monkeypatch.setattr(bench, "source_root", lambda: tmp_path)
    assert main(["bench", "--out", str(tmp_path / "out")]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert err == [f"bandits-jax: error: {bench.NEEDS_CHECKOUT}"]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_bench_from_an_installed_package_is_one_line(tmp_path):
    """The package alone, as a wheel installs it (no ``benchmarks/`` or ``references/`` beside
    it), imported first from ``PYTHONPATH`` in a fresh process run elsewhere: ``bench`` exits 2
    with one line on stderr, no traceback, and writes nothing."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "bandits_jax", site / "bandits_jax",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    work = tmp_path / "work"
    work.mkdir()
    code = "import bandits_jax, sys; from bandits_jax.cli import main; "
    code += "print(bandits_jax.__file__); sys.exit(main(sys.argv[1:]))"
    argv = ["bench", "--quick", "--out", str(work / "results")]
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert proc.stdout.strip() == str(site / "bandits_jax" / "__init__.py")  # the copy ran
    assert proc.returncode == 2, proc.stderr
    err = [x for x in proc.stderr.splitlines() if x.strip()]
    assert err == [f"bandits-jax: error: {bench.NEEDS_CHECKOUT}"], proc.stderr
    assert not (work / "results").exists()


def test_bench_help_says_the_scripts_are_not_installed(capsys):
    """The command's help names the benchmark modules only beside "source checkout" and that pip
    does not install them."""
    parser = build_parser()
    for text in (parser.format_help(), parser.subcommands["bench"].format_help()):
        flat = " ".join(text.split())
        assert "source checkout" in flat and "pip" in flat, text
