"""What every benchmark records about the machine, and how it writes its JSON."""

from __future__ import annotations

import json
import os
import platform

import jax


def finish(result: dict, json_path: str | None) -> dict:
    """Adds backend, devices, CPU count, machine and JAX version; writes JSON if asked."""
    result = {
        **result,
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
