"""What every benchmark records about the machine, and how it writes its JSON."""

from __future__ import annotations

import functools
import json
import os
import pathlib
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Collection

import jax


def run_command(
    args: list[str], data: pathlib.Path, cores: Collection[int] | None = None, **env: str
) -> tuple[float, str]:
    """Runs ``python -m bandits_jax ARGS`` in a fresh subprocess with the data root ``data`` and
    the extra environment ``env`` (on ``cores`` only, if given); returns its wall seconds and
    stderr.

    Raises:
      RuntimeError: with the command and the tail of its stderr when it fails.
    """
    cmd = [sys.executable, "-m", "bandits_jax", *args]
    full_env = {**os.environ, "BANDITS_JAX_DATA": str(data), **env}
    t0 = time.perf_counter()
    pin = None if cores is None else functools.partial(os.sched_setaffinity, 0, set(cores))
    proc = subprocess.run(
        cmd, env=full_env, capture_output=True, text=True, check=False, preexec_fn=pin
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, proc.stderr


def reproduce_compile_wall(out: pathlib.Path) -> float:
    """Wall seconds a ``reproduce`` run (output directory ``out``) spent compiling its learners'
    programs: ``compile_wall_seconds`` in ``reproduce.json`` (the programs compile several at
    once, so the table's per-learner ``compile_s`` overlap and sum to more)."""
    return float(json.loads((out / "reproduce.json").read_text())["compile_wall_seconds"])


def commit() -> str | None:
    """The checkout's commit (``git describe --always --dirty``: ``-dirty`` with uncommitted
    changes), ``None`` outside a git checkout: the docs cite a figure with the commit it ran at."""
    root = pathlib.Path(__file__).resolve().parents[1]
    try:
        proc = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"],
                              capture_output=True, text=True, check=False)  # fmt: skip
    except OSError:  # no git
        return None
    return proc.stdout.strip() or None


def finish(result: dict, json_path: str | None) -> dict:
    """Adds the commit, backend, devices, CPU count, machine and JAX version; writes JSON if
    asked."""
    result = {
        **result,
        "commit": commit(),
        "backend": jax.default_backend(),
        "devices": [str(dv) for dv in jax.devices()],
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "jax": jax.__version__,
    }
    if json_path:
        with open(json_path, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {json_path}")
    return result
