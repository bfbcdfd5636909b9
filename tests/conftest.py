"""Test configuration: float64 by default (exactness checks); float32 tests ask for it (and
``tests/test_float32.py`` runs it as users do).

The command's ``main(argv)``, which the CLI tests call in this process, would point JAX's
persistent compilation cache at the user's cache directory for the whole process
(``jax_compilation_cache_dir``). The command's cache is off in the session
(``BANDITS_JAX_COMPILE_CACHE=off``), with a fresh temporary data root (``BANDITS_JAX_DATA``);
tests of the cache set their own.

Most of the suite's time is XLA compiling small programs, so the suite compiles fast by
default (flags added to ``XLA_FLAGS`` before JAX starts its backend, inherited by the tests'
subprocesses; a value the caller set wins): LLVM's optimisation level 0
(``--xla_backend_optimization_level=0``) and XLA's classic CPU fusion emitters
(``--xla_cpu_use_fusion_emitters=false``, about a third of the compile time of the MLIR-based
ones on EOFD's update). They change how fast the compiled code runs, and its numbers in the last
bits. That shortcut is for the suite's plumbing, protocol and validation tests only: every test
that compares a learner's numbers with a reference compiles it at XLA's own options
(``tests/xla_defaults.py``, a per-program override, checked bit for bit against a process
without flags), and ``tests/test_float32.py`` and ``tests/test_readme.py`` run float32 in a
process without these flags and without x64, as a user's program does. Benchmarks compile with
XLA's defaults, the command with its ``--xla-opt-level`` and ``--xla-fusion-emitters``.

A session compile cache (JAX's persistent cache, so that a learner built again in another test
loads the program instead of compiling it) was tried and dropped: with these flags compiling is
cheap, and writing every program to the cache made the suite slower (5 min 58 s against
4 min 50 s without it, on 2 cores).

The suite runs in one worker process per core (pytest-xdist, ``-n auto --dist loadfile`` in
``pyproject.toml``): a test module stays in one worker, so its compiled programs are shared by
its tests; ``-n 0`` runs it in this process.
"""

import atexit
import os
import shutil
import tempfile

# flag -> the suite's value (a value the caller set in XLA_FLAGS wins)
_FAST_COMPILE = {"--xla_backend_optimization_level": "0", "--xla_cpu_use_fusion_emitters": "false"}
for _flag, _value in _FAST_COMPILE.items():
    if _flag not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_flag}={_value}".strip()

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
