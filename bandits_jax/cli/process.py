"""The command's process settings, applied once before JAX starts its backend (the library never
touches the process): XLA's CPU threads and the cores the process runs on, host devices, and
XLA's compiler options as ``XLA_FLAGS`` entries (so that every program compiles with them and
JAX's persistent cache keys by them).

Threads: jaxlib honours ``PJRT_NPROC`` (else ``NPROC``), ``--xla_cpu_multi_thread_eigen`` and the
CPU affinity. A round is a few dozen small kernels handed between XLA's threads, each hand-off
waiting for a time slice where another process holds the core, so ``auto`` is one thread on the
least busy core (one per host device with ``--devices N``); LAPACK gets one BLAS thread
(``docs/xla_cpu_hang.md``). A user's own ``XLA_FLAGS``, thread variables and ``taskset`` win.
"""

from __future__ import annotations

import os
import re
import sys
import time
import warnings
from collections.abc import Collection, Iterable, Mapping
from typing import NamedTuple

ENV_VAR = "BANDITS_JAX_THREADS"
EIGEN_FLAG = "--xla_cpu_multi_thread_eigen"
POOL_VARS = ("PJRT_NPROC", "NPROC")  # read by XLA's CPU client, PJRT_NPROC first
BLAS_VARS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")  # read by OpenBLAS
AUTO_THREADS = 1


class ThreadConfig(NamedTuple):
    """What :func:`configure_threads` did: the thread count, the environment variables set
    (``{}`` when the user set them all) and the cores the process was narrowed to (``None``:
    affinity left alone)."""

    threads: int
    environment: dict[str, str]
    cores: tuple[int, ...] | None


