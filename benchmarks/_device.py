"""Device and CPU-thread selection shared by the benchmarks.

The scripts that take ``--device cpu|gpu|auto``, ``--host-devices N`` and ``--threads N|auto``
declare them through :func:`benchmarks._options.parser` (``device=True``) and apply them with
:func:`select_device` before the first JAX computation::

    args = parser(__file__, __doc__, quick=..., device=True).parse_args(argv)
    select_device(args)

:func:`select_device` must run before JAX starts its backend (the first array created or
``jax.devices()`` called); ``jax.config.update("jax_enable_x64", True)`` at import is fine. The
JSON written by :func:`benchmarks._report.finish` records the backend and devices used.
"""

from __future__ import annotations

import argparse
import os


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
