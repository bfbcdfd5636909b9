"""Test configuration: float64 by default (exactness checks); float32 tests ask for it."""

import jax

jax.config.update("jax_enable_x64", True)
