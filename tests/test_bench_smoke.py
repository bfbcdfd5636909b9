"""Every benchmark script runs: each script under ``benchmarks/`` once, as a
user runs it (``python -m benchmarks.NAME`` in a subprocess, in the checkout's root), at its
smallest sizes, writing its JSON; the test checks the top-level keys that the docs (docs/*.md,
README.md, CONTRIBUTING.md) cite its figures from. The subprocesses inherit the suite's
fast-compile ``XLA_FLAGS`` (tests/conftest.py): these tests check that the scripts run and
write what the docs read, not their figures. They take minutes (marker ``long``): CI runs them
after the default suite.

Where the other scripts run:

- ``mlogb_speed`` and ``bco_speed``: ``bandits-jax bench --quick`` runs both with ``--quick``
  (:func:`test_bench_quick`), so they run only there;
- ``batched_throughput``: tests/test_bench_batched.py (a tiny run, its JSON checked in detail).

The scripts' own subprocesses (``compile_cache``, ``xla_opt_level``, ``host_devices``,
``compile_seconds``, ``cpu_threads``, ``test_kinds``) run too, at one small cell each.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
TIMEOUT_S = 300
# One small reproduction cell for the scripts that time ``bandits-jax reproduce`` runs.
SMALL_REPRODUCE = (
    "reproduce --quick --settings synth-20-1-S8 --learners linucb --rounds 20 --trials 2"
)

# name -> (arguments, "{json}" standing for the JSON path; top-level keys the docs cite)
SMOKE: dict[str, tuple[list[str], tuple[str, ...]]] = {
    # docs/bco.md: regret vs d and vs V_T, the same studies as `bandits-jax bco`
    "bco_dimension": (
        ["--quick", "--rounds", "50", "--trials", "2", "--dims", "5",
         "--learners", "alg1_thm3,alg1_thm2", "--json", "{json}"],
        ("config", "dimension", "variation"),
    ),
    # docs/recipes.md: the variants' final regret per problem and the across-problems scores
    "buffered_forms": (
        ["--settings", "synth-30-1-S1", "--trials", "1", "--rounds", "20",
         "--summaries", "gradient", "--sketches", "section4", "--out", "{json}"],
        ("rounds", "trials", "settings", "across_scores"),
    ),
    # docs/command.md: wall and compile seconds of the cold and warm runs, cache hits
    "compile_cache": (["--quick", "--json", "{json}"], ("runs", "second_over_first", "met")),
    # docs/command.md: compile seconds of every case's programs
    "compile_seconds": (
        ["--cases", "mlogb:uniform:K1:d20", "--dtypes", "float32", "--repeats", "1",
         "--out", "{json}"],
        ("rounds", "repeats", "cases"),
    ),
    # docs/benchmarks.md: ms per round under each thread configuration, quiet and busy
    "cpu_threads": (
        ["--quick", "--configs", "xla-default", "--cases", "oful-400-1", "--repeats", "1",
         "--json", "{json}"],
        ("rows", "ratios"),
    ),
    # docs/eofd.md: eigh against the secular solver, one and vmapped, per core size
    "eigh_batch": (["--batch", "2", "--repeats", "1", "--json", "{json}"], ("dtype", "rows")),
    # docs/benchmarks.md: the exact fit against LinUCB and OFUL on digits class 1
    "exact_fit_check": (["--rounds", "20", "--seeds", "2", "--json", "{json}"], ("rounds", "rows")),
    # docs/benchmarks.md: the library's LAPACK calls against plain batched ones, per arm
    "lapack_batching": (["--quick", "--json", "{json}"], ("rounds", "trials", "arms", "cases")),
    # docs/eofd.md: fast FD against per-round FD (0.69x), rho, and EOFD with each rule
    "fast_fd": (
        ["--quick", "--json", "{json}"],
        ("D", "m", "fast_fd_ms_per_round", "per_round_fd_ms_per_round", "speedup", "rho_fast",
         "rho_per_round", "eofd"),
    ),
    # docs/evidence.md: every kind's final regret, growth, rho and Delta per stream
    "heavy_tail": (
        ["--dim", "10", "--rounds", "20", "--trials", "2", "--streams", "heavy-a1",
         "--kinds", "eofd", "--out", "{json}"],
        ("dim", "rounds", "trials", "sketch_size", "streams"),
    ),
    # docs/sweeps.md: wall time per device count, largest difference of the CSV numbers
    "host_devices": (
        ["--command", SMALL_REPRODUCE, "--devices", "1,2", "--repeats", "1", "--json", "{json}"],
        ("command", "device_counts", "figures"),
    ),
    # docs/recipes.md: LinUCB with and without its intercept against the numpy standard one
    "linucb_standard": (
        ["--quick", "--json", "{json}"], ("config", "learners", "ratio_to_standard", "checks")
    ),
    # docs/digits.md: per class and recipe the estimate along a run; the mean over classes
    "mlogb_digits": (
        ["--rounds", "20", "--targets", "1", "--json", "{json}"], ("rounds", "summary", "rows")
    ),
    # docs/digits.md: each variant's final regret mean, se, median, p90
    "mlogb_digits_causes": (
        ["--quick", "--rounds", "20", "--json", "{json}"], ("rounds", "runs", "rows")
    ),
    # docs/evidence.md: every setting's cells (recipe and tuned), penalties and goals
    "mlogb_evidence": (
        ["--quick", "--settings", "synth-20-1-S8", "--learners", "linucb", "--json", "{json}"],
        ("rounds", "trials", "grid", "settings"),
    ),
    # docs/benchmarks.md: where a round spends its time, kernel by kernel
    "mlogb_kernels": (
        ["--case", "10,1,4", "--rounds", "2", "--repeats", "1", "--top", "3", "--json", "{json}"],
        ("rounds", "cases"),
    ),
    # docs/benchmarks.md: update time vs D, its slope and intercept
    "mlogb_profile": (
        ["--quick", "--json", "{json}"],
        ("dims", "update_ms", "slope_ms_per_1000_dims", "intercept_ms"),
    ),
    # docs/evidence.md (issue 45): per setting and draw the paired comparisons, the decision
    "paired_evidence": (["--quick", "--json", "{json}"], ("commands", "settings", "decision")),
    # docs/digits.md: the recipe's lock rounds, projected fraction, per-run causes
    "tracking_causes": (
        ["--rounds", "40", "--seeds", "1", "--every", "20", "--out", "{json}"],
        ("recipe", "summary_all", "summary_in_lock", "summary_outside_lock",
         "projected_fraction", "runs"),
    ),
    # docs/digits.md: the tuning, the chosen point, K = 1 and K = 4 rows, the cost profile
    "tracking_check": (
        ["--quick", "--rounds", "20", "--profile-rounds", "16", "--out", "{json}"],
        ("rounds", "seeds", "tuning", "chosen", "k1", "k4", "profile"),
    ),
    # the Thompson-sampling rows against LinUCB
    "ts_check": (
        ["--rounds", "20", "--seeds", "2", "--problems", "synthetic", "--out", "{json}"],
        ("rounds", "seeds", "wall_seconds", "rows"),
    ),
    # docs/command.md: wall and compile seconds per configuration, results within rounding
    "xla_opt_level": (
        ["--quick", "--levels", "default:off", "--json", "{json}"],
        ("levels", "totals", "max_relative_regret_difference", "per_cell"),
    ),
}  # fmt: skip
# Scripts with a test of their own below, or elsewhere (module docstring).
OWN_TESTS = {"test_kinds", "package_lines", "mlogb_speed", "bco_speed", "batched_throughput"}


def _run(argv: list[str], timeout: float = TIMEOUT_S, cwd: pathlib.Path = ROOT):
    proc = subprocess.run(
        [sys.executable, *argv],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"{argv}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return proc


def test_every_benchmark_script_has_a_smoke_test():
    """A new script under ``benchmarks/`` gets an entry in :data:`SMOKE` (or a test of its own)."""
    scripts = {p.stem for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_")}
    missing = scripts - set(SMOKE) - OWN_TESTS
    assert not missing, f"benchmarks without a smoke test (add them to SMOKE): {sorted(missing)}"
    assert not (set(SMOKE) | OWN_TESTS) - scripts, "SMOKE names a script that is gone"


@pytest.mark.long
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMOKE))
def test_benchmark_runs_and_writes_the_cited_keys(name, tmp_path):
    args, keys = SMOKE[name]
    out = tmp_path / f"{name}.json"
    _run(["-m", f"benchmarks.{name}", *(a.replace("{json}", str(out)) for a in args)])
    data = json.loads(out.read_text())
    assert set(keys) <= set(data), f"{name}: missing {sorted(set(keys) - set(data))}"


@pytest.mark.long
@pytest.mark.slow
def test_test_kinds(tmp_path):
    """``benchmarks.test_kinds`` (CONTRIBUTING.md: the tests counted by kind) on a tiny suite of
    its own (``--root``): one reference test, a validation test of two cases, one plumbing."""
    suite = tmp_path / "suite"
    (suite / "tests").mkdir(parents=True)
    (suite / "tests" / "test_tiny.py").write_text(
        "import numpy as np\nimport pytest\n\n\n"
        "def test_norm():\n    assert np.linalg.norm([3.0, 4.0]) == 5.0\n\n\n"
        '@pytest.mark.parametrize("text", ["a", "b"])\n'
        "def test_refused(text):\n    with pytest.raises(ValueError):\n        int(text)\n\n\n"
        "def test_plain():\n    assert True\n"
    )
    out = tmp_path / "kinds.json"
    _run(["-m", "benchmarks.test_kinds", "--root", str(suite), "--json", str(out)])
    data = json.loads(out.read_text())
    assert data["total"] == 4
    assert data["kinds"] == {"reference": 1, "validation": 2, "plumbing": 1}
    assert data["by_file"] == {"tests/test_tiny.py": data["kinds"]}


def test_package_lines():
    """``benchmarks.package_lines`` (no options, no JSON): prints its counts as a dict."""
    proc = _run(["-m", "benchmarks.package_lines", str(ROOT)])
    counts = ast.literal_eval(proc.stdout.strip())
    assert {"library_lines", "command_lines", "layers", "all", "all_total"} <= set(counts)
    assert counts["library_lines"] > 0 and counts["all_total"] == sum(counts["all"].values())
    package = sum(n for k, n in counts["layers"].items() if k.startswith("bandits_jax"))
    assert package == counts["library_lines"] + counts["command_lines"]


@pytest.mark.long
@pytest.mark.slow
def test_bench_quick(tmp_path):
    """``bandits-jax bench --quick`` (README.md, docs/command.md) runs ``benchmarks.mlogb_speed``
    and ``benchmarks.bco_speed`` with ``--quick`` and collects their cases: both JSON files with
    the keys docs/benchmarks.md and docs/bco.md cite, the CSV, the figures and the summary."""
    out = tmp_path / "bench"
    _run(["-m", "bandits_jax", "bench", "--quick", "--quiet", "--out", str(out)], timeout=900)
    for mod, keys in (("mlogb_speed", ("cases", "goals")), ("bco_speed", ("cases", "throughput"))):
        data = json.loads((out / f"bench_{mod}.json").read_text())
        assert set(keys) <= set(data), f"{mod}: missing {sorted(set(keys) - set(data))}"
        assert data["cases"], mod
        assert (out / f"bench_{mod}.png").is_file()
    assert {"dtypes", "target"} <= set(data["throughput"])  # bco_speed's d = 10 line
    rows = (out / "bench.csv").read_text().splitlines()
    assert rows[0].startswith("benchmark,") and len(rows) > 2
    assert "exit status" not in (out / "bench_summary.txt").read_text()
