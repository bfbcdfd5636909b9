"""README's python code blocks run as written (in order, in one namespace), as a reader's
program runs them: in a fresh process without the suite's x64 and ``XLA_FLAGS`` (float32, XLA's
own options)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

# Runs in the child: the blocks, then what a reader would look at.
_RUN = """
import json, re, sys
import numpy as np
blocks = re.findall(r"```python\\n(.*?)```", open(sys.argv[1]).read(), flags=re.S)
assert len(blocks) >= 2, len(blocks)
ns = {}
for i, block in enumerate(blocks):
    try:
        exec(compile(block, f"README.md python block {i}", "exec"), ns)
    except Exception as exc:
        raise AssertionError(f"README python block {i} failed: {exc!r}") from exc
import jax
print(json.dumps({
    "x64": bool(jax.config.jax_enable_x64),
    "loss_dtype": str(ns["grid_metrics"].loss.dtype),
    "grid_shape": list(ns["grid_metrics"].loss.shape),
    "T": ns["T"],
    "finite": bool(np.all(np.isfinite(np.asarray(ns["grid_metrics"].loss)))),
}))
"""


@pytest.mark.slow
def test_readme_python_blocks_run_as_a_readers_program():
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_ENABLE_X64")}
    proc = subprocess.run(
        [sys.executable, "-c", _RUN, str(README)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["x64"] is False and got["loss_dtype"] == "float32"
    assert got["grid_shape"] == [3, 4, got["T"]] and got["finite"]
