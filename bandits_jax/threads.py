"""XLA's CPU threads, chosen before JAX starts its backend (the command and the benchmarks).

What jaxlib 0.10 honours (checked by counting threads and timing, see
``benchmarks/cpu_threads.py``): ``PJRT_NPROC`` (else ``NPROC``) sizes the CPU client's thread
pools, which otherwise take one thread per schedulable core; ``--xla_cpu_multi_thread_eigen`` in
``XLA_FLAGS`` switches Eigen's multi-threaded kernels; the process's CPU affinity (``taskset``,
``os.sched_setaffinity``) bounds both. ``intra_op_parallelism_threads`` is not an XLA flag and
has no effect.

Why a default. A round of a learner is a few dozen small kernels, and XLA's CPU runtime hands
them between its threads. When another process holds a core, every hand-off to a thread whose core
is taken waits for a time slice. ``python -m benchmarks.cpu_threads --quick`` on a 2-core machine
(``docs/bench/cpu_threads.json``, ms per round quiet / with one busy core): OFUL (400, 1) 7.0 /
13.7 with XLA's defaults, 6.0 / 24.3 with ``PJRT_NPROC=1``, 8.0 / 8.4 with the process kept on
one core; EOFD (785, 1, 78) 0.53 / 0.78 against 0.52 / 0.56. Shrinking the pools does not help;
keeping the whole process on one core removes the slowdown (the hand-offs then stay on that
core) at a cost of up to 15% on a quiet machine.

The default (``auto``) is therefore one thread on one core: ``PJRT_NPROC=1``,
``--xla_cpu_multi_thread_eigen=false`` and the process's affinity narrowed to the least busy core
(sampled from ``/proc/stat``); with ``--devices N`` (N host devices, parallelism across trials) it
is N threads on the N least busy cores, with N more pool threads that only run when a device blocks
at a cross-device rendezvous (:func:`pool_size`: without them sharded runs can deadlock).
``--threads N`` (or ``BANDITS_JAX_THREADS=N``) asks for N threads on N cores; N at least the number
of cores the process may use leaves the affinity alone and gives XLA's own defaults. A user's own
settings always win: a ``--xla_cpu_multi_thread_eigen`` already in ``XLA_FLAGS``, a ``PJRT_NPROC``
or ``NPROC`` already set, and an affinity already narrowed (e.g. by ``taskset``) are kept as they
are.

Compiling is another matter: no run is timed meanwhile, and XLA compiles with Python's GIL
released, so one thread compiles while another traces. So ``reproduce`` compiles its learners
before any trial on up to one thread per idle core (:func:`compile_cores`), each thread on a core
group of its own as wide as the runs' (:func:`thread_groups`: a thread starts on its starter's
cores, which would put every compile thread on the runs' one core), with XLA's own threads allowed
on those cores for the while (:func:`on_cores`) and back on the runs' core afterwards. A group is
no wider than the runs' cores: with the compiling threads widened, OFUL-MLogB's program at
d = 100 ran many times slower on its one core (XLA appears to fit a program's parallel tasks to
the compiling thread's cores).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import sys
import threading
import time
import warnings
from collections.abc import Collection, Iterable, Mapping
from typing import NamedTuple

ENV_VAR = "BANDITS_JAX_THREADS"
EIGEN_FLAG = "--xla_cpu_multi_thread_eigen"
POOL_VARS = ("PJRT_NPROC", "NPROC")  # read by XLA's CPU client, PJRT_NPROC first
AUTO_THREADS = 1


class ThreadConfig(NamedTuple):
    """What :func:`configure_threads` did.

    Attributes:
      threads: the thread count applied.
      environment: the environment variables set (``{}`` when the user set them all).
      cores: the CPU cores the process was narrowed to (``None``: affinity left alone).
    """

    threads: int
    environment: dict[str, str]
    cores: tuple[int, ...] | None


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


def resolve_threads(threads: int | None, devices: int | None = None) -> int:
    """The thread count: ``threads`` if given, else ``max(AUTO_THREADS, devices)``."""
    return threads if threads is not None else max(AUTO_THREADS, devices or 1)


def pool_size(n: int, devices: int | None = None) -> int:
    """XLA CPU pool threads for ``n`` compute threads and ``devices`` host devices (pure).

    With N > 1 host devices each device's program holds a pool thread and blocks in it at every
    cross-device rendezvous (e.g. the predicate of a ``while_loop`` over trials sharded across
    the devices), while XLA also splits large kernels into tasks for the same pool: with only N
    threads both can wait on each other for ever (EOFD at (d, K, m) = (100, 4, 40), 64 trials
    on 2 host devices hung with ``PJRT_NPROC=2`` and ran with 3; ``tests/cli/test_threads.py``).
    So N host devices get N more threads than compute threads (they sit idle unless blocked)."""
    return n + devices if devices is not None and devices > 1 else n


def thread_environment(
    n: int, environ: Mapping[str, str], devices: int | None = None
) -> dict[str, str]:
    """The environment variables to set for ``n`` XLA CPU threads (pure function).

    A user's own setting always wins: a ``--xla_cpu_multi_thread_eigen`` already in
    ``XLA_FLAGS`` is kept (ours is not added), and so is a ``PJRT_NPROC`` or ``NPROC`` already
    set; the other ``XLA_FLAGS`` are kept as they are, ours appended.

    Args:
      n: threads for XLA's CPU work.
      environ: the current environment (``os.environ``); not modified.
      devices: host devices (``--devices``): the pool gets :func:`pool_size` threads.

    Returns:
      ``{name: value}`` of the variables to change (empty when the user set everything).
    """
    out: dict[str, str] = {}
    flags = environ.get("XLA_FLAGS", "")
    if not re.search(rf"(^|\s){EIGEN_FLAG}(=|\s|$)", flags):
        eigen = f"{EIGEN_FLAG}={'true' if n > 1 else 'false'}"
        out["XLA_FLAGS"] = (flags.strip() + " " + eigen).strip()
    if not any(v in environ for v in POOL_VARS):
        out["PJRT_NPROC"] = str(pool_size(n, devices))
    return out


def host_device_flags(flags: str, n: int) -> str:
    """``XLA_FLAGS`` value ``flags`` with ``--xla_force_host_platform_device_count=n`` (N host
    devices on the CPU), replacing a count already there (pure function)."""
    rest = re.sub(r"--xla_force_host_platform_device_count=\d+", "", flags)
    return (rest.strip() + f" --xla_force_host_platform_device_count={n}").strip()


def choose_cores(
    allowed: Iterable[int], busy: Mapping[int, float], n: int, salt: int = 0
) -> tuple[int, ...]:
    """The ``n`` least busy of the ``allowed`` cores, sorted (pure function).

    Busy fractions are compared in quarters, so that cores that are about as busy tie. Ties go
    to the higher-numbered core (other work tends to start on core 0), rotated by ``salt`` (the
    process id): processes started together spread over equally idle cores.
    """
    cores = sorted(allowed)
    size = cores[-1] + 1 if cores else 1
    ranked = sorted(
        cores, key=lambda c: (round(4 * busy.get(c, 0.0)), (salt + size - 1 - c) % size)
    )
    return tuple(sorted(ranked[:n]))


def core_busy(interval: float = 0.05) -> dict[int, float]:
    """Busy fraction of each core over ``interval`` seconds from ``/proc/stat`` (``{}`` where
    it cannot be read)."""

    def sample() -> dict[int, tuple[int, int]]:
        out = {}
        with open("/proc/stat") as f:
            for line in f:
                m = re.match(r"cpu(\d+)\s+(.*)", line)
                if m:
                    v = [int(x) for x in m.group(2).split()]
                    idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
                    out[int(m.group(1))] = (sum(v), idle)
        return out

    try:
        a = sample()
        time.sleep(interval)
        b = sample()
    except (OSError, ValueError, IndexError):
        return {}
    busy = {}
    for c in a.keys() & b.keys():
        total, idle = b[c][0] - a[c][0], b[c][1] - a[c][1]
        busy[c] = 1.0 - idle / total if total > 0 else 0.0
    return busy


def _allowed_cores() -> Collection[int]:
    """The CPU cores this process may run on (its affinity; every core where there is none)."""
    if hasattr(os, "sched_getaffinity"):
        return os.sched_getaffinity(0)
    return range(os.cpu_count() or 1)


def usable_cores() -> int:
    """How many CPU cores this process may run on (its affinity, after
    :func:`configure_threads`), at least 1."""
    return max(1, len(_allowed_cores()))


def idle_cores(
    busy: Mapping[int, float] | None = None, allowed: Iterable[int] | None = None
) -> int:
    """How many of the ``allowed`` cores (default: this process's affinity) are less than half
    busy (``busy``: fractions per core, default :func:`core_busy`); at least 1."""
    if allowed is None:
        allowed = _allowed_cores()
    return max(1, len(_idle(allowed, busy)))


def _idle(allowed: Iterable[int], busy: Mapping[int, float] | None) -> tuple[int, ...]:
    """The ``allowed`` cores less than half busy (``busy``: default :func:`core_busy`), sorted."""
    busy = core_busy() if busy is None else busy
    return tuple(sorted(c for c in allowed if busy.get(c, 0.0) < 0.5))


def compile_cores(busy: Mapping[int, float] | None = None) -> tuple[int, ...]:
    """The cores to compile on (:func:`bandits_jax.sim.chunks.compile_ahead`): of those this
    process could use before :func:`configure_threads` kept its runs on fewer, the ones less than
    half busy (``busy``: fractions per core, default :func:`core_busy`); the process's own
    cores if none is. Compiling on spare cores does not disturb the timed runs."""
    return _idle(_WIDE_AFFINITY or _allowed_cores(), busy) or tuple(sorted(_allowed_cores()))


def thread_groups(cores: Collection[int] | None, size: int | None = None) -> list[tuple[int, ...]]:
    """Disjoint groups of ``cores`` (sorted), each of ``size`` cores (default: as many as the
    calling thread may use), for threads that compile while it waits
    (:func:`bandits_jax.sim.chunks.compile_ahead`): XLA sizes a program's parallel tasks by the
    compiling thread's cores, so a program compiled on such a group is the one the caller would
    compile. Empty when ``cores`` is ``None`` or too few, or affinity is unsupported."""
    if cores is None or not hasattr(os, "sched_getaffinity"):
        return []
    size, cores = size or len(os.sched_getaffinity(0)), sorted(cores)
    return [tuple(cores[i : i + size]) for i in range(0, len(cores) - size + 1, size)]


@contextlib.contextmanager
def on_cores(cores: Collection[int] | None):
    """Within the block every thread of this process may run on ``cores`` (``None``: nothing
    changes), except Python's own threads, which stay where they are (a program's parallel tasks
    follow the compiling thread's cores); afterwards each thread moved is back where it was
    (threads started in the block: where the calling thread was). XLA's own threads start with
    the backend on the process's cores; while :func:`bandits_jax.sim.chunks.compile_ahead`
    compiles on spare cores (:func:`compile_cores`) they may use those too. Linux only
    (``/proc/self/task``); elsewhere nothing changes."""
    task = pathlib.Path("/proc/self/task")
    if cores is None or not hasattr(os, "sched_setaffinity") or not task.is_dir():
        yield
        return

    def others() -> list[int]:  # the threads that are not Python's
        python = {t.native_id for t in threading.enumerate()}
        return [int(p.name) for p in task.iterdir() if p.name.isdigit()
                and int(p.name) not in python]  # fmt: skip

    own = os.sched_getaffinity(0)
    saved = {}
    for tid in others():
        with contextlib.suppress(OSError):  # a thread that has just ended
            saved[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, cores)
    try:
        yield
    finally:
        for tid in others():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, saved.get(tid, own))


_WIDE_AFFINITY: tuple[int, ...] = ()  # the affinity before _narrow_affinity, if it narrowed


def _narrow_affinity(n: int) -> tuple[int, ...] | None:
    """Keeps the process on the ``n`` least busy cores, unless affinity is unsupported, the user
    narrowed it already, or ``n`` covers every allowed core."""
    global _WIDE_AFFINITY
    if not hasattr(os, "sched_getaffinity"):
        return None
    allowed = os.sched_getaffinity(0)
    if len(allowed) < (os.cpu_count() or len(allowed)) or n >= len(allowed):
        return None  # a user's taskset wins; or nothing to narrow
    cores = choose_cores(allowed, core_busy(), n, salt=os.getpid())
    _WIDE_AFFINITY = tuple(sorted(allowed))
    os.sched_setaffinity(0, cores)
    return cores


def backend_started() -> bool:
    """Whether JAX has started a backend in this process (then XLA's settings are fixed)."""
    if "jax" not in sys.modules:
        return False
    from jax._src import xla_bridge  # no public equivalent in jax 0.10

    return xla_bridge.backends_are_initialized()


def configure_threads(threads: object = None, *, devices: int | None = None) -> ThreadConfig:
    """Applies the thread choice to this process; call it before JAX's first computation.

    Args:
      threads: ``N``, ``"auto"`` or ``None`` (then ``$BANDITS_JAX_THREADS``, else auto).
      devices: host devices asked for (``--devices``): auto gives as many threads.

    Returns:
      A :class:`ThreadConfig`. Once JAX's backend has started nothing can change: nothing is
      set (a warning when ``threads`` was given explicitly).

    Raises:
      ValueError: a bad ``threads`` or ``$BANDITS_JAX_THREADS`` value.
    """
    asked = threads_from_env() if threads is None else parse_threads(threads)
    n = resolve_threads(asked, devices)
    if backend_started():  # too late: XLA read its settings when the backend started
        if asked is not None:
            warnings.warn(
                f"threads={n} ignored: JAX's backend has already started (set it before the "
                "first JAX computation)",
                stacklevel=2,
            )
        return ThreadConfig(n, {}, None)
    changes = thread_environment(n, os.environ, devices)
    os.environ.update(changes)
    return ThreadConfig(n, changes, _narrow_affinity(n))
