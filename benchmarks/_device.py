"""Device and CPU-thread selection shared by the benchmarks.

Every benchmark takes ``--device cpu|gpu|auto`` (default ``auto``: JAX's own choice, a GPU when
JAX's CUDA build is installed and sees one, else the CPU) and ``--threads N|auto`` (XLA's CPU
threads, see :mod:`bandits_jax.cli.process`). Use it as::

    p = argparse.ArgumentParser(...)
    add_device_option(p)
    args = p.parse_args(argv)
    select_device(args)  # before the first JAX computation

:func:`select_device` must run before JAX starts its backend (the first array created or
``jax.devices()`` called); ``jax.config.update("jax_enable_x64", True)`` at import is fine. The
JSON written by :func:`benchmarks._report.finish` records the backend and devices used.
"""

from __future__ import annotations

import argparse
import os

DEVICES = ("cpu", "gpu", "auto")


def add_device_option(parser: argparse.ArgumentParser) -> None:
    """Adds ``--device cpu|gpu|auto`` and ``--threads N|auto`` to a benchmark's parser."""
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default="auto",
        help="where JAX runs: cpu, gpu (fails if JAX sees none) or auto (JAX's default)",
    )
    parser.add_argument(
        "--host-devices",
        type=int,
        default=1,
        help="split the CPU into N host devices (one thread each); benchmarks that shard their "
        "trials use them",
    )
    parser.add_argument(
        "--threads",
        default=None,
        help="XLA CPU threads: N or auto (default: $BANDITS_JAX_THREADS, else auto); "
        "a user's own XLA_FLAGS/NPROC always win",
    )


def select_device(args: argparse.Namespace) -> str:
    """Applies ``args.device``, ``args.host_devices`` and ``args.threads`` before JAX's backend
    starts.

    Returns:
      The backend JAX will use (``"cpu"``, ``"gpu"``, ...).

    Raises:
      SystemExit: ``--device gpu`` without a GPU visible to JAX, or a bad ``--threads`` or
        ``--host-devices`` value (one line, as argparse does).
    """
    from bandits_jax.cli import process as threads

    host_devices = getattr(args, "host_devices", 1)
    if host_devices < 1:
        raise SystemExit(f"error: --host-devices: expected a positive int, got {host_devices!r}")
    if host_devices > 1:
        os.environ["XLA_FLAGS"] = threads.host_device_flags(
            os.environ.get("XLA_FLAGS", ""), host_devices
        )
    try:
        threads.configure_threads(
            getattr(args, "threads", None), devices=host_devices if host_devices > 1 else None
        )
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    import jax

    device = getattr(args, "device", "auto")
    if device == "cpu":
        jax.config.update("jax_platforms", "cpu")
    elif device == "gpu" and not os.environ.get("JAX_PLATFORMS"):
        jax.config.update("jax_platforms", "cuda")
    try:
        backend = jax.default_backend()
    except Exception as e:  # RuntimeError, or an AssertionError in jax 0.10 without CUDA
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise SystemExit(
            f"error: --device {device}: JAX cannot start that backend ({first}); "
            "install the CUDA build with: pip install 'bandits_jax[gpu]'"
        ) from None
    if device == "gpu" and backend != "gpu":
        raise SystemExit(
            f"error: --device gpu: JAX runs on {backend}; "
            "install the CUDA build with: pip install 'bandits_jax[gpu]'"
        )
    return backend
