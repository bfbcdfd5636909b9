"""``bench`` with stand-in benchmark scripts: cases collected into bench.csv, no ``nan`` cell."""

import csv
import json

from bandits_jax.cli import bench, main

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


def test_bench_needs_the_source_checkout(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "source_root", lambda: tmp_path)
    assert main(["bench", "--out", str(tmp_path / "out")]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and "source checkout" in err[0]
