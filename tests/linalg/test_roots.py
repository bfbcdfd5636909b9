"""Bracketed Newton: converges, survives bad Newton steps, reports failures by status."""

import jax
import jax.numpy as jnp
import numpy as np

from bandits_jax.linalg import roots


def _solve(fn, lo, hi, x0, max_steps=60):
    return jax.jit(
        lambda lo, hi, x0: roots.bracketed_newton(
            fn, lo, hi, x0, max_steps=max_steps, ftol=1e-13, xtol=1e-15
        )
    )(lo, hi, x0)


def test_cubic_root_matches_closed_form():
    res = _solve(lambda x: (x**3 - 2.0, 3 * x**2), 0.0, 4.0, 0.0)  # f'(0) = 0: bisection first
    assert int(res.status) == roots.CONVERGED
    np.testing.assert_allclose(float(res.x), 2.0 ** (1 / 3), rtol=1e-12)


def test_newton_leaving_bracket_falls_back_to_bisection():
    # arctan: Newton from far away overshoots wildly; the bracket keeps it inside.
    res = _solve(lambda x: (jnp.arctan(x - 1.0), 1.0 / (1.0 + (x - 1.0) ** 2)), -20.0, 30.0, 25.0)
    assert int(res.status) == roots.CONVERGED
    assert -20.0 <= float(res.x) <= 30.0
    np.testing.assert_allclose(float(res.x), 1.0, atol=1e-10)


def test_max_steps_reported():
    res = _solve(lambda x: (x**3 - 2.0, 3 * x**2), 0.0, 4.0, 0.0, max_steps=2)
    assert int(res.status) == roots.MAX_STEPS
    assert int(res.steps) == 2


def test_nonfinite_reported():
    res = _solve(lambda x: (jnp.log(x - 10.0), 1.0 / (x - 10.0)), 0.0, 4.0, 1.0)
    assert int(res.status) == roots.NONFINITE
