"""The library stands apart from the command: no library module imports the command's package
(its tables, plotting, process settings), matplotlib or JAX's private modules, and none touches
the process (environment variables, CPU affinity, ``/proc``, context variables, JAX's config).

Two checks: the static import graph of every library module, function-level imports included
(relative ones resolved), and a fresh process that imports every library package and finds its
environment, affinity and ``sys.modules`` as a library user expects."""

import ast
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bandits_jax"
COMMAND = "bandits_jax.cli"
FORBIDDEN = (COMMAND, "matplotlib", "jax._src", "threadpoolctl", "psutil")
# What a module must not do to the process, as source patterns.
TOUCHES = {
    "sets an environment variable": r"os\.environ\s*\[[^\]]*\]\s*=|os\.environ\.(update|setdefault"
    r"|pop)\(|os\.putenv\(|del\s+os\.environ",
    "changes CPU affinity": r"sched_setaffinity",
    "reads /proc": r"/proc/",
    "keeps context-variable configuration": r"\bcontextvars\b",
    "sets JAX's configuration": r"jax\.config\.update\(",
}
# The one exception: a function a user calls on purpose to start a multi-process run
# (jax.distributed.initialize needs CPU collectives switched on first).
ALLOWED = {("bandits_jax/sim/distributed.py", "sets JAX's configuration")}


def library_modules() -> list[pathlib.Path]:
    return sorted(
        p
        for p in PACKAGE.rglob("*.py")
        if "cli" not in p.relative_to(PACKAGE).parts and p.name != "__main__.py"
    )


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: pathlib.Path, name: str | None = None) -> set[str]:
    """Every module ``path`` (module ``name``, default from its place in the package) imports,
    at any depth of its code, relative imports resolved."""
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)  # a submodule imported by name
    return out


def test_the_walk_sees_the_command_and_relative_imports(tmp_path):
    """The checker itself can fail: it finds a function-level relative import of the command."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from ..cli import process\n    return process\n")
    assert "bandits_jax.cli.process" in imports_of(probe, "bandits_jax.sim.probe")
    assert any(p.name == "chunks.py" for p in library_modules())
    assert not any("cli" in p.parts for p in library_modules())


@pytest.mark.parametrize("path", library_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_library_module_imports_no_command_and_touches_no_process(path):
    found = imports_of(path)
    bad = sorted(m for m in found if any(m == f or m.startswith(f"{f}.") for f in FORBIDDEN))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"
    text = path.read_text()
    rel = str(path.relative_to(ROOT))
    for what, pattern in TOUCHES.items():
        if (rel, what) not in ALLOWED:
            assert not re.search(pattern, text), f"{rel} {what}"


PROBE = """
import json, os, sys
before = (dict(os.environ), sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
          else None)
import bandits_jax, bandits_jax.bco, bandits_jax.envs, bandits_jax.linalg, bandits_jax.mlogb
import bandits_jax.sim, references.mlogb_numpy
import jax.numpy as jnp
jnp.ones(2).block_until_ready()
after = (dict(os.environ), sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
         else None)
print(json.dumps({
    "env_same": before[0] == after[0], "affinity_same": before[1] == after[1],
    "loaded": sorted(m for m in sys.modules
                     if m.startswith("bandits_jax.cli") or m.startswith("matplotlib")),
}))
"""


def test_importing_the_library_leaves_the_process_as_it_was():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"env_same": True, "affinity_same": True, "loaded": []}
