"""XLA's CPU threads, set before JAX starts its backend.

PLACEHOLDER docstring: finalised from benchmarks/cpu_threads.py measurements.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from collections.abc import Mapping

ENV_VAR = "BANDITS_JAX_THREADS"
EIGEN_FLAG = "--xla_cpu_multi_thread_eigen"
POOL_VARS = ("PJRT_NPROC", "NPROC")  # read by XLA's CPU client, PJRT_NPROC first


def parse_threads(value: object) -> int | None:
    """``None``/``"auto"`` -> ``None`` (the automatic choice); ``"N"``/``N`` -> ``N >= 1``.

    Raises:
      ValueError: anything else (names the option and what was expected).
    """
    if value is None:
        return None
    text = str(value).strip().lower()
    if text == "auto":
        return None
    if isinstance(value, bool) or not re.fullmatch(r"\d+", text) or int(text) < 1:
        raise ValueError(f"--threads: expected an integer >= 1 or auto, got {value!r}")
    return int(text)


def auto_threads(cpu_count: int | None = None) -> int:
    """The automatic thread count."""
    return 1


def thread_environment(threads: int | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment variables to set for ``threads`` XLA CPU threads (pure function).

    A user's own setting always wins: a ``--xla_cpu_multi_thread_eigen`` already in
    ``XLA_FLAGS`` is kept (our flag is not added), and so is a ``PJRT_NPROC`` or ``NPROC``
    already set; other ``XLA_FLAGS`` are kept as they are.

    Args:
      threads: threads for XLA's CPU work (``None``: :func:`auto_threads`).
      environ: the current environment (``os.environ``).

    Returns:
      ``{name: value}`` of the variables to change (empty when the user set everything).
    """
    n = auto_threads() if threads is None else threads
    out: dict[str, str] = {}
    flags = environ.get("XLA_FLAGS", "")
    if not re.search(rf"(^|\s){EIGEN_FLAG}(=|\s|$)", flags):
        eigen = f"{EIGEN_FLAG}={'true' if n > 1 else 'false'}"
        out["XLA_FLAGS"] = (flags.strip() + " " + eigen).strip()
    if not any(v in environ for v in POOL_VARS):
        out["PJRT_NPROC"] = str(n)
    return out


def threads_from_env(environ: Mapping[str, str] | None = None) -> int | None:
    """``$BANDITS_JAX_THREADS`` parsed by :func:`parse_threads` (unset: ``None``, auto).

    Raises:
      ValueError: a bad value (names the variable).
    """
    value = (os.environ if environ is None else environ).get(ENV_VAR)
    try:
        return parse_threads(value)
    except ValueError:
        raise ValueError(f"${ENV_VAR}: expected an integer >= 1 or auto, got {value!r}") from None


def configure_threads(threads: object = None) -> dict[str, str]:
    """Sets XLA's CPU threads in ``os.environ``; call it before JAX's first computation.

    Args:
      threads: ``N``, ``"auto"`` or ``None`` (then ``$BANDITS_JAX_THREADS``, else auto).

    Returns:
      The variables set (see :func:`thread_environment`).

    Raises:
      ValueError: a bad ``threads`` or ``$BANDITS_JAX_THREADS`` value.
    """
    n = threads_from_env() if threads is None else parse_threads(threads)
    if backend_started():  # too late: XLA read its settings when the backend started
        if n is not None:
            warnings.warn(
                f"threads={n} ignored: JAX's backend has already started (set it before the "
                "first JAX computation)",
                stacklevel=2,
            )
        return {}
    changes = thread_environment(n, os.environ)
    os.environ.update(changes)
    return changes


def backend_started() -> bool:
    """Whether JAX has started a backend in this process (then XLA's settings are fixed)."""
    if "jax" not in sys.modules:
        return False
    from jax._src import xla_bridge  # no public equivalent in jax 0.10

    return xla_bridge.backends_are_initialized()
