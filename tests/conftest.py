"""Test configuration: float64 by default (exactness checks); float32 tests ask for it.

The command's ``main(argv)``, which the CLI tests call in this process, would turn on JAX's
persistent compilation cache for the whole process (``jax_compilation_cache_dir``), so that every
later test wrote its executables into the user's cache directory whenever a compilation took
longer than the threshold. The session runs with the cache off (``BANDITS_JAX_COMPILE_CACHE``)
and a fresh temporary data root (``BANDITS_JAX_DATA``); tests of the cache set their own.

Most of the suite's time is XLA compiling small programs, so tests compile with LLVM's
optimisation level 0 (``--xla_backend_optimization_level=0``, added to ``XLA_FLAGS`` before JAX
starts its backend, inherited by the tests' subprocesses; a level the caller set wins): the
suite then takes about three quarters of the time. The level changes how fast the compiled code
runs, not what it computes (XLA keeps IEEE semantics at every level, and the suite passes at
either). Benchmarks compile at XLA's default level, the command at its ``--xla-opt-level``.

The suite runs in one worker process per core (pytest-xdist, ``-n auto --dist loadfile`` in
``pyproject.toml``): a test module stays in one worker, so its compiled programs are shared by
its tests; ``-n 0`` runs it in this process.
"""

import atexit
import os
import shutil
import tempfile

_OPT_FLAG = "--xla_backend_optimization_level"
if _OPT_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_OPT_FLAG}=0".strip()

import jax  # noqa: E402  (after XLA_FLAGS: the backend reads them when it starts)
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)
os.environ.setdefault("BANDITS_JAX_COMPILE_CACHE", "off")
if "BANDITS_JAX_DATA" not in os.environ:  # a fresh data root, removed when the session ends
    os.environ["BANDITS_JAX_DATA"] = tempfile.mkdtemp(prefix="bandits-jax-tests-")
    atexit.register(shutil.rmtree, os.environ["BANDITS_JAX_DATA"], ignore_errors=True)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drops JAX's compiled programs after each test module. A full run compiles thousands of
    programs; kept alive together in one process they ended in a segmentation fault inside
    XLA's compiler (always at the same test, never in a subset of the suite)."""
    yield
    jax.clear_caches()
