"""XLA's own compiler options, for the tests that check numbers at what users run.

``tests/conftest.py`` compiles the suite fast (LLVM level 0, XLA's classic CPU emitters, set in
``XLA_FLAGS`` for the whole process); a user's program compiles with XLA's defaults. A program
jitted here with ``compiler_options=DEFAULTS`` undoes the conftest's flags for that program alone
(JAX passes them as per-executable overrides of ``XLA_FLAGS``). ``tests/test_xla_defaults.py``
checks that such a program computes, bit for bit, what a process without ``XLA_FLAGS`` computes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

# XLA's defaults for the options tests/conftest.py changes (xla/debug_options_flags.cc).
DEFAULTS: dict[str, Any] = {
    "xla_backend_optimization_level": 3,
    "xla_cpu_use_fusion_emitters": True,
}


def jit(fn: Callable, **kwargs: Any) -> Callable:
    """``jax.jit(fn, **kwargs)`` compiled at XLA's default options (the whole program: inner
    ``jit`` calls are inlined into it)."""
    return jax.jit(fn, compiler_options=DEFAULTS, **kwargs)
