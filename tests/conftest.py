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

JAX's persistent compilation cache serves the programs that tests compile again (a learner built
anew lowers to the program an earlier test compiled): the session keeps its own, removed at the
end (``_use_session_compile_cache``); with it the suite takes about four fifths of the time.

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


# The session's own compile cache (removed when the session ends), one folder per xdist worker so
# that no process reads an entry another is still writing (JAX locks its cache files only when
# eviction is on). ``BANDITS_JAX_TEST_XLA_CACHE=off`` turns it off.
if "BANDITS_JAX_TEST_XLA_CACHE" not in os.environ:
    os.environ["BANDITS_JAX_TEST_XLA_CACHE"] = tempfile.mkdtemp(prefix="bandits-jax-test-xla-")
    atexit.register(shutil.rmtree, os.environ["BANDITS_JAX_TEST_XLA_CACHE"], ignore_errors=True)


def _use_session_compile_cache() -> None:
    """Points JAX's persistent cache at the session's (every program, however fast it compiled).

    Learners built anew (in each test, each module) are new Python functions, so JAX's in-memory
    caches never serve them, but most of them lower to a program another test has compiled: the
    persistent cache, keyed by the lowered program, serves those. A command test that switches
    the cache off (``--compile-cache off``) leaves it off until the next module starts."""
    from jax.experimental.compilation_cache import compilation_cache

    root = os.environ["BANDITS_JAX_TEST_XLA_CACHE"]
    path = (
        None if root == "off" else os.path.join(root, os.environ.get("PYTEST_XDIST_WORKER", "main"))
    )
    if jax.config.jax_compilation_cache_dir != path:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        jax.config.update("jax_compilation_cache_dir", path)
        compilation_cache.reset_cache()


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Turns the session's compile cache on for the module, and drops JAX's compiled programs
    after it. A full run compiles thousands of programs; kept alive together in one process they
    ended in a segmentation fault inside XLA's compiler (always at the same test, never in a
    subset of the suite)."""
    _use_session_compile_cache()
    yield
    jax.clear_caches()
