"""Lines of the package, split into library and command (``bandits_jax/cli``, ``__main__``),
the lines of each layer (each subpackage, the package's own modules, and ``references/``,
``benchmarks/``, ``tests/`` beside it) and the length of each package's ``__all__``:
``python -m benchmarks.package_lines [ROOT]``."""

from __future__ import annotations

import ast
import pathlib
import sys


def counts(root: pathlib.Path) -> dict:
    pkg = root / "bandits_jax"
    lib = cmd = 0
    for p in pkg.rglob("*.py"):
        n = len(p.read_text().splitlines())
        rel = p.relative_to(pkg).parts
        if "cli" in rel or p.name in ("plotting.py", "__main__.py"):
            cmd += n
        else:
            lib += n
    public = {}
    for p in sorted(pkg.rglob("__init__.py")):
        for node in ast.parse(p.read_text()).body:
            if isinstance(node, ast.Assign) and any(
                getattr(t, "id", "") == "__all__" for t in node.targets
            ):
                public[str(p.relative_to(root))] = len(ast.literal_eval(node.value))
    layers: dict[str, int] = {}
    for top in ("bandits_jax", "references", "benchmarks", "tests"):
        for p in (root / top).rglob("*.py"):
            rel = p.relative_to(root).parts
            layer = "/".join(rel[:2]) if top == "bandits_jax" and len(rel) > 2 else top
            layers[layer] = layers.get(layer, 0) + len(p.read_text().splitlines())
    return {"library_lines": lib, "command_lines": cmd, "layers": dict(sorted(layers.items())),
            "all": public, "all_total": sum(public.values())}  # fmt: skip


if __name__ == "__main__":
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    print(counts(root))