def parse_threads(value: object) -> int | None:
    """``None``/``"auto"`` -> ``None`` (the automatic choice); ``"N"``/``N`` -> ``N >= 1``.

    Raises:
      ValueError: anything else (names the option and what was expected).
    """
    text = "auto" if value is None else str(value).strip().lower()
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
    cross-device rendezvous while XLA also splits large kernels into tasks for the same pool:
    with only N threads both can wait on each other for ever (``tests/cli/test_process.py``),
    so N host devices get N more threads (idle unless blocked)."""
    return n + devices if devices is not None and devices > 1 else n


def thread_environment(
    n: int, environ: Mapping[str, str], devices: int | None = None
) -> dict[str, str]:
    """The environment variables to set for ``n`` XLA CPU threads (pure function): ``{name:
    value}`` of those to change (``environ`` is not modified). A user's own setting wins: an
    eigen flag already in ``XLA_FLAGS``, a ``PJRT_NPROC`` or ``NPROC``, a BLAS thread count
    (:data:`BLAS_VARS`); our flag is appended to the other ``XLA_FLAGS``. ``devices``: host
    devices (``--devices``): the pool gets :func:`pool_size` threads."""
    out: dict[str, str] = {}
    flags = environ.get("XLA_FLAGS", "")
    with_eigen = _with_flag(flags, EIGEN_FLAG[2:], "true" if n > 1 else "false")
    if with_eigen != flags:
        out["XLA_FLAGS"] = with_eigen
    if not any(v in environ for v in POOL_VARS):
        out["PJRT_NPROC"] = str(pool_size(n, devices))
    if not any(v in environ for v in BLAS_VARS):
        out["OPENBLAS_NUM_THREADS"] = "1"
    return out


def host_device_flags(flags: str, n: int) -> str:
    """``XLA_FLAGS`` value ``flags`` with ``--xla_force_host_platform_device_count=n`` (N host
    devices on the CPU), replacing a count already there (pure function)."""
    rest = re.sub(r"--xla_force_host_platform_device_count=\d+", "", flags)
    return (rest.strip() + f" --xla_force_host_platform_device_count={n}").strip()


def choose_cores(
    allowed: Iterable[int], busy: Mapping[int, float], n: int, salt: int = 0
) -> tuple[int, ...]:
    """The ``n`` least busy of the ``allowed`` cores, sorted (pure function). Busy fractions are
    compared in quarters (cores about as busy tie); ties go to the higher-numbered core (other
    work tends to start on core 0), rotated by ``salt`` (the process id), so that processes
    started together spread over equally idle cores."""
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
                if m := re.match(r"cpu(\d+)\s+(.*)", line):
                    v = [int(x) for x in m.group(2).split()]
                    out[int(m.group(1))] = (sum(v), v[3] + (v[4] if len(v) > 4 else 0))  # idle
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
    """How many CPU cores this process may run on (after :func:`configure_threads`), >= 1."""
    return max(1, len(_allowed_cores()))


def idle_cores(
    busy: Mapping[int, float] | None = None, allowed: Iterable[int] | None = None
) -> int:
    """How many of the ``allowed`` cores (default: this process's affinity) are less than half
    busy (``busy``: fractions per core, default :func:`core_busy`); at least 1."""
    busy = core_busy() if busy is None else busy
    allowed = _allowed_cores() if allowed is None else allowed
    return max(1, sum(1 for c in allowed if busy.get(c, 0.0) < 0.5))


def _narrow_affinity(n: int) -> tuple[int, ...] | None:
    """Keeps the process on the ``n`` least busy cores, unless affinity is unsupported, the user
    narrowed it already, or ``n`` covers every allowed core."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    allowed = os.sched_getaffinity(0)
    if len(allowed) < (os.cpu_count() or len(allowed)) or n >= len(allowed):
        return None  # a user's taskset wins; or nothing to narrow
    cores = choose_cores(allowed, core_busy(), n, salt=os.getpid())
    os.sched_setaffinity(0, cores)
    return cores


def _with_flag(flags: str, name: str, value: str) -> str:
    """``XLA_FLAGS`` value ``flags`` with ``--name=value`` appended unless ``--name`` is already
    there (a user's own setting wins; pure function)."""
    if re.search(rf"(^|\s)--{name}(=|\s|$)", flags):
        return flags
    return (flags.strip() + f" --{name}={value}").strip()


def xla_flags(flags: str, options: Mapping[str, object]) -> str:
    """``XLA_FLAGS`` value ``flags`` with the compiler ``options`` (``{name: value}`` of XLA
    debug options, e.g. ``{"xla_backend_optimization_level": 0}``) appended, each unless the
    user set it (pure function)."""
    for name, value in options.items():
        flags = _with_flag(
            flags, name, str(value).lower() if isinstance(value, bool) else str(value)
        )
    return flags


def configure_xla(options: Mapping[str, object] | None) -> dict[str, object] | None:
    """Puts the compiler ``options`` into ``XLA_FLAGS`` before JAX's backend starts; returns the
    options in effect, ours or a user's own value of the same flag (``{}``: XLA's defaults), or
    ``None`` when JAX's backend had already started (a caller's process, e.g. a test session,
    whose settings then stand)."""
    if backend_started():
        return None
    if not options:
        return {}
    flags = xla_flags(os.environ.get("XLA_FLAGS", ""), options)
    os.environ["XLA_FLAGS"] = flags
    return {name: _flag_value(flags, name, value) for name, value in options.items()}


def _flag_value(flags: str, name: str, ours: object) -> object:
    """The value of ``--name`` in ``flags``, typed like ``ours``."""
    text = re.findall(rf"(?:^|\s)--{name}=(\S+)", flags)[-1]
    if isinstance(ours, bool):
        return text.lower() in ("true", "1")
    return type(ours)(text) if isinstance(ours, int) else text


def numeric_flags() -> dict[str, str]:
    """The XLA options in ``XLA_FLAGS`` that change a run's numbers in the last bits (the
    optimisation level and the fusion emitters; not the codegen split): part of a resumable
    run's identity."""
    names = "xla_backend_optimization_level|xla_cpu_use_fusion_emitters"
    return dict(re.findall(rf"(?:^|\s)--({names})=(\S+)", os.environ.get("XLA_FLAGS", "")))


def backend_started() -> bool:
    """Whether JAX has started a backend in this process (then XLA's settings are fixed). Asked
    of JAX's public config (jax 0.10 has no public query): once a backend has started, JAX
    refuses to change a setting that must come before it; before, the change is undone at once."""
    if "jax" not in sys.modules:
        return False
    import jax

    name = "jax_cpu_get_local_topology_timeout_minutes"  # read only by a starting CPU backend
    value = getattr(jax.config, name)
    try:
        jax.config.update(name, value + 1)
    except RuntimeError:
        return True
    jax.config.update(name, value)
    return False


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
            warnings.warn(f"threads={n} ignored: JAX's backend has already started (set it "
                          "before the first JAX computation)", stacklevel=2)  # fmt: skip
        return ThreadConfig(n, {}, None)
    changes = thread_environment(n, os.environ, devices)
    os.environ.update(changes)
    return ThreadConfig(n, changes, _narrow_affinity(n))
