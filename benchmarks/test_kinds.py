"""Counts the suite's tests by kind, from their source (a heuristic, stated here).

    python -m benchmarks.test_kinds [--root DIR] [--json FILE]

Collects the suite (``pytest --collect-only -q`` in ``DIR``, default this checkout), so a
parametrized test counts once per case, then reads each test function's source and gives it the
first kind whose words it contains:

1. ``reference``: numbers against an independent computation: a numpy reference
   (``references``, ``Numpy...``), dense or generic linear algebra (``np.linalg``,
   ``scipy``, ``dense_``), a brute force, a closed form, or the float32-against-float64 cases;
2. ``statistical``: regret or accuracy over seeds or trials against a baseline or a bound;
3. ``validation``: bad input refused (``pytest.raises``, ``ValueError``, exit status 2);
4. ``plumbing``: everything else (protocol, shapes, dtypes, files, bars, caches, threads).

The kinds are keywords, not a reading of each test: use it to compare two checkouts, not to
judge one test.
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import pathlib
import re
import subprocess
import sys

KINDS = {
    "reference": re.compile(
        r"reference|_numpy|Numpy|np\.linalg|scipy|dense_|brute|closed.form|precision_cases"
        r"|float64_run|xla_defaults",
    ),
    "statistical": re.compile(
        r"sublinear|over_seeds|seeds.*mean|statistic|accuracy|_beats_|_learns|standard.error"
    ),
    "validation": re.compile(r"pytest\.raises|ValueError|returncode == 2|exit status"),
}


def _functions(path: pathlib.Path) -> dict[str, str]:
    """``{name: source}`` of every test function in a file (methods as ``Class::name``)."""
    text = path.read_text()
    tree = ast.parse(text)
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name.startswith("test"):
                    out[f"{node.name}::{item.name}"] = ast.get_source_segment(text, item) or ""
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            out.setdefault(node.name, ast.get_source_segment(text, node) or "")
    return out


def kind_of(source: str) -> str:
    for kind, pattern in KINDS.items():
        if pattern.search(source):
            return kind
    return "plumbing"


def count(root: pathlib.Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-o", "addopts=", "--import-mode=importlib",
         "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=root, capture_output=True, text=True, check=True,
    )  # fmt: skip
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    sources: dict[str, dict[str, str]] = {}
    kinds: collections.Counter = collections.Counter()
    by_file: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for node in ids:
        file, _, name = node.partition("::")
        name = name.split("[", 1)[0]
        if file not in sources:
            sources[file] = _functions(root / file)
        kind = kind_of(sources[file].get(name, ""))
        kinds[kind] += 1
        by_file[file][kind] += 1
    return {
        "total": len(ids),
        "kinds": dict(kinds),
        "by_file": {f: dict(c) for f, c in by_file.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=pathlib.Path, default=pathlib.Path.cwd())
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args(argv)
    result = count(args.root.resolve())
    print(
        f"{result['total']} tests:",
        ", ".join(f"{k} {v}" for k, v in sorted(result["kinds"].items())),
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
