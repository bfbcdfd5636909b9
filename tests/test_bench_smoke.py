"""The benchmark scripts: every one runs as a user runs it (``python -m benchmarks.NAME`` in a
subprocess, in the checkout's root) at its smallest sizes, writing the JSON keys the docs cite
(marker ``long``: CI runs them after the default suite; the subprocesses inherit the suite's
fast-compile ``XLA_FLAGS``, so these check that the scripts run, not their figures). Where the
other scripts run: ``mlogb_speed`` and ``bco_speed`` in ``bandits-jax bench --quick``
(:func:`test_bench_quick`); ``batched_throughput`` in tests/test_bench_batched.py.

And, quickly: at most eight scripts, each building its parser with the shared options
(``benchmarks/_options.py``) and listed in docs/benchmarks.md with its command and JSON; a doc
that cites a script that has left the tree gives the commit at which it last ran, and that commit
holds the script.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))
TIMEOUT_S = 300

# name -> (arguments, "{json}" standing for the JSON path; top-level keys the docs cite)
SMOKE: dict[str, tuple[list[str], tuple[str, ...]]] = {
    # docs/evidence.md: every setting's cells (recipe and tuned), penalties and goals
    "mlogb_evidence": (
        ["--quick", "--settings", "synth-20-1-S8", "--learners", "linucb", "--json", "{json}"],
        ("rounds", "trials", "grid", "settings", "commit"),
    ),
    # docs/evidence.md (issue 45): per setting and draw the paired comparisons, the decision
    "paired_evidence": (["--quick", "--json", "{json}"], ("commands", "settings", "decision")),
    # docs/command.md: compile seconds of every case's programs (--out: --json's other name)
    "compile_seconds": (
        ["--quick", "--dtypes", "float32", "--out", "{json}"], ("rounds", "repeats", "cases")
    ),
    # docs/benchmarks.md (issue 56): EOFD's time and memory a trial against K d, 64 trials
    "scale": (
        ["--quick", "--trials", "2", "--rounds", "1", "--repeats", "1", "--json", "{json}"],
        ("rows", "exponent_time", "exponent_memory"),
    ),
}  # fmt: skip
# Scripts with a test of their own (below, or the module docstring's).
OWN_TESTS = {"mlogb_speed", "bco_speed", "batched_throughput", "cold_start"}


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
    missing = set(SCRIPTS) - set(SMOKE) - OWN_TESTS
    assert not missing, f"benchmarks without a smoke test (add them to SMOKE): {sorted(missing)}"
    assert not (set(SMOKE) | OWN_TESTS) - set(SCRIPTS), "SMOKE names a script that is gone"


def test_at_most_eight_scripts_each_with_the_shared_parser():
    """The scripts build their parser with ``benchmarks._options.parser`` (the shared options
    declared once), never an ``argparse.ArgumentParser`` of their own."""
    assert 1 <= len(SCRIPTS) <= 8, SCRIPTS
    for name in SCRIPTS:
        tree = ast.parse((BENCHMARKS / f"{name}.py").read_text())
        imported = {
            (node.module, alias.name)
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
        calls = [n.func for n in ast.walk(tree) if isinstance(n, ast.Call)]
        own = [f for f in calls if isinstance(f, ast.Attribute) and f.attr == "ArgumentParser"]
        uses = [f for f in calls if isinstance(f, ast.Name) and f.id == "parser"]
        assert ("benchmarks._options", "parser") in imported and uses, name
        assert not own, f"{name}: declares its own ArgumentParser"


def test_every_script_is_in_benchmarks_md_with_its_command_and_json():
    """docs/benchmarks.md's table: a row per script with its command and a JSON path; a JSON
    named there that is not committed says so in the row ("none committed")."""
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    rows = {r.split("|")[1].strip().strip("`"): r for r in text.splitlines() if r.startswith("| `")}
    for name in SCRIPTS:
        row = rows.get(name)
        assert row, f"docs/benchmarks.md has no row for {name}"
        assert f"python -m benchmarks.{name}" in row, name
        paths = re.findall(r"docs/bench/[\w*]+\.json", row)
        assert paths, f"{name}: no JSON in its row"
        present = [p for p in paths if list(ROOT.glob(p))]
        assert present or "none committed" in row, (name, paths)


def _chunks(text: str):
    """The paragraphs, fenced blocks and table rows of a markdown text."""
    block, para = None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if block is None:
                yield "\n".join(para)
                para, block = [], [line]
            else:
                yield "\n".join([*block, line])
                block = None
        elif block is not None:
            block.append(line)
        elif line.startswith("|"):
            yield line
        elif line.strip():
            para.append(line)
        else:
            yield "\n".join(para)
            para = []
    yield "\n".join(para)


def _git(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *argv], capture_output=True, text=True)


def test_docs_give_the_commit_of_every_removed_script():
    """Wherever docs/*.md, README.md or CONTRIBUTING.md run a script that is no longer in
    ``benchmarks/``, its paragraph, block or table row gives the commit it last ran at
    (``git checkout SHA``, ``commit `SHA``` or a table's commit column) and, in a full git
    checkout, that commit holds the script (``git checkout SHA`` and the command reproduce the
    finding). docs/API.md is left out: it is written from the package's docstrings."""
    have_git = _git("rev-parse", "--is-shallow-repository").stdout.strip() == "false"
    cited = 0
    docs = [p for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "API.md"]
    docs += [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
    for doc in docs:
        for chunk in _chunks(doc.read_text()):
            flat = " ".join(chunk.split())
            gone = {n for n in re.findall(r"python -m benchmarks\.(\w+)", flat)}
            gone -= set(SCRIPTS)
            if not gone:
                continue
            # "git checkout SHA", "commit `SHA`", or a table's commit column "| `SHA` |"
            sha = r"([0-9a-f]{7,40})"
            shas = re.findall(rf"git checkout {sha}|commit `{sha}`|\| `{sha}` \|", flat)
            shas = {"".join(found) for found in shas}
            for name in gone:
                cited += 1
                assert shas, f"{doc.name}: {name} cited without its commit:\n{chunk}"
                if have_git:
                    held = [s for s in shas if _git("cat-file", "-e", f"{s}:benchmarks/{name}.py")
                            .returncode == 0]  # fmt: skip
                    assert held, f"{doc.name}: no commit of {sorted(shas)} holds {name}.py"
    assert cited  # the docs do cite removed scripts: the check ran


@pytest.mark.long
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMOKE))
def test_benchmark_runs_and_writes_the_cited_keys(name, tmp_path):
    args, keys = SMOKE[name]
    out = tmp_path / f"{name}.json"
    _run(["-m", f"benchmarks.{name}", *(a.replace("{json}", str(out)) for a in args)])
    data = json.loads(out.read_text())
    assert set(keys) <= set(data), f"{name}: missing {sorted(set(keys) - set(data))}"


@pytest.mark.slow
def test_every_script_takes_the_shared_options():
    """Each script's ``--help`` (its parser built, in one subprocess) lists ``--quick`` and
    ``--json``; a bad ``--repeats`` is refused by the shared type."""
    code = (
        "import contextlib, importlib, io, sys\n"
        "for name in sys.argv[1:]:\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "        importlib.import_module('benchmarks.' + name).main(['--help'])\n"
        "    print('@@', name, ' '.join(out.getvalue().split()))\n"
    )
    proc = _run(["-c", code, *SCRIPTS])
    helps = dict(line[3:].split(" ", 1) for line in proc.stdout.splitlines() if line[:3] == "@@ ")
    assert sorted(helps) == SCRIPTS
    for name, text in helps.items():
        assert "--quick" in text and "--json PATH" in text, name
    bad = subprocess.run(
        [sys.executable, "-m", "benchmarks.cold_start", "--repeats", "0"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
    )  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].endswith("expected a positive int, got '0'")


@pytest.mark.long
@pytest.mark.slow
def test_cold_start(tmp_path):
    """``benchmarks.cold_start --quick --repeats 2`` (one small cell of ``reproduce --quick``):
    two cold runs, each with a new cache (no cache hit), a warm run that reads the last one
    (hits), and the summary is the median of the cold runs' own figures."""
    out = tmp_path / "cold.json"
    _run(["-m", "benchmarks.cold_start", "--quick", "--repeats", "2", "--json", str(out)], 600)
    data = json.loads(out.read_text())
    cold, warm = data["cold"], data["warm"]
    assert [r["run"] for r in cold] == ["cold 1", "cold 2"] and warm["run"] == "warm"
    assert all(r["cache_hits"] == 0 and r["compilations"] > 0 for r in cold)
    assert warm["cache_hits"] > 0
    for r in [*cold, warm]:
        assert 0 < r["compile_wall_s"] < r["wall_s"]
        assert r["compile_share"] == pytest.approx(r["compile_wall_s"] / r["wall_s"], rel=1e-12)
    for key in ("wall_s", "compile_wall_s", "compile_share"):
        assert data[f"median_{key}" if key == "compile_share" else f"median_cold_{key}"] == (
            pytest.approx(statistics.median(r[key] for r in cold), rel=1e-12)
        )
    assert data["warm_over_cold"] == pytest.approx(warm["wall_s"] / data["median_cold_wall_s"])
    assert data["command"].startswith("bandits-jax reproduce --quick --settings synth-20-1-S8")


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
